"""The legacy profile: the migration guide's four tests (two instances behind a non-sticky balancer, unrelated
calls interleaved on one stdio process, a restart between calls that share state, broken streams) run on a
2025-era server through its own 2025 sessions. They apply to a 2025 server as much as to a modern one, and what
they find is what would break once the server is migrated: a session held by one process, lists and results
that depend on earlier calls in the session or the process, state a restart loses. Each finding says which,
and the report ends with the migration plan for what the checks saw (audit/plan.py)."""

from __future__ import annotations

import asyncio
from typing import Any

from ..engine import Check, Context, Outcome
from ..legacy_session import AuditorSession, list_all, request, session, tool_call
from ..wire import Exchange
from .calls import answer, short
from .results import CLOCK_GAP, NO_READ_TOOL, Call, differs, label, read_calls, restart_changes, spread
from .stateless import versus

# (list method, result key, the server capability that offers it)
LISTS = (("tools/list", "tools", "tools"), ("prompts/list", "prompts", "prompts"),
         ("resources/list", "resources", "resources"),
         ("resources/templates/list", "resourceTemplates", "resources"))

FIX_SESSIONS = (
    "Until the migration, route 2025 clients by Mcp-Session-Id (sticky sessions) or keep their sessions in a "
    "store every instance reads (a dual-era server does: mcp-stateless serves 2025 sessions from its --state "
    "store on any instance). The migration removes the session: every 2026-07-28 request carries its own "
    "version and capabilities, and anything that must continue is an explicit handle kept in a shared store."
)
FIX_RESTART = (
    "Keep what a session or a process holds for a client (carts, watches, history) behind handles in a store "
    "that outlives a process (SQLite on a shared volume, Redis, a database): after the migration a restart "
    "costs a request nothing, because no request depends on a session."
)
FIX_HISTORY = (
    "Make every list a function of the request alone (its principal and declared capabilities): a tool "
    "unlocked by an earlier call is either a server-wide change kept in shared state and announced through "
    "subscriptions/listen, or an explicit handle argument. Without a session, the next request after the call "
    "may reach another instance, or a new process."
)
FIX_RESULTS = (
    "Keep what a read-only tool reads in a store every instance shares and that outlives a process, keyed by "
    "a handle the client passes back or by the principal, not in the session or the process's memory: after "
    "the migration each request may reach any instance, with no session to remember the earlier call."
)
FIX_BROKEN = (
    "A dropped response stream must end only its own request: keep serving the session's next requests "
    "(after the migration the client's retry is a new request, on any instance)."
)


RETRY_AFTER = 0.5  # seconds between a dropped request and its retry (legacy.broken-stream)


def lists_for(capabilities: dict[str, Any]) -> list[tuple[str, str]]:
    return [(m, key) for m, key, cap in LISTS if cap in capabilities]


def _probe(s: AuditorSession) -> dict[str, Any]:
    """A request every 2025 server serves inside a session: tools/list when it has tools, else ping."""
    return request("tools/list") if "tools" in s.capabilities else request("ping")


def _unopened(s: AuditorSession) -> Outcome:
    return Outcome("warn", f"could not open a 2025 session: initialize gave {s.init.outcome()}", [s.init])


def _reply(x: Exchange) -> str:
    """`HTTP 404 without a JSON-RPC response`, or `error -32001 '…' (HTTP 404)`."""
    return f"{x.outcome()} (HTTP {x.status})" if x.response is not None and x.status else x.outcome()


def _where(ctx: Context, instance: int) -> str:
    """How a fresh session is placed, for a finding: a new session on an instance (HTTP), a new process (stdio)."""
    return "a new process" if ctx.target.kind == "stdio" else f"a new session on instance {instance + 1}"


async def sessions(ctx: Context) -> Outcome:
    """A session opened on instance 1, then used on every instance, as a non-sticky balancer would send it."""
    t = ctx.target
    async with session(ctx, 0) as s:
        if not s.opened:
            return _unopened(s)
        exs = [await s.send(_probe(s), instance=i) for i in range(t.instances)]
    if not s.session_id:
        silent = [x for x in exs if x.response is None]
        if silent:
            return Outcome("warn", "the server opens no session, but "
                           + "; ".join(f"instance {x.instance + 1} gave {x.outcome()}" for x in silent), silent)
        return Outcome("pass", f"the server opens no session (no Mcp-Session-Id): all {t.instances} instances "
                               "answer each request on its own, as 2026-07-28 needs", [s.init, *exs[:2]])
    lost = [x for x in exs[1:] if x.result is None]
    if exs[0].result is None:
        return Outcome("warn", f"the session's own instance refused it: {_reply(exs[0])}",
                       [s.init, exs[0]])
    if lost:
        where = "; ".join(f"instance {x.instance + 1} answers {_reply(x)}" for x in lost)
        return Outcome("fail", f"a 2025 session opened on instance 1 is unknown to the others: {where}. Its "
                               "sessions live in the memory of the process that opened them, so behind a "
                               "non-sticky balancer a 2025 client fails on its next request. After the "
                               "migration nothing is per session: whatever the server keeps in one "
                               "(legacy.history, legacy.results) must move to handles in a shared store",
                       [s.init, exs[0], *lost], FIX_SESSIONS)
    return Outcome("pass", f"a 2025 session opened on instance 1 is served by all {t.instances} instances (its "
                           "sessions are kept where every instance reads them)", [s.init, *exs[:2]])


