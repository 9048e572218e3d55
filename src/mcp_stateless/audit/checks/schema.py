"""Step 3 of the guide (era-correct results), for every message of the audit: each response and
notification the server sent to a modern request, checked against the official 2026-07-28 schema."""

from __future__ import annotations

from ...conformance.schema import server_message_violations
from ...protocol.meta import META_PROTOCOL_VERSION
from ...protocol.versions import LATEST
from ..engine import Check, Context, Outcome
from ..wire import Exchange

MAX_FINDINGS = 5


def _modern(ex: Exchange) -> bool:
    """A request the server had to treat as 2026-07-28: the version in its body and, over HTTP, in its header
    (without the header a dual-era server may take it for a 2025 client's, and answer by those rules)."""
    req = ex.request or {}
    meta = (req.get("params") or {}).get("_meta") if isinstance(req.get("params"), dict) else None
    if ex.http_method == "POST" and ex.headers.get("mcp-protocol-version") != LATEST:
        return False
    return isinstance(meta, dict) and meta.get(META_PROTOCOL_VERSION) == LATEST


async def messages(ctx: Context) -> Outcome:
    """Run last: it reads what every earlier check received."""
    checked = 0
    bad: list[tuple[Exchange, str]] = []
    seen: set[str] = set()
    for ex in ctx.target.recorded:
        if not _modern(ex):
            continue
        method = str((ex.request or {}).get("method"))
        for m in ex.messages:
            if (m.get("result") or {}).get("resultType") == "task":
                continue  # CreateTaskResult belongs to the tasks extension, not the core schema
            checked += 1
            for definition, problems in server_message_violations(m, method if "method" not in m else None):
                key = f"{method}:{definition}:{problems[0]}"
                if key not in seen:
                    seen.add(key)
                    bad.append((ex, f"{method} → not a valid {definition}: {problems[0]}"))
    if bad:
        return Outcome("fail", f"{len(bad)} kind(s) of message off the 2026-07-28 schema: "
                               + "; ".join(b for _, b in bad[:MAX_FINDINGS]),
                       [ex for ex, _ in bad[:MAX_FINDINGS]],
                       "Shape every result and notification as the 2026-07-28 schema defines it "
                       "(schema/2026-07-28/schema.json in the specification repository).")
    if checked == 0:
        return Outcome("skip", "skipped: no modern response to check")
    return Outcome("pass", f"all {checked} messages the server sent to modern requests match the 2026-07-28 "
                           "schema")


CHECKS = (Check("wire.schema", 3, "Every message matches the 2026-07-28 schema", messages),)
