"""The labelled fixtures' markers: `# expect: KIND[, KIND]` (Python) or `// expect: KIND` (TypeScript/JavaScript)
at the end of the line the inventory must report."""

from __future__ import annotations

import re
from pathlib import Path

_EXPECT = re.compile(r"(?:#|//)\s*expect:\s*([a-z, -]+)$")


def expected(case: Path) -> set[tuple[str, int, str]]:
    """(file relative to the case, line, kind) of every marker in a fixture file or folder."""
    files = [case] if case.is_file() else sorted(p for p in case.rglob("*") if p.is_file())
    base = case.parent if case.is_file() else case
    out = set()
    for f in files:
        for number, line in enumerate(f.read_text().splitlines(), 1):
            m = _EXPECT.search(line)
            if m:
                out |= {(f.relative_to(base).as_posix(), number, k.strip()) for k in m.group(1).split(",")}
    return out
