"""The guide's stdio test: unrelated requests with different versions, capabilities and client infos
interleaved on one process get the answers they get alone; cancelling one stops only that one."""

from __future__ import annotations

import asyncio
from typing import Any

from ...protocol.errors import INVALID_PARAMS, UNSUPPORTED_PROTOCOL_VERSION
from ...protocol.meta import META_CLIENT_CAPABILITIES
from ..engine import Check, Context, Outcome
from ..targets import StdioTarget
from ..wire import FULL_CAPS, Exchange, Message, modern
from .calls import answer, call, short
from .envelope import BOGUS_VERSION

FIX = ("Answer every line on its own: take version, capabilities and client info from that request's _meta, "
       "route each response by its id, and keep nothing per process between requests.")


def _mix(ctx: Context) -> list[tuple[Message, Any]]:
    """(request, expected error code or None)."""
    no_caps = modern("tools/list", client_info={"name": "c", "version": "3"})
    del no_caps["params"]["_meta"][META_CLIENT_CAPABILITIES]
    out: list[tuple[Message, Any]] = [
        (modern("tools/list", caps={}, client_info={"name": "a", "version": "1"}), None),
        (modern("tools/list", caps=FULL_CAPS, client_info={"name": "b", "version": "2"}), None),
        (modern("server/discover", caps=FULL_CAPS), None),
        (modern("tools/list", version=BOGUS_VERSION), UNSUPPORTED_PROTOCOL_VERSION),
        (no_caps, INVALID_PARAMS),
    ]
    # Only tools declared read-only: a call with side effects would change the answers it is mixed with.
    readonly = [x for x in ctx.probe_tools() if (x.get("annotations") or {}).get("readOnlyHint") is True]
    for n, tool in enumerate(readonly[:3]):
        out.append((call(tool["name"], caps=FULL_CAPS if n % 2 else {}), None))
    return out


def _copy(msg: Message, suffix: str) -> Message:
    return {**msg, "id": f"{msg['id']}-{suffix}"}


async def interleave(ctx: Context) -> Outcome:
    t = ctx.target
    assert isinstance(t, StdioTarget)
    mix = _mix(ctx)
    alone = [await t.send(_copy(m, "alone"), timeout=ctx.options.call_timeout) for m, _ in mix]
    together = await asyncio.gather(*(t.send(_copy(m, "mixed"), timeout=ctx.options.call_timeout)
                                      for m, _ in mix))
    problems: list[str] = []
    evidence: list[Exchange] = []
    for (msg, code), a, b in zip(mix, alone, together, strict=True):
        what = msg["params"].get("name") or msg["method"]
        if b.response is None:
            problems.append(f"{what} ({b.request and b.request['id']}): {b.outcome()}")
            evidence.append(b)
        elif code is not None and b.error_code != code:
            problems.append(f"{what} expected error {code}, got {b.outcome()}")
            evidence.append(b)
        elif repr(answer(a)) != repr(answer(b)):
            problems.append(f"{what}: alone {short(a)}, interleaved {short(b)}")
            evidence.extend([a, b])
    if problems:
        return Outcome("fail", "interleaved requests were not answered independently: " + "; ".join(problems),
                       evidence, FIX)
    return Outcome("pass", f"{len(mix)} interleaved requests (client infos, versions and capability sets "
                           "mixed) answered as when sent alone", list(together[:2]))


async def cancel(ctx: Context) -> Outcome:
    t = ctx.target
    assert isinstance(t, StdioTarget)
    tools = ctx.probe_tools()
    victim = call(tools[0]["name"], caps={}) if tools else modern("tools/list")
    stream = await t.chan.exchange(victim)
    bystander = asyncio.ensure_future(t.send(modern("tools/list"), timeout=ctx.options.call_timeout))
    await stream.aclose()  # writes notifications/cancelled for the victim
    other = await bystander
    later = await t.send(modern("server/discover"), timeout=ctx.options.call_timeout)
    if other.result is None or later.result is None:
        return Outcome("fail", f"cancelling {victim['params'].get('name') or 'a request'} also cost another: "
                               f"concurrent tools/list {other.outcome()}, a later discover {later.outcome()}",
                       [other, later], "Cancel only the request notifications/cancelled names (by its id); keep "
                                       "reading and answering the others.")
    return Outcome("pass", "a cancelled request left the concurrent and the next requests answered", [other, later])


STDIO = frozenset({"modern", "stdio"})
CHECKS = (
    Check("stdio.interleave", "stdio", "Interleaved requests on one process get independent answers", interleave,
          needs=STDIO),
    Check("stdio.cancel", "stdio", "Cancellation stops only its own request", cancel, needs=STDIO),
)
