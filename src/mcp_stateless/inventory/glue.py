"""Transport glue: the findings of a module's wiring of the 2025 SDK's transports, folded into one finding.

A 2025 HTTP server keeps each client's SDK transport in a map by session id and looks it up on every request
(`transports[sessionId] = transport`, `transports.get(req.headers["mcp-session-id"])`). Each of those lines is a
true session-keyed-state or session-id-read finding, and there are a dozen per transport module: reported one by
one they bury the application's own findings under the SDK's boilerplate. The analyzers recognise them by what
the code resolves to (the map holds an SDK transport; the session id read is the transport's, or routes a request
to it) and mark them (`Finding.transport_glue`), with one anchor finding of kind `transport-session-map` at the
map's declaration. Here they become one finding per module that stands for them all (`Finding.covers`): the
count and lines in its message, every covered finding kept for the JSON and SARIF reports.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

from .finding import Finding
from .kinds import TRANSPORT_GLUE


def fold(findings: list[Finding]) -> list[Finding]:
    """The findings with each module's transport glue folded into its anchor (in file order). A marked finding of
    a module with no anchor stays an ordinary finding; an anchor that covers nothing is dropped."""
    anchors: dict[str, Finding] = {}
    for f in findings:
        if f.kind == TRANSPORT_GLUE:
            anchors.setdefault(f.file, f)
    covered: dict[str, list[Finding]] = {}
    out: list[Finding] = []
    for f in findings:
        if f.kind == TRANSPORT_GLUE:
            continue
        if f.transport_glue and f.file in anchors:
            covered.setdefault(f.file, []).append(replace(f, transport_glue=False))
        else:
            out.append(replace(f, transport_glue=False) if f.transport_glue else f)
    for file, anchor in anchors.items():
        if members := covered.get(file):
            out.append(replace(anchor, message=f"{anchor.message}: {_summary(members)}", covers=tuple(members)))
    return sorted(out, key=lambda f: (f.file, f.line, f.column, f.kind))


def _summary(members: list[Finding]) -> str:
    kinds = ", ".join(f"{n} {kind}" for kind, n in sorted(Counter(m.kind for m in members).items()))
    lines = ", ".join(str(line) for line in sorted({m.line for m in members}))
    return f"{len(members)} finding{'s' if len(members) > 1 else ''} of that wiring ({kinds}) at " \
           f"line{'s' if ',' in lines else ''} {lines}"


def matches(f: Finding, kinds: set[str]) -> bool:
    """A finding of one of `kinds`: a grouped finding matches its own kind and every kind it stands for, so
    `--kind session-keyed-state` and `--fail-on session-keyed-state` still see the transports' session map."""
    return f.kind in kinds or any(c.kind in kinds for c in f.covers)
