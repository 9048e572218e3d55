"""A test gives up on a missing capability only through `services.unavailable` (or `services.need`), which
skip locally and fail under CI: a bare `pytest.skip`, a skip mark or an `importorskip` anywhere else would let a
path go unrun in CI with a green build."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).parent
ALLOWED = {TESTS / "services.py"}
SKIPS = {"skip", "skipif", "importorskip"}


def skip_calls(path: Path, root: Path = TESTS) -> list[str]:
    """`pytest.skip(...)`, `pytest.importorskip(...)`, `@pytest.mark.skip/skipif`, as `file:line`."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Attribute) and node.attr in SKIPS:
            base = node.value
            if (isinstance(base, ast.Name) and base.id == "pytest") or (
                isinstance(base, ast.Attribute) and base.attr == "mark"
            ):
                found.append((node.lineno, f"{path.relative_to(root)}:{node.lineno}"))
    return [hit for _, hit in sorted(found)]


def test_every_skip_goes_through_the_ci_aware_helper() -> None:
    offenders = [hit for path in sorted(TESTS.rglob("*.py")) if path not in ALLOWED for hit in skip_calls(path)]
    assert offenders == []


def test_the_checker_sees_each_kind_of_skip(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        "import pytest\n"
        "pytest.skip('x')\n"
        "@pytest.mark.skipif(True, reason='y')\n"
        "def f(): pass\n"
        "mod = pytest.importorskip('z')\n"
        "pytest.mark.skip\n"
    )
    assert skip_calls(sample, tmp_path) == ["sample.py:2", "sample.py:3", "sample.py:5", "sample.py:6"]
