"""The audit run: the checks in order, one target started and stopped around them, the report built."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from .checks import CHECKS
from .engine import Check, Context, Options, Progress, run_checks
from .flow import Flow, flow_checks
from .report import report
from .targets import Target


def plan(flows: Sequence[Flow] = ()) -> list[Check]:
    """Every check that will run, in order: the built-in ones, then three per flow file."""
    out = list(CHECKS)
    for f in flows:
        out.extend(flow_checks(f))
    return out


async def audit(target: Target, *, flows: Sequence[Flow] = (), options: Options | None = None,
                only: Sequence[str] = (), progress: Progress | None = None) -> dict[str, Any]:
    """Start the target, run the checks (`only`: ids or id prefixes; the era probe always runs), stop
    everything that was started, and return the report object."""
    checks = plan(flows)
    if only:
        checks = [c for c in checks if c.id == "era" or any(c.id == o or c.id.startswith(o + ".") for o in only)]
    ctx = Context(target, options or Options(), flows=list(flows))
    start = time.monotonic()
    try:
        await target.start()
        results = await run_checks(checks, ctx, progress)
    finally:
        await target.aclose()
    tools = {**target.ledger.to_json(), "skipped": ctx.skipped_tools()}
    return report(target, ctx.profile, results, time.monotonic() - start, tools)
