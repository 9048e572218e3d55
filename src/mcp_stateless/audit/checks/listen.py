"""Step 6 of the guide (change events move to subscriptions/listen) under the balancer test: a listen
stream held on every instance, a change made through one of them, and the event on every stream."""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

from ...protocol import methods
from ...protocol.meta import META_SUBSCRIPTION_ID
from ..engine import Check, Context, Outcome
from ..targets import Stream
from ..wire import Exchange, modern
from .calls import call

ACK = "notifications/subscriptions/acknowledged"
# the listen filter's flag -> (change kind, its notification), from the method table
EVENTS = {f"{kind}ListChanged": (kind, method) for kind, method in methods.LIST_CHANGED.items()}
ACK_WAIT = 5.0
EVENT_WAIT = 2.0

FIX_BUS = (
    "Publish change events on a bus every instance subscribes to (Redis pub/sub, Postgres LISTEN/NOTIFY, "
    "the state store's topics) and deliver them to the listen streams each instance holds; an in-process "
    "event emitter only reaches streams on the instance that made the change."
)


def listen_filter(ctx: Context) -> dict[str, bool]:
    caps = ctx.profile.capabilities
    return {key: True for key, (cap, _) in EVENTS.items() if (caps.get(cap) or {}).get("listChanged")}


async def acknowledged(stream: Stream, want_id: Any) -> str | None:
    """None when the first message of the stream is the acknowledgement for this listen, else the problem."""
    first = await stream.next(ACK_WAIT)
    if first is None:
        return f"no acknowledgement within {ACK_WAIT:g} s ({stream.exchange.outcome()})"
    meta = (first.get("params") or {}).get("_meta") or {}
    if first.get("method") != ACK:
        return f"the first message was {first.get('method') or 'a response'}, not {ACK}"
    if meta.get(META_SUBSCRIPTION_ID) != want_id:
        return f"the acknowledgement carries subscriptionId {meta.get(META_SUBSCRIPTION_ID)!r}, not {want_id!r}"
    return None


async def _drain(stream: Stream, until: float) -> set[str]:
    seen: set[str] = set()
    while (left := until - time.monotonic()) > 0:
        m = await stream.next(left)
        if m is None:
            break
        if isinstance(m.get("method"), str):
            seen.add(m["method"])
    return seen


async def fan_out(ctx: Context) -> Outcome:
    t = ctx.target
    flt = listen_filter(ctx)
    if not flt:
        return Outcome("skip", "skipped: the server announces no listChanged capability")
    triggers = [{"name": n} for n in ctx.options.listen_triggers] or ctx.probe_tools()
    if not triggers:
        return Outcome("skip", "skipped: no tool to make a change with (--listen-trigger TOOL)")
    listens = [modern("subscriptions/listen", {"notifications": flt}) for _ in range(t.instances)]
    async with contextlib.AsyncExitStack() as stack:
        streams = [await stack.enter_async_context(t.stream(msg, i)) for i, msg in enumerate(listens)]
        acks = await asyncio.gather(*(acknowledged(s, m["id"]) for s, m in zip(streams, listens, strict=True)))
        bad = [f"instance {n + 1}: {p}" for n, p in enumerate(acks) if p]
        if bad:
            return Outcome("fail", "subscriptions/listen was not acknowledged: " + "; ".join(bad),
                           [s.exchange for s in streams],
                           "Answer subscriptions/listen with an SSE stream (stdio: tagged lines) whose first "
                           "message is notifications/subscriptions/acknowledged for the honoured filter.")
        made: list[Exchange] = [await t.send(call(x["name"]), instance=0, timeout=ctx.options.call_timeout)
                                for x in triggers]
        until = time.monotonic() + EVENT_WAIT
        seen = await asyncio.gather(*(_drain(s, until) for s in streams))
        evidence = [*made[-1:], *(s.exchange for s in streams)]
    wanted = {method for _, method in EVENTS.values()}
    events = set().union(*seen) & wanted
    names = ", ".join(x["name"] for x in triggers)
    if not events:
        return Outcome("skip", f"skipped: calling {names} on instance 1 changed no list (name a tool that does "
                               "with --listen-trigger)")
    missing = [f"instance {n + 1} lacks {sorted(events - got)}" for n, got in enumerate(seen) if events - got]
    if missing:
        return Outcome("fail", f"a change made on instance 1 (calling {names}) did not reach every listen stream: "
                               + "; ".join(missing), evidence, FIX_BUS)
    return Outcome("pass", f"{sorted(events)} reached the listen streams of all {t.instances} instance(s)",
                   evidence)


CHECKS = (
    Check("listen.fan-out", 6, "A change made through one instance reaches listen streams on every instance",
          fan_out, needs=frozenset({"modern", "calls"})),
)