async def restart(ctx: Context) -> Outcome:
    """A session used, every instance restarted, the same session used again."""
    t = ctx.target
    if t.kind != "http":
        return Outcome("skip", "skipped: over stdio a 2025 session is its process, which a restart ends; "
                               "legacy.results compares the read-only tools across a restart")
    async with session(ctx, 0) as s:
        if not s.opened:
            return _unopened(s)
        if not s.session_id:
            return Outcome("pass", "the server opens no session (no Mcp-Session-Id): a restart has none to end")
        before = await s.send(_probe(s))
        await t.restart("all")
        after = await s.send(_probe(s))
    if before.result is None:
        return Outcome("warn", f"could not use the session before the restart: {_reply(before)}", [before])
    if after.result is None:
        return Outcome("fail", f"a restart ends every open 2025 session: after every instance restarted, the "
                               f"session's next request got {_reply(after)}, so a 2025 client must initialize "
                               "again and loses what its session held. After the migration no request depends "
                               "on a session, so a restart loses nothing a request needs, provided what sessions "
                               "held is behind handles in a shared store", [before, after], FIX_RESTART)
    return Outcome("pass", f"the 2025 session outlived a restart of every instance ({after.outcome()}): its "
                           "state is kept outside the process", [before, after])


async def _lists(s: AuditorSession, methods: list[tuple[str, str]]) -> dict[str, Exchange]:
    """Each list method's every page, as one exchange whose result holds all the items (the last page's
    request and status): a difference on any page is a difference."""
    out = {}
    for m, key in methods:
        items, last = await list_all(s, m, key)
        whole = Exchange(last.request, last.http_method, last.headers, last.instance, last.status,
                         last.response_headers, failure=last.failure, timed_out=last.timed_out)
        if last.result is not None:
            whole.messages = [{"jsonrpc": "2.0", "id": (last.request or {}).get("id"), "result": {key: items}}]
        else:
            whole.messages = list(last.messages)
        out[m] = whole
    return out


async def _fresh_lists(ctx: Context, methods: list[tuple[str, str]]) -> list[dict[str, Exchange]]:
    """Every list in a new session on each instance (over stdio, a new process)."""
    out = []
    for i in range(ctx.target.instances):
        async with session(ctx, i) as s:
            out.append(await _lists(s, methods))
    return out


def _same(a: Exchange, b: Exchange) -> bool:
    return repr(answer(a)) == repr(answer(b))


