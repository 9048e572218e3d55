"""The guide's broken-stream test, the part any server can be held to without knowing its tools: a dropped
listen stream and a dropped call end only themselves — the instance answers the retry (a new request id)
and accepts a new listen at once. (What a dropped call must not leave behind is for a flow file to say:
`drop_after`, see flow.py.)"""

from __future__ import annotations

from ..engine import Check, Context, Outcome
from ..wire import Exchange, modern
from .calls import call
from .listen import acknowledged, listen_filter

FIX = ("A dropped response stream ends only its own request: cancel that request's work, keep no "
       "subscription or request state for the connection, and serve the client's retry (a new request id) "
       "and its next subscriptions/listen like any other request.")


async def _drop_and_retry(ctx: Context) -> tuple[str, Exchange, Exchange]:
    tools = ctx.probe_tools()
    victim = call(tools[0]["name"], caps={}) if tools else modern("tools/list")
    dropped = await ctx.target.send(victim, instance=0, timeout=0.02)  # gone before any answer can arrive
    retry = await ctx.target.send({**victim, "id": f"{victim['id']}-retry"}, instance=0,
                                  timeout=ctx.options.call_timeout)
    return str(victim["params"].get("name") or victim["method"]), dropped, retry


async def reconnect(ctx: Context) -> Outcome:
    t = ctx.target
    flt = listen_filter(ctx)
    if not flt:
        # No listChanged capability: the server may answer subscriptions/listen with -32601 (the spec's
        # subscriptions section), so only the dropped call and its retry are held to account.
        what, dropped, retry = await _drop_and_retry(ctx)
        if retry.response is None:
            return Outcome("fail", f"after a dropped {what}: the retry gave {retry.outcome()}", [dropped, retry], FIX)
        return Outcome("pass", f"after a dropped {what}, the retry was answered ({retry.outcome()}); no listen "
                               "to drop (the server declares no listChanged capability)", [retry])
    first = modern("subscriptions/listen", {"notifications": flt})
    async with t.stream(first, 0) as s:
        problem = await acknowledged(s, first["id"])
        listened = s.exchange
    if problem is not None:
        return Outcome("skip", f"skipped: subscriptions/listen was not acknowledged ({problem})", [listened])
    what, dropped, retry = await _drop_and_retry(ctx)
    again = modern("subscriptions/listen", {"notifications": flt})
    async with t.stream(again, 0) as s:
        problem = await acknowledged(s, again["id"])
        relisten = s.exchange
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
