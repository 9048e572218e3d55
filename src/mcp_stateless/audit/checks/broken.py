"""The guide's broken-stream test, the part any server can be held to without knowing its tools: a dropped
listen stream and a dropped call end only themselves — the instance answers the retry (a new request id)
and accepts a new listen at once. (What a dropped call must not leave behind is for a flow file to say:
`drop_after`, see flow.py.)"""

from __future__ import annotations

from ..engine import Check, Context, Outcome
from ..wire import modern
from .calls import call
from .listen import acknowledged, listen_filter

FIX = ("A dropped response stream ends only its own request: cancel that request's work, keep no "
       "subscription or request state for the connection, and serve the client's retry (a new request id) "
       "and its next subscriptions/listen like any other request.")


async def reconnect(ctx: Context) -> Outcome:
    t = ctx.target
    flt = listen_filter(ctx) or {"toolsListChanged": True}
    first = modern("subscriptions/listen", {"notifications": flt})
    async with t.stream(first, 0) as s:
        problem = await acknowledged(s, first["id"])
        listened = s.exchange
    if problem is not None:
        return Outcome("skip", f"skipped: subscriptions/listen was not acknowledged ({problem})", [listened])
    tools = ctx.probe_tools()
    victim = call(tools[0]["name"], caps={}) if tools else modern("tools/list")
    dropped = await t.send(victim, instance=0, timeout=0.02)  # gone before any answer can arrive
    retry = await t.send({**victim, "id": f"{victim['id']}-retry"}, instance=0, timeout=ctx.options.call_timeout)
    again = modern("subscriptions/listen", {"notifications": flt})
    async with t.stream(again, 0) as s:
        problem = await acknowledged(s, again["id"])
        relisten = s.exchange
    what = victim["params"].get("name") or victim["method"]
    if retry.response is None or problem is not None:
        return Outcome("fail", f"after a dropped listen stream and a dropped {what}: the retry gave "
                               f"{retry.outcome()}, a new listen {problem or 'was acknowledged'}",
                       [dropped, retry, relisten], FIX)
    return Outcome("pass", f"after a dropped listen stream and a dropped {what}, the retry was answered "
                           f"({retry.outcome()}) and a new listen acknowledged", [retry, relisten])


CHECKS = (
    Check("broken.reconnect", "broken-stream", "After dropped streams the retry and a new listen are served",
          reconnect),
)
