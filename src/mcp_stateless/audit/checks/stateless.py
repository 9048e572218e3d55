"""Step 4 of the guide under its balancer test: the same request gets the same answer from every instance,
whatever came before it on the same connection (unrelated calls, other capabilities, another identity)."""

from __future__ import annotations

from typing import Any

from ...protocol import methods
from ..engine import Check, Context, Outcome
from ..wire import FULL_CAPS, Exchange, Message, excerpt, modern
from .calls import answer, call, short

OTHER_CLIENT = {"name": "another-client", "version": "9.9"}

# (list method, the capability that declares it), from the one method table
LIST_METHODS = tuple((m.name, m.capability) for m in methods.CLIENT.values() if m.list_key is not None)

FIX_INSTANCES = (
    "Answer from the request and shared state only: keep registrations identical on every instance, and put "
    "anything that changes (data, dynamic tools) in a store all instances read (SQLite/Redis), announced "
    "through subscriptions/listen."
)
FIX_HISTORY = (
    "A list must be a function of the request (its principal and declared capabilities), never of earlier "
    "calls on the connection or process: make dynamic tools a server-wide change kept in shared state (and "
    "announced with notifications/tools/list_changed on subscriptions/listen), or pass what a call unlocked "
    "as an explicit handle argument."
)
FIX_CAPS = (
    "Read clientCapabilities (and the principal) from each request's own _meta/credentials; never cache them "
    "per connection, stdio process or client name. A capability the request does not declare is absent "
    "(-32021 if the call needs it)."
)


def list_methods(ctx: Context) -> list[str]:
    caps = ctx.profile.capabilities
    return [m for m, cap in LIST_METHODS if cap in caps]


# What names an item of each list in a finding: a resource is its URI (two resources may share a name).
LIST_ITEM_NAME = {"tools": "name", "prompts": "name", "resources": "uri", "resourceTemplates": "uriTemplate"}


def _names(ex: Exchange) -> list[str] | None:
    res = ex.result or {}
    for key, field in LIST_ITEM_NAME.items():
        if isinstance(res.get(key), list):
            return [str(x.get(field) or x.get("name")) for x in res[key] if isinstance(x, dict)]
    return None


def versus(base: Exchange, other: Exchange) -> str:
    """How `other`'s answer differs from `base`'s, in names where both are lists."""
    a, b = _names(base), _names(other)
    if a is None or b is None:
        return excerpt(answer(other), 160)
    extra = [n for n in b if n not in a]
    lacks = [n for n in a if n not in b]
    if not extra and not lacks:
        return "the same names, other details"
    return ", ".join(([f"also lists {extra}"] if extra else []) + ([f"lacks {lacks}"] if lacks else []))


async def instances(ctx: Context) -> Outcome:
    t = ctx.target
    evidence: list[Exchange] = []
    differ, silent = [], []
    for method in ["server/discover", *list_methods(ctx)]:
        exs = [await t.send(modern(method), instance=i, timeout=ctx.options.call_timeout) for i in range(t.instances)]
        # No JSON-RPC answer at all (a timeout, a dropped connection) is alike on every instance without
        # showing that the instances answer alike.
        silent += [f"{method}: instance {x.instance + 1} gave no answer ({x.outcome()})" for x in exs
                   if answer(x)[0] == "nothing"]
        if len({repr(answer(x)) for x in exs}) > 1:
            odd = [x for x in exs[1:] if repr(answer(x)) != repr(answer(exs[0]))]
            differ.append(f"{method}: compared with instance 1, "
                          + "; ".join(f"instance {x.instance + 1} {versus(exs[0], x)}" for x in odd))
            evidence.extend(exs)
    if differ:
        return Outcome("fail", "instances answer the same request differently: " + "; ".join(differ),
                       evidence, FIX_INSTANCES)
    if silent:
        return Outcome("warn", "could not compare the instances: " + "; ".join(silent))
    return Outcome("pass", f"all {t.instances} instances give identical discover/list answers")


async def history(ctx: Context) -> Outcome:
    """Unrelated calls on one connection, then every list on it and on new connections to every instance."""
    t = ctx.target
    tools = ctx.probe_tools()
    methods = list_methods(ctx)
    evidence: list[Exchange] = []
    async with t.lane(0) as lane:
        made = [await lane.send(call(tool["name"]), timeout=ctx.options.call_timeout) for tool in tools]
        differ = []
        for method in methods:
            same = await lane.send(modern(method), timeout=ctx.options.call_timeout)
            others = []
            for i in range(t.instances):
                async with t.lane(i) as fresh:
                    others.append(await fresh.send(modern(method), timeout=ctx.options.call_timeout))
            if len({repr(answer(x)) for x in [same, *others]}) > 1:
                where = [f"a new connection to instance {x.instance + 1} {versus(same, x)}"
                         for x in others if repr(answer(x)) != repr(answer(same))]
                differ.append(f"{method}: compared with the connection that made them, " + "; ".join(where))
                evidence.extend([*made[-2:], same, *others])
    called = ", ".join(x["name"] for x in tools) or "nothing"
    if differ:
        return Outcome("fail", f"lists depend on earlier calls (after calling {called}): " + " | ".join(differ),
                       evidence, FIX_HISTORY)
    return Outcome("pass", f"after calling {called} on one connection, every list is the same on new "
                           f"connections to all {t.instances} instance(s)")


