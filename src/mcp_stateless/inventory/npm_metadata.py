"""package.json: does the `@modelcontextprotocol/sdk` range let npm install a major the code was not written for?

The code is taken as written for the 1.x SDK when it imports `@modelcontextprotocol/sdk` (the package of the 1.x
line). A range is bounded when every alternative of it (`||`) has an upper bound below 2.0.0: `^1.30.0`, `~1.2`,
`1.x`, `>=1.9 <2`, `1.2.3 - 1.9` are bounded; `*`, `x`, `""`, `latest`, `>=1`, `>1.0.0`, `^2.0.0`, `1 - 2` are open.
Non-registry specifiers (`file:`, `link:`, `workspace:`, git and tarball URLs) name no version and are left alone.
"""

from __future__ import annotations

import json
import math
import re

from .finding import Finding, source_lines

SDK = "@modelcontextprotocol/sdk"
SECTIONS = ("dependencies", "peerDependencies", "optionalDependencies")
_SDK_IMPORT = re.compile(r"""["'](@modelcontextprotocol/sdk(?:/[^"'\s]*)?)["']""")
_NOT_A_RANGE = re.compile(r"^(?:file:|link:|workspace:|portal:|patch:|git|https?:|[\w.-]+/[\w.-]+(?:#.*)?$)")
_PART = re.compile(r"^(\d+|[xX*])(?:\.(\d+|[xX*]))?(?:\.(\d+|[xX*]))?")


def sdk1_import(text: str) -> str:
    """The first `@modelcontextprotocol/sdk` specifier the source imports (import, require or dynamic import),
    else ''."""
    m = _SDK_IMPORT.search(text)
    return m.group(1) if m else ""


def imports_sdk1(text: str) -> bool:
    """The source imports `@modelcontextprotocol/sdk` (import, require or dynamic import)."""
    return bool(sdk1_import(text))


def _version(text: str) -> tuple[float, float, float]:
    """`1.2.3` -> (1, 2, 3); a missing or wildcard part is infinite."""
    m = _PART.match(text.lstrip("vV="))
    if not m:
        return (math.inf, math.inf, math.inf)
    parts = [float(g) if g is not None and g.isdigit() else math.inf for g in m.groups()]
    return (parts[0], parts[1], parts[2])


def _highest_major(comparator: str) -> float:
    """The highest major version one comparator admits (infinite when it has no upper bound)."""
    for op in ("<=", "<", ">=", ">", "^", "~", "="):
        if comparator.startswith(op):
            major, minor, patch = _version(comparator[len(op):])
            if op in {">=", ">"}:
                return math.inf
            if op == "<":
                # `<2`, `<2.x`, `<2.0.0` all stop below 2.0.0
                return major - 1 if minor in {0, math.inf} and patch in {0, math.inf} and major != math.inf else major
            return major
    return _version(comparator)[0]  # a bare or partial version: 1, 1.x, 1.2.3, *


def admits_major(spec: str, major: int = 2) -> bool | None:
    """Whether an npm range admits a version of `major` or later; None for a specifier that is not a range."""
    spec = spec.strip()
    if _NOT_A_RANGE.match(spec) and not _PART.match(spec):
        return None
    if spec.startswith("npm:"):
        spec = spec.rsplit("@", 1)[-1] if "@" in spec[4:] else "*"
    for alternative in spec.split("||"):
        alternative = re.sub(r"(<=|>=|<|>|=|\^|~)\s+", r"\1", alternative.strip())
        if not alternative or not (alternative[0].isdigit() or alternative[0] in "<>=^~vVxX*"):
            return True  # `*`-like or a dist-tag (`latest`, `next`): whatever is published
        hyphen = re.match(r"^(\S+)\s+-\s+(\S+)$", alternative)
        if hyphen:
            highest = _version(hyphen.group(2))[0]
        else:
            highest = min((_highest_major(c) for c in alternative.split()), default=math.inf)
        if highest >= major:
            return True
    return False


def package_findings(rel: str, text: str, written_for_1: str) -> list[Finding]:
    """`written_for_1`: where the code imports the 1.x package (`@modelcontextprotocol/sdk/server/mcp.js in
    src/index.ts`), '' when it does not."""
    if not written_for_1:
        return []
    try:
        data = json.loads(text)
    except ValueError:
        return []
    if not isinstance(data, dict):
        return []
    lines = source_lines(text)
    out: list[Finding] = []
    for section in SECTIONS:
        deps = data.get(section)
        spec = deps.get(SDK) if isinstance(deps, dict) else None
        if not isinstance(spec, str) or not admits_major(spec):
            continue
        line = next((i for i, ln in enumerate(lines, 1) if f'"{SDK}"' in ln), 1)
        out.append(Finding(rel, line, 1, "dependency-range",
                           f"`{SDK}` `{spec}` in {section} admits a 2.x or later SDK, but the code imports the 1.x "
                           f"package ({written_for_1})", lines[line - 1].strip() if line <= len(lines) else spec))
    return out
