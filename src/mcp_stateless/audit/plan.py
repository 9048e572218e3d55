"""The migration plan at the end of a 2025-only server's audit: the migration steps in the inventory's order
(inventory/kinds.py), each with what this audit saw that puts it on the plan. The first three are on every
2025-only server's plan (it answers `initialize` and not `server/discover`); the others only when a check
or the server's own declarations show the work is there."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..inventory.kinds import STEP_TITLES
from .engine import Profile, Result

# A failing legacy check → the step that removes what it found.
FAILED_CHECK_STEP = {"legacy.sessions": 4, "legacy.restart": 4, "legacy.history": 4, "legacy.results": 4,
                     "legacy.stdio": 4, "legacy.broken-stream": 8}
INVENTORY = ("run `mcp-stateless inventory PATH` on the server's source for the lines to change, step by "
             "step in this order")


REASON_MAX = 200  # characters of a failing check's finding in the plan: its first sentence, on one line


def _reason(text: str) -> str:
    head = " ".join(text.partition(". ")[0].split())
    return head if len(head) <= REASON_MAX else head[: REASON_MAX - 1] + "…"


def migration_plan(profile: Profile, results: Sequence[Result]) -> list[dict[str, Any]]:
    """The plan's steps in order: `{"step", "title", "why": [...], "checks": [...]}` (`checks`: the failing
    checks behind the step); empty unless the target is a 2025-only server."""
    if profile.era != "legacy":
        return []
    why: dict[int, list[str]] = {
        1: ["it answers initialize and not server/discover: every request must carry its own protocol version "
            "and client capabilities in params._meta"],
        2: ["a 2026-07-28 client discovers the server with server/discover, not initialize"],
        3: ["every result needs resultType"],
    }
    checks: dict[int, list[str]] = {}
    for r in results:
        step = FAILED_CHECK_STEP.get(r.id)
        if step is not None and r.status == "fail":
            why.setdefault(step, []).append(f"{r.id}: {_reason(r.finding)}")
            checks.setdefault(step, []).append(r.id)
    if profile.legacy_get_stream:
        why.setdefault(7, []).append("its sessions keep a standalone GET stream for server messages: "
                                     "subscriptions/listen replaces it, and GET is answered with 405")
    caps = profile.capabilities
    announced = [f"{name}.listChanged" for name in ("tools", "prompts", "resources")
                 if isinstance(caps.get(name), dict) and caps[name].get("listChanged")]
    if isinstance(caps.get("resources"), dict) and caps["resources"].get("subscribe"):
        announced.append("resources.subscribe")
    if announced:
        why.setdefault(6, []).append(f"it declares {', '.join(announced)}: notifications after the session "
                                     "become subscriptions/listen events")
    if "logging" in caps:
        why.setdefault(4, []).append("it declares logging: logging/setLevel is session state; 2026-07-28 takes "
                                     "the log level per request")
    if profile.legacy_sessions:
        why.setdefault(7, []).append("it mints an Mcp-Session-Id: a 2026-07-28 server mints none, and answers "
                                     "DELETE (a session's end) with 405")
    return [{"step": n, "title": STEP_TITLES[n], "why": why[n], "checks": checks.get(n, [])} for n in sorted(why)]


def plan_lines(plan: Sequence[dict[str, Any]]) -> list[str]:
    """The plan as plain lines, for a terminal or a JUnit property."""
    out = []
    for item in plan:
        out.append(f"step {item['step']}. {item['title']}")
        out += [f"  - {w}" for w in item["why"]]
    return [*out, INVENTORY] if out else []


__all__ = ["INVENTORY", "migration_plan", "plan_lines"]