async def history(ctx: Context) -> Outcome:
    """Every list in new sessions on every instance; then unrelated argument-free calls in one session, and
    every list in that session and in new sessions on every instance (over stdio, in new processes). A list
    that already differed by instance is reported as such; the calls are blamed only for what they changed."""
    t = ctx.target
    tools = ctx.probe_tools()
    if not tools:
        return Outcome("skip", "skipped: no argument-free tool the auditor may call")
    async with session(ctx, 0) as probe:
        if not probe.opened:
            return _unopened(probe)
        methods = lists_for(probe.capabilities)
    base = await _fresh_lists(ctx, methods)
    async with session(ctx, 0) as s:
        made = [await s.send(tool_call(x["name"])) for x in tools]
        same = await _lists(s, methods)
    fresh = await _fresh_lists(ctx, methods)
    called = ", ".join(x["name"] for x in tools)
    stdio = t.kind == "stdio"
    differ: list[str] = []
    evidence: list[Exchange] = []
    for m, _ in methods:
        odd = [b[m] for b in base[1:] if not _same(b[m], base[0][m])]
        if odd:
            differ.append(f"{m} differs by instance before any call: compared with instance 1, "
                          + "; ".join(f"instance {x.instance + 1} {versus(base[0][m], x)}" for x in odd))
            evidence += [base[0][m], *odd]
            continue
        if not _same(same[m], fresh[0][m]):
            kept = "the process, its one session" if stdio else "the session"
            differ.append(f"{m} (kept by {kept}): compared with the session that made the calls, "
                          f"{_where(ctx, 0)} {versus(same[m], fresh[0][m])}")
            evidence += [*made[-2:], same[m], fresh[0][m]]
            continue
        changed = [i for i in range(t.instances) if not _same(fresh[i][m], base[i][m])]
        if changed and len(changed) < t.instances:
            where = "; ".join(f"{_where(ctx, i)} {versus(same[m], fresh[i][m])}" for i in range(t.instances)
                              if i not in changed)
            differ.append(f"{m} (kept by the process): the calls changed it on instance "
                          f"{', '.join(str(i + 1) for i in changed)}, not elsewhere: compared with the session "
                          f"that made the calls, {where}")
            evidence += [*made[-2:], same[m], *(fresh[i][m] for i in range(t.instances) if i not in changed)]
    if differ:
        return Outcome("fail", f"lists depend on the session, the process or the instance (calling {called} in "
                               "one session): " + " | ".join(differ) + ". After the migration the next request "
                               "carries no session and may reach any instance, so these lists would change "
                               "under the client", evidence, FIX_HISTORY)
    if stdio:
        return Outcome("pass", f"after calling {called} in one process, every list is the same in a new process")
    return Outcome("pass", f"after calling {called} in one session, every list is the same in new sessions on all "
                           f"{t.instances} instance(s)")


async def _reads(ctx: Context, reads: list[Call]) -> list[list[Exchange]]:
    """Each read in a new session on every instance: one list per read, instance 1 first."""
    t = ctx.target
    by_instance: list[list[Exchange]] = []
    for i in range(t.instances):
        async with session(ctx, i) as s:
            by_instance.append([await s.send(tool_call(n, a)) for n, a in reads])
    return [[by_instance[i][k] for i in range(t.instances)] for k in range(len(reads))]


async def results(ctx: Context) -> Outcome:
    """Read-only tools in new sessions on every instance, before and after the writers ran in one session;
    in that session too (state per session), and after a restart (state per process)."""
    t = ctx.target
    reads = read_calls(ctx)
    if not reads:
        return Outcome("skip", NO_READ_TOOL)
    names = {n for n, _ in reads}
    writers = [x["name"] for x in ctx.probe_tools() if x["name"] not in names]
    before = await _reads(ctx, reads)
    await asyncio.sleep(CLOCK_GAP)
    again = await _reads(ctx, reads)
    stable = [c for c, a, b in zip(reads, before, again, strict=True)
              if all(repr(answer(x)) == repr(answer(y)) for x, y in zip(a, b, strict=True))]
    unstable = [label(c) for c in reads if c not in stable]
    if not stable:
        return Outcome("warn", f"could not compare: {', '.join(unstable)} answer differently when asked twice "
                               "with nothing called in between")
    problems: list[str] = []
    evidence: list[Exchange] = []
    for c, first in zip(reads, before, strict=True):
        if c in stable and differs(first):
            problems.append(f"before this check called anything, {label(c)} answers {spread(first)}")
            evidence += first
    async with session(ctx, 0) as s:
        made = [await s.send(tool_call(w)) for w in writers]
        inside = [await s.send(tool_call(n, a)) for n, a in stable]
    did = ", ".join(writers) or "nothing"
    after = await _reads(ctx, stable)
    for c, mine, exs in zip(stable, inside, after, strict=True):
        if repr(answer(mine)) != repr(answer(exs[0])):
            kept = "the process, its one session" if t.kind == "stdio" else "the session"
            problems.append(f"after calling {did} in one session, {label(c)} answers {short(mine)} there and "
                            f"{short(exs[0])} in {_where(ctx, 0)} (state kept by {kept})")
            evidence += [*made[-2:], mine, exs[0]]
        elif differs(exs):
            problems.append(f"after calling {did} in one session, {label(c)} answers {spread(exs)} (state kept "
                            "by the process)")
            evidence += [*made[-2:], *exs]
    restarted = ""
    if t.can_restart and t.kind == "http":  # over stdio every session above was already a process of its own
        await t.restart("all")
        post = await _reads(ctx, stable)
        restart_changes(stable, after, post, problems, evidence)
        restarted = " and after a restart of every instance"
    note = f" (not compared, they vary on their own: {', '.join(unstable)})" if unstable else ""
    checked = ", ".join(label(c) for c in stable)
    if problems:
        return Outcome("fail", "a read-only tool's answer depends on the session, the instance or the process: "
                               + " | ".join(problems) + note + ". After the migration no request has a session "
                               "and any instance may answer it, so this answer would change under the client",
                       evidence, FIX_RESULTS)
    fresh = "in new processes" if t.kind == "stdio" else f"in new sessions on all {t.instances} instance(s)"
    after_calls = f" and in the session that called {did}" if writers else ""
    return Outcome("pass", f"{checked} answer the same {fresh}{after_calls}{restarted}{note}", evidence[:2])


