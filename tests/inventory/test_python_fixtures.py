"""The Python analyzer on the labelled fixtures: every `# expect: KIND` marker found at its line, nothing else.

Each fixture file is inventoried on its own (a stdio server is decided per tree), each fixture folder as a tree.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from mcp_stateless.inventory import python_source
from mcp_stateless.inventory.engine import inventory

from .markers import expected as _expected
from .markers import expected_glue, glued

FIXTURES = Path(__file__).parent / "fixtures" / "python"
CASES = sorted(p for p in FIXTURES.iterdir() if p.suffix == ".py" or p.is_dir())


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_fixture_findings_are_exactly_the_markers(case: Path) -> None:
    inv = inventory(case)
    assert {(f.file, f.line, f.kind) for f in inv.findings} == _expected(case)
    assert glued(inv) == expected_glue(case)


def test_every_clean_fixture_is_clean_and_the_set_covers_the_python_kinds() -> None:
    kinds = {k for case in CASES for _, _, k in _expected(case)}
    assert kinds >= {"session-keyed-state", "session-id-read", "initialize-state", "server-request",
                     "client-answer-kept", "log-level-state", "resource-subscriptions", "unsolicited-notification",
                     "per-connection-registration", "get-stream", "event-replay", "process-secret", "module-state",
                     "stdout-write", "dependency-range", "lifespan-client-state", "connection-auth",
                     "local-file-state", "transport-session-map"}
    assert [c.name for c in CASES if c.name.startswith("clean") and _expected(c)] == []


@pytest.mark.parametrize("text", ["def broken(:\n", "\x00\x00", "import mcp\n" + "(" * 500 + ")" * 500 + "\n"])
def test_unparsable_source_yields_nothing(text: str) -> None:
    assert python_source.analyze("bad.py", text) == []


def test_a_mention_in_a_string_or_comment_is_not_a_finding() -> None:
    text = 'import mcp\n# ctx.session.list_roots()\nX = "send_resource_updated mcp-session-id"\n'
    assert python_source.analyze("m.py", text) == []
