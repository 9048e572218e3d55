"""The labelled fixtures' markers: `# expect: KIND[, KIND]` (Python) or `// expect: KIND` (TypeScript/JavaScript)
at the end of the line the inventory must report, and `expect-glue: KIND[, KIND]` at a line the file's grouped
transport-glue finding (kind `transport-session-map`, itself marked `expect:` at the map's line) must stand for."""

from __future__ import annotations

import re
from pathlib import Path

from mcp_stateless.inventory.engine import Inventory

_EXPECT = re.compile(r"(?:#|//)\s*expect:\s*([a-z, -]+)$")
_EXPECT_GLUE = re.compile(r"(?:#|//)\s*expect-glue:\s*([a-z, -]+)$")


def _marked(case: Path, marker: re.Pattern[str]) -> set[tuple[str, int, str]]:
    files = [case] if case.is_file() else sorted(p for p in case.rglob("*") if p.is_file())
    base = case.parent if case.is_file() else case
    out = set()
    for f in files:
        for number, line in enumerate(f.read_text().splitlines(), 1):
            m = marker.search(line)
            if m:
                out |= {(f.relative_to(base).as_posix(), number, k.strip()) for k in m.group(1).split(",")}
    return out


def expected(case: Path) -> set[tuple[str, int, str]]:
    """(file relative to the case, line, kind) of every `expect:` marker in a fixture file or folder."""
    return _marked(case, _EXPECT)


def expected_glue(case: Path) -> set[tuple[str, int, str]]:
    """(file, line, kind) of every `expect-glue:` marker: what the grouped findings stand for."""
    return _marked(case, _EXPECT_GLUE)


def glued(inv: Inventory) -> set[tuple[str, int, str]]:
    """(file, line, kind) of every finding a grouped finding of the inventory stands for."""
    return {(c.file, c.line, c.kind) for f in inv.findings for c in f.covers}