def _variant(msg: Message, *, caps: dict[str, Any], client: dict[str, Any] | None) -> Message:
    params = {k: v for k, v in msg["params"].items() if k != "_meta"}
    return modern(msg["method"], params, caps=caps, client_info=client)


async def capabilities(ctx: Context) -> Outcome:
    """Each request asked twice in a row with empty capabilities, on two connections of their own (an
    answer that differs between them varies by itself, e.g. a tool with side effects); then, on a third,
    the same pair where the first asks with every capability, another client name and (when given) another
    principal. The second answer must not change: the history is the same but for what it declared."""
    t = ctx.target
    principals = list(t.principals)
    other = principals[1] if len(principals) > 1 else None
    requests = [modern(m, caps={}) for m in list_methods(ctx)] + [call(x["name"], caps={})
                                                                  for x in ctx.probe_tools()]
    timeout = ctx.options.call_timeout
    bases: list[list[Exchange]] = []
    for _ in range(2):
        async with t.lane(0) as lane:
            seconds = []
            for r in requests:
                await lane.send(_variant(r, caps={}, client=None), timeout=timeout)
                seconds.append(await lane.send(_variant(r, caps={}, client=None), timeout=timeout))
            bases.append(seconds)
    borrowed, evidence, unstable = [], [], []
    async with t.lane(0) as lane:
        for req, base1, base2 in zip(requests, *bases, strict=True):
            first = await lane.send(_variant(req, caps=FULL_CAPS, client=OTHER_CLIENT), principal=other,
                                    timeout=timeout)
            after = await lane.send(_variant(req, caps={}, client=None), timeout=timeout)
            name = req["params"].get("name") or req["method"]
            if repr(answer(base1)) != repr(answer(base2)):
                unstable.append(name)  # not deterministic: nothing to compare against
            elif repr(answer(after)) != repr(answer(base1)):
                borrowed.append(f"{name}: {short(base1)} after a request with no capabilities, {short(after)} "
                                "after one with more")
                evidence.extend([base1, first, after])
    if borrowed:
        return Outcome("fail", "answers borrow capabilities or identity from an earlier request on the same "
                               "connection: " + "; ".join(borrowed), evidence, FIX_CAPS)
    note = f" (not compared, answers vary on their own: {', '.join(unstable)})" if unstable else ""
    return Outcome("pass", f"{len(requests) - len(unstable)} requests answered the same after a request with "
                           f"no capabilities and after one with more{' and another principal' if other else ''}"
                           f"{note}")


FIX_AUTH = ("Authenticate every request from its own credentials (HTTP: its Authorization header); an earlier "
            "authenticated request on the same connection, or a client name, never stands in for them.")


async def authenticated(ctx: Context) -> Outcome:
    """A request without credentials, alone and right after an authenticated one on the same connection:
    the same answer (a refusal, when the server requires credentials)."""
    t = ctx.target
    if not t.principals:
        return Outcome("skip", "skipped: needs a principal (--principal NAME=TOKEN)")
    anonymous = {"authorization": None}
    async with t.lane(0) as lane:
        alone = await lane.send(modern("tools/list"), headers=anonymous, timeout=ctx.options.call_timeout)
    async with t.lane(0) as lane:
        signed = await lane.send(modern("tools/list"), timeout=ctx.options.call_timeout)
        after = await lane.send(modern("tools/list"), headers=anonymous, timeout=ctx.options.call_timeout)
    if (alone.status, repr(answer(alone))) != (after.status, repr(answer(after))):
        return Outcome("fail", f"a request without credentials got {alone.outcome()} (HTTP {alone.status}) alone "
                               f"but {after.outcome()} (HTTP {after.status}) after an authenticated request on the "
                               "same connection", [alone, signed, after], FIX_AUTH)
    how = "refused" if alone.status in (401, 403) else f"answered as anonymous ({alone.outcome()})"
    return Outcome("pass", f"a request without credentials is {how} whatever came before it on the connection",
                   [alone, after])


BALANCER = frozenset({"modern", "instances"})
CHECKS = (
    Check("stateless.instances", "balancer", "Every instance answers the same request identically", instances,
          needs=BALANCER),
    Check("stateless.history", "balancer", "Lists do not depend on earlier, unrelated calls", history,
          needs=frozenset({"modern", "http", "calls"})),
    Check("stateless.capabilities", 1, "Capabilities and identity are never borrowed from an earlier request",
          capabilities),
    Check("auth.per-request", 9, "Every request is authenticated on its own", authenticated,
          needs=frozenset({"modern", "http"})),
)