async def broken(ctx: Context) -> Outcome:
    """A request whose response stream is broken before any answer (the connection closed right after the
    request, over stdio the request cancelled), then the session's next request; and whether the session
    keeps a standalone GET stream (2026-07-28 replaces it with subscriptions/listen)."""
    async with session(ctx, 0) as s:
        if not s.opened:
            return _unopened(s)
        victim = _probe(s)
        dropped = await s.drop(victim)
        # A client retries once it has seen the break, not in the same instant: by then a server that cleans
        # up after a dropped stream has done so, and one still refusing the session never will.
        await asyncio.sleep(RETRY_AFTER)
        retry = await s.send({**victim, "id": f"{victim['id']}-retry"})
        stream = s.stream
    kept = ""
    if s.keeps_stream:
        kept = ("; the session keeps a standalone GET stream for server messages (its events, and any "
                "Last-Event-ID replay, live in one process): 2026-07-28 replaces it with subscriptions/listen")
    if retry.result is None:  # tools/list or ping: a session in working order answers either
        return Outcome("fail", f"after a dropped response stream, the session's next request got {_reply(retry)}"
                       + kept, [dropped, retry], FIX_BROKEN)
    return Outcome("pass", f"after a dropped response stream, the session's next request was answered "
                           f"({retry.outcome()}){kept}", [retry] + ([stream] if stream is not None else []))


async def interleave(ctx: Context) -> Outcome:
    """Requests sent together on one stdio process get the answers they get one by one (asked alone twice,
    CLOCK_GAP apart: a call whose answer changes on its own, a clock say, is left out of the comparison)."""
    async with session(ctx, 0) as s:
        if not s.opened:
            return _unopened(s)
        mix = [request(m) for m, _ in lists_for(s.capabilities)] + [request("ping")]
        readonly = [x for x in ctx.probe_tools() if (x.get("annotations") or {}).get("readOnlyHint") is True]
        mix += [tool_call(x["name"]) for x in readonly[:3]]
        alone = [await s.send({**m, "id": f"{m['id']}-alone"}) for m in mix]
        await asyncio.sleep(CLOCK_GAP)
        again = [await s.send({**m, "id": f"{m['id']}-again"}) for m in mix]
        together = await asyncio.gather(*(s.send({**m, "id": f"{m['id']}-mixed"}) for m in mix))
    problems, unstable = [], []
    for m, a, a2, b in zip(mix, alone, again, together, strict=True):
        what = m["params"].get("name") or m["method"]
        if b.response is None:
            problems.append(f"{what}: {b.outcome()}")
        elif not _same(a, a2):
            unstable.append(what)
        elif not _same(a, b):
            problems.append(f"{what}: alone {short(a)}, interleaved {short(b)}")
    note = f" (not compared, they vary on their own: {', '.join(unstable)})" if unstable else ""
    if problems:
        return Outcome("fail", "requests interleaved on one process were not answered as when sent alone: "
                               + "; ".join(problems) + note, list(together[:3]),
                       "Route every response by its id and keep nothing between requests that changes an answer.")
    return Outcome("pass", f"{len(mix) - len(unstable)} requests interleaved on one process answered as when sent "
                           f"alone{note}", list(together[:2]))


LEGACY = frozenset({"legacy"})
CHECKS = (
    Check("legacy.sessions", "balancer", "2025: a session opened on one instance is served by every instance",
          sessions, needs=LEGACY | {"http", "instances"}),
    Check("legacy.history", 4, "2025: lists do not depend on earlier calls in the session or the process",
          history, needs=LEGACY | {"calls"}, timeout=90),
    Check("legacy.results", 4, "2025: read-only tools answer the same in every session, instance and restart",
          results, needs=LEGACY | {"calls"}, timeout=120),
    Check("legacy.restart", "restart", "2025: a session survives a restart between its calls", restart,
          needs=LEGACY | {"restart"}),
    Check("legacy.stdio", "stdio", "2025: requests interleaved on one process are answered independently",
          interleave, needs=LEGACY | {"stdio"}),
    Check("legacy.broken-stream", "broken-stream", "2025: a dropped response stream ends only its own request",
          broken, needs=LEGACY),
)
