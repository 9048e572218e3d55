"""Every Python example in docs/observability.md runs as written and prints what the page says."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "observability.md"


def blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", PAGE.read_text(), re.S)


def run(code: str) -> str:
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60,
                       stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_the_page_has_its_two_examples() -> None:
    assert len(blocks()) == 2


@pytest.mark.slow
def test_the_metrics_example_prints_what_the_page_says() -> None:
    assert run(blocks()[0]) == "tools/call echo 1.0\n"


@pytest.mark.slow
def test_the_middleware_example_times_each_request() -> None:
    lines = run(blocks()[1]).splitlines()
    assert [line.rsplit(" in ", 1)[0] for line in lines] == ["server/discover answered", "tools/call answered"]
