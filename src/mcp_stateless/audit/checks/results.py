"""Step 4 of the guide (hidden state) seen through tool results, under the balancer and restart tests: a
read-only tool must answer the same on every instance and after a restart, before and after the calls
that may change what it reads. A per-process counter shows here and nowhere else: its lists, envelopes
and MRTR rounds are all fine, but `count` says 1 on the instance that served `bump` and 0 on the others.

Read-only tools are the ones declared `readOnlyHint: true` (taking no required arguments) and the calls
named with `--read-tool NAME[=JSON]`; the calls that may change state are the argument-free tools the
auditor may call (never one that reads like a deletion, unless named)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from ..engine import Check, Context, Outcome
from ..wire import Exchange
from .calls import answer, call, short

MAX_READS = 8
# Between the two baseline rounds: an answer that embeds a clock at second resolution ("created at 21:04:05")
# must show as varying on its own, or the restart below (which takes longer than a second) reads as state lost.
CLOCK_GAP = 1.1

FIX = ("Keep what a tool's result reads in a store every instance shares and that outlives a process (SQLite "
       "on a shared volume, Redis, a database) — not in module globals, class fields or caches of one "
       "process; a read-only tool must answer the same whichever instance serves it and after a restart.")

Call = tuple[str, dict[str, Any]]


def read_calls(ctx: Context) -> list[Call]:
    named = list(ctx.options.read_tools)
    names = {n for n, _ in named}
    declared: list[Call] = []
    for t in ctx.profile.tools:
        name = str(t.get("name", ""))
        schema = t.get("inputSchema") or {}
        if name in names or name in ctx.options.exclude or name in ctx.target.slow_tools \
                or (isinstance(schema, dict) and schema.get("required")):
            continue
        if (t.get("annotations") or {}).get("readOnlyHint") is True:
            declared.append((name, {}))
    return (named + declared)[:MAX_READS]


def label(c: Call) -> str:
    return c[0] if not c[1] else f"{c[0]} {short_args(c[1])}"


def short_args(args: dict[str, Any]) -> str:
    return json.dumps(args, separators=(",", ":"))[:80]


async def _ask(ctx: Context, reads: list[Call]) -> list[list[Exchange]]:
    """Each read on every instance, in turn (instance 1 first): one list per read, in the order of `reads`."""
    t = ctx.target
    return [[await t.send(call(name, args, caps={}), instance=i, timeout=ctx.options.call_timeout)
             for i in range(t.instances)] for name, args in reads]


def spread(exs: list[Exchange]) -> str:
    """`{"n": 1} on instance 2; {"n": 0} on instances 1, 3`."""
    groups: dict[str, tuple[str, list[int]]] = {}
    for x in exs:
        key = repr(answer(x))
        groups.setdefault(key, (short(x), []))[1].append(x.instance + 1)
    parts = []
    for text, where in groups.values():
        parts.append(f"{text} on instance{'s' if len(where) > 1 else ''} {', '.join(map(str, where))}")
    return "; ".join(parts)


NO_READ_TOOL = ("skipped: no read-only tool (none is annotated readOnlyHint: true without required arguments; "
                "name one with --read-tool NAME[=JSON])")


def restart_changes(stable: list[Call], before: list[list[Exchange]], after: list[list[Exchange]],
                    problems: list[str], evidence: list[Exchange]) -> None:
    """Each read whose answer on some instance differs across a restart (`before`/`after`: one list per
    read, one exchange per instance), added to `problems` with its first pair as evidence."""
    for c, pre, now in zip(stable, before, after, strict=True):
        moved = [(a, b) for a, b in zip(pre, now, strict=True) if repr(answer(a)) != repr(answer(b))]
        if moved:
            where = "; ".join(f"instance {b.instance + 1}: {short(a)} before, {short(b)} after" for a, b in moved)
            problems.append(f"a restart of every instance changed what {label(c)} answers ({where})")
            evidence += [moved[0][0], moved[0][1]]


def differs(exs: list[Exchange]) -> bool:
    return len({repr(answer(x)) for x in exs}) > 1


async def state_through_results(ctx: Context) -> Outcome:
    t = ctx.target
    reads = read_calls(ctx)
    if not reads:
        return Outcome("skip", NO_READ_TOOL)
    read_names = {n for n, _ in reads}
    writers = [x["name"] for x in ctx.probe_tools() if x["name"] not in read_names]
    problems: list[str] = []
    evidence: list[Exchange] = []
    silent: list[str] = []

    before = await _ask(ctx, reads)
    await asyncio.sleep(CLOCK_GAP)
    again = await _ask(ctx, reads)
    stable = []
    for c, first, second in zip(reads, before, again, strict=True):
        silent += [f"{label(c)} on instance {x.instance + 1}: {x.outcome()}" for x in first + second
                   if answer(x)[0] == "nothing"]
        if any(repr(answer(a)) != repr(answer(b)) for a, b in zip(first, second, strict=True)):
            continue  # the same instance answers differently when nothing was called: not comparable
        stable.append(c)
        if differs(first):
            problems.append(f"before this check called anything, {label(c)} answers {spread(first)}")
            evidence += first
    unstable = [label(c) for c in reads if c not in stable]
    if not stable:
        return Outcome("warn", f"could not compare: {', '.join(unstable)} answer differently when asked twice "
                               "on the same instance with nothing called in between")

    made = [await t.send(call(w, caps={}), timeout=ctx.options.call_timeout) for w in writers]
    did = ", ".join(f"{x.request['params']['name']} (on instance {x.instance + 1})" for x in made if x.request)
    after = await _ask(ctx, stable)
    for c, exs in zip(stable, after, strict=True):
        if differs(exs):
            problems.append(f"after calling {did or 'nothing'}, {label(c)} answers {spread(exs)}")
            evidence += [*made[-2:], *exs]

    restarted = ""
    if t.can_restart:
        await t.restart("all")
        post = await _ask(ctx, stable)
        restart_changes(stable, after, post, problems, evidence)
        restarted = " and after a restart of every instance"
    names = ", ".join(label(c) for c in stable)
    note = f" (not compared, they vary on their own: {', '.join(unstable)})" if unstable else ""
    if problems:
        return Outcome("fail", "a read-only tool's answer depends on the instance or the process: "
                               + " | ".join(problems) + note, evidence, FIX)
    if silent:
        return Outcome("warn", "could not compare every answer: " + "; ".join(silent))
    return Outcome("pass", f"{names} answer the same on all {t.instances} instance(s) before and after calling "
                           f"{did or 'nothing'}{restarted}{note}", evidence)


CHECKS = (
    Check("results.read-tools", 4, "Read-only tools answer the same on every instance and after a restart",
          state_through_results, needs=frozenset({"modern", "calls"}), timeout=120),
)
