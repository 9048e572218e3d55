"""Step 5 of the guide (server→client requests become MRTR rounds) under the balancer and restart tests: a
round started on one instance completes on another, and after every instance restarted; a tampered
requestState is refused."""

from __future__ import annotations

from ..engine import Check, Context, Outcome
from .calls import call, find_mrtr_tool, retry_of, run_rounds

FIX_KEY = (
    "Seal requestState with a key every instance shares and that survives restarts (e.g. "
    "MCP_STATELESS_KEYS / a KMS secret), not one generated per process; keep nothing about the round in "
    "process memory — everything the retry needs travels in requestState or lives in shared state."
)
NO_TOOL = ("skipped: no argument-free tool asked for input (name one with --mrtr-tool, or none of the "
           "tools uses MRTR)")


async def across_instances(ctx: Context) -> Outcome:
    found = await find_mrtr_tool(ctx)
    if found is None:
        return Outcome("skip", NO_TOOL)
    tool, args = found
    rounds = await run_rounds(ctx, call(tool, args))
    served = [x.instance + 1 for x in rounds.exchanges]
    if not rounds.completed:
        return Outcome("fail", f"an MRTR round of {tool} started on instance {served[0]} could not be completed "
                               f"on instance {served[-1]}: {rounds.last.outcome()}", rounds.exchanges, FIX_KEY)
    return Outcome("pass", f"{tool}: {len(served)} rounds on instances {served}, completed", rounds.exchanges)


async def after_restart(ctx: Context) -> Outcome:
    found = await find_mrtr_tool(ctx)
    if found is None:
        return Outcome("skip", NO_TOOL)
    tool, args = found

    async def restart(_: int) -> None:
        await ctx.target.restart("all")

    rounds = await run_rounds(ctx, call(tool, args), between=restart)
    if not rounds.completed:
        return Outcome("fail", f"an MRTR round of {tool} could not be completed after a restart of every "
                               f"instance: {rounds.last.outcome()}", rounds.exchanges, FIX_KEY)
    return Outcome("pass", f"{tool}: completed after restarting every instance between rounds", rounds.exchanges)


def tamper(state: str) -> str:
    mid = len(state) // 2
    return state[:mid] + ("B" if state[mid] == "A" else "A") + state[mid + 1:]


async def tampered(ctx: Context) -> Outcome:
    found = await find_mrtr_tool(ctx)
    if found is None:
        return Outcome("skip", NO_TOOL)
    tool, args = found
    first = call(tool, args)
    # Both rounds on one instance: a refusal must come from the tampering, not from another instance's key.
    ex = await ctx.target.send(first, instance=0, timeout=ctx.options.call_timeout)
    res = ex.result or {}
    state = res.get("requestState")
    if not isinstance(state, str) or not state:
        return Outcome("skip", f"skipped: {tool} asks for input without a requestState")
    retry = await ctx.target.send(retry_of(first, res, tamper(state)), instance=0, timeout=ctx.options.call_timeout)
    out = retry.result or {}
    if retry.error_code is not None or out.get("resultType") == "input_required":
        return Outcome("pass", f"a tampered requestState was refused ({retry.outcome()})", [ex, retry])
    return Outcome("fail", f"{tool} accepted a tampered requestState ({retry.outcome()})", [ex, retry],
                   "Integrity-protect requestState (HMAC/AEAD bound to principal, method and expiry) and refuse "
                   "state that fails verification with a JSON-RPC error (-32602).")


CHECKS = (
    Check("mrtr.instances", 5, "An MRTR round completes on another instance", across_instances,
          needs=frozenset({"modern", "instances", "calls"})),
    Check("mrtr.restart", "restart", "An MRTR round completes after every instance restarted", after_restart,
          needs=frozenset({"modern", "restart", "calls"}), timeout=90),
    Check("mrtr.tampered-state", 5, "A tampered requestState is refused", tampered,
          needs=frozenset({"modern", "calls"})),
)
