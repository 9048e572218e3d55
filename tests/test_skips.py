"""A test gives up on a missing capability only through `services.unavailable` (or `services.need`), which
skip locally and fail under CI: a bare `pytest.skip` (or one imported by name), a skip mark, an `importorskip` or a
unittest skip anywhere else would let a path go unrun in CI with a green build; and the helper itself is held to
failing under CI."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from services import unavailable

TESTS = Path(__file__).parent
ALLOWED = {TESTS / "services.py"}
SKIPS = {"skip", "skipif", "importorskip"}
UNITTEST_SKIPS = {"skip", "skipIf", "skipUnless", "SkipTest"}


def skip_calls(path: Path, root: Path = TESTS) -> list[str]:
    """`pytest.skip(...)`, `pytest.importorskip(...)`, `@pytest.mark.skip/skipif`, the same names imported from
    pytest (`from pytest import skip`), and unittest's skips, as `file:line`."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        hit = False
        if isinstance(node, ast.Attribute) and node.attr in SKIPS:
            base = node.value
            hit = (isinstance(base, ast.Name) and base.id == "pytest") or (
                isinstance(base, ast.Attribute) and base.attr == "mark"
            )
        elif isinstance(node, ast.Attribute) and node.attr in UNITTEST_SKIPS:
            hit = isinstance(node.value, ast.Name) and node.value.id == "unittest"
        elif isinstance(node, ast.ImportFrom) and node.module in ("pytest", "unittest"):
            names = SKIPS if node.module == "pytest" else UNITTEST_SKIPS
            hit = any(alias.name in names for alias in node.names)
        if hit and isinstance(node, ast.Attribute | ast.ImportFrom):
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
        "from pytest import importorskip\n"
        "import unittest\n"
        "raise unittest.SkipTest('w')\n"
        "from unittest import skipIf\n"
        "pytest.mark.xfail\n"
        "services.unavailable('v')\n"
    )
    assert skip_calls(sample, tmp_path) == ["sample.py:2", "sample.py:3", "sample.py:5", "sample.py:6", "sample.py:7",
                                            "sample.py:9", "sample.py:10"]


def _outcome(reason: str) -> tuple[str, str]:
    """What `unavailable` raised, caught whatever it is (a skip escaping here would skip this test, not fail
    it), by its type's name: naming pytest's skip exception would be a skip call to the checker above."""
    try:
        unavailable(reason)
    except BaseException as e:  # pytest's outcomes are BaseExceptions, not Exceptions
        return type(e).__name__, str(e)
    return "returned", ""


def test_the_helper_fails_under_ci_and_skips_only_outside_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """What the checker enforces is only worth it if the helper really turns a skip red under CI (.ci/run sets
    CI=true), with the reason kept."""
    monkeypatch.setenv("CI", "true")
    reason = "127.0.0.2 is not bindable here"
    assert _outcome(reason) == ("Failed", f"{reason}: CI must provide it")
    monkeypatch.delenv("CI")
    assert _outcome(reason) == ("Skipped", reason)
