"""Step 5 of the guide (server→client requests become MRTR rounds) under the balancer and restart tests: a
round started on one instance completes on another, and after every instance restarted; a tampered
requestState is refused."""

from __future__ import annotations

import base64
import binascii
import json

from ..engine import Check, Context, Outcome
from .calls import call, completes_alone, find_mrtr_tool, retry_of, run_rounds

FIX_KEY = (
    "Seal requestState with a key every instance shares and that survives restarts (e.g. "
    "MCP_STATELESS_KEYS / a KMS secret), not one generated per process; keep nothing about the round in "
    "process memory — everything the retry needs travels in requestState or lives in shared state."
)
FIX_SEAL = ("Integrity-protect requestState (HMAC/AEAD bound to principal, method and expiry) and refuse "
            "state that fails verification with a JSON-RPC error (-32602); an encoding (base64, JSON) is not a seal.")
ASKS_AGAIN = ("skipped: {tool} asks again when its question is declined, on one instance with nothing restarted "
              "(the auditor never consents on a user's behalf), so no round can end; name a tool whose question "
              "may be declined with --mrtr-tool")
NO_TOOL = ("skipped: no argument-free tool asked for input (name one with --mrtr-tool, or none of the "
           "tools uses MRTR)")


async def across_instances(ctx: Context) -> Outcome:
    found = await find_mrtr_tool(ctx)
    if found is None:
        return Outcome("skip", NO_TOOL)
    tool, args = found
    rounds = await run_rounds(ctx, call(tool, args))
    served = [x.instance + 1 for x in rounds.exchanges]
    if not rounds.completed and not await completes_alone(ctx, tool, args):
        return Outcome("skip", ASKS_AGAIN.format(tool=tool), rounds.exchanges)
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
    if not rounds.completed and not await completes_alone(ctx, tool, args):
        return Outcome("skip", ASKS_AGAIN.format(tool=tool), rounds.exchanges)
    if not rounds.completed:
        return Outcome("fail", f"an MRTR round of {tool} could not be completed after a restart of every "
                               f"instance: {rounds.last.outcome()}", rounds.exchanges, FIX_KEY)
    return Outcome("pass", f"{tool}: completed after restarting every instance between rounds", rounds.exchanges)


def tamper(state: str) -> str:
    mid = len(state) // 2
    return state[:mid] + ("B" if state[mid] == "A" else "A") + state[mid + 1:]


FORGED_MEMBER = "x-mcp-audit-forged"


def forge(state: str) -> str | None:
    """`state` with a member added, re-encoded as it came (JSON text, or base64/base64url of it, padded or not),
    when it is readable JSON; None when it is opaque. A flipped character can be refused only because it no
    longer decodes, so this is the probe that tells integrity protection from an encoding."""
    def edited(text: bytes) -> bytes | None:
        try:
            value = json.loads(text)
        except ValueError:
            return None
        if not isinstance(value, dict):
            return None
        return json.dumps({**value, FORGED_MEMBER: True}, separators=(",", ":")).encode()

    if state.lstrip().startswith("{"):
        out = edited(state.encode())
        return None if out is None else out.decode()
    urlsafe = "-" in state or "_" in state or not ("+" in state or "/" in state)
    try:
        raw = (base64.urlsafe_b64decode if urlsafe else base64.b64decode)(state + "=" * (-len(state) % 4))
    except (binascii.Error, ValueError):
        return None
    out = edited(raw)
    if out is None:
        return None
    encoded = (base64.urlsafe_b64encode if urlsafe else base64.b64encode)(out).decode()
    padded = state.endswith("=") or len(state) % 4 == 0  # a padded encoding that happened to need none
    return encoded if padded else encoded.rstrip("=")


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
    probes = [("tampered (a character changed)", tamper(state))]
    forged = forge(state)
    if forged is not None:
        probes.insert(0, (f"forged (decoded, a member {FORGED_MEMBER!r} added, encoded again)", forged))
    evidence = [ex]
    for what, bad in probes:
        retry = await ctx.target.send(retry_of(first, res, bad, ctx=ctx), instance=0, timeout=ctx.options.call_timeout)
        evidence.append(retry)
        out = retry.result or {}
        if retry.error_code is None and out.get("resultType") != "input_required":
            return Outcome("fail", f"{tool} accepted a {what} requestState ({retry.outcome()})", evidence, FIX_SEAL)
    readable = " (it is readable JSON: clients can see what it carries)" if forged is not None else ""
    return Outcome("pass", f"a tampered requestState was refused ({evidence[-1].outcome()}){readable}", evidence)


CHECKS = (
    Check("mrtr.instances", 5, "An MRTR round completes on another instance", across_instances,
          needs=frozenset({"modern", "instances", "calls"})),
    Check("mrtr.restart", "restart", "An MRTR round completes after every instance restarted", after_restart,
          needs=frozenset({"modern", "restart", "calls"}), timeout=90),
    Check("mrtr.tampered-state", 5, "A tampered requestState is refused", tampered,
          needs=frozenset({"modern", "calls"})),
)
