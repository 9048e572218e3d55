"""Flow files: a declared multi-step use of explicit handles (calls, values carried from one result to the
next call, restarts, expected outcomes), run across instances, across restarts and as another principal.

    name: import
    steps:
      - call: begin_import
        save: {imp: importHandle}          # a value of the result (dotted path) for later steps
      - call: add_file
        arguments: {importHandle: "{imp}", uri: "file:///a.txt"}
        expect: {files: 1}                 # "ok" (default), "error", or a subset the result must contain
      - restart: all                       # all | last (only where the auditor can restart)
      - call: commit_import
        arguments: {importHandle: "{imp}"}
        as: alice                          # a principal given with --principal NAME=TOKEN
      - call: slow_job
        arguments: {importHandle: "{imp}"}
        drop_after: 0.2                    # break the response stream after 0.2 s (the outcome is not judged)
      - sleep: 1.5                         # let whatever should have stopped finish if it did not

A result is its structuredContent, or its first text content read as JSON. The schema of the format ships
as `flow.schema.json` next to this module.
"""

from __future__ import annotations

import asyncio
import json
import re
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from .checks.calls import call
from .engine import Check, Context, Outcome
from .targets import Restart
from .wire import Exchange, excerpt

MAX_STEPS = 50
_REF = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


class FlowError(ValueError):
    """A flow file that cannot be run: the message names the file and the step."""


@dataclass(frozen=True)
class Step:
    call: str | None = None
    arguments: dict[str, Any] = field(default_factory=dict)
    save: dict[str, str] = field(default_factory=dict)
    expect: Any = "ok"
    principal: str | None = None
    restart: Restart | None = None
    drop_after: float | None = None
    sleep: float | None = None


@dataclass(frozen=True)
class Flow:
    name: str
    steps: tuple[Step, ...]
    source: str = ""

    @property
    def breaks_streams(self) -> bool:
        return any(s.drop_after is not None for s in self.steps)


KINDS = ("call", "restart", "sleep")


def _seconds(raw: Any, key: str, where: str, low: float, high: float) -> float:
    value = raw[key]
    if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high:
        raise FlowError(f"{where}: {key} is a number of seconds from {low:g} to {high:g}")
    return float(value)


def _step(raw: Any, where: str) -> Step:
    if not isinstance(raw, dict):
        raise FlowError(f"{where}: a step is an object with `call`, `restart` or `sleep`")
    unknown = set(raw) - {"call", "arguments", "save", "expect", "as", "restart", "drop_after", "sleep"}
    if unknown:
        raise FlowError(f"{where}: unknown keys {sorted(unknown)}")
    kinds = [k for k in KINDS if k in raw]
    if len(kinds) != 1:
        raise FlowError(f"{where}: give exactly one of `call` (a tool name), `restart` (all | last) or `sleep`")
    if "restart" in raw or "sleep" in raw:
        if len(raw) != 1:
            raise FlowError(f"{where}: a {kinds[0]} step takes nothing else")
        if "sleep" in raw:
            return Step(sleep=_seconds(raw, "sleep", where, 0, 30))
        if raw["restart"] not in ("all", "last"):
            raise FlowError(f"{where}: restart is `all` or `last`, not {raw['restart']!r}")
        return Step(restart=raw["restart"])
    if not isinstance(raw["call"], str) or not raw["call"]:
        raise FlowError(f"{where}: call names a tool")
    args, save, expect = raw.get("arguments", {}), raw.get("save", {}), raw.get("expect", "ok")
    if not isinstance(args, dict):
        raise FlowError(f"{where}: arguments is an object")
    if not isinstance(save, dict) or not all(isinstance(v, str) for v in save.values()):
        raise FlowError(f"{where}: save maps names to result paths (strings)")
    if not (expect in ("ok", "error") or isinstance(expect, dict)):
        raise FlowError(f"{where}: expect is ok, error, or an object the result must contain")
    who = raw.get("as")
    if who is not None and not isinstance(who, str):
        raise FlowError(f"{where}: as names a principal")
    drop = _seconds(raw, "drop_after", where, 0.01, 30) if "drop_after" in raw else None
    if drop is not None and ("expect" in raw or save):
        raise FlowError(f"{where}: a call whose stream is dropped has no outcome to expect or save")
    return Step(raw["call"], args, save, expect, who, drop_after=drop)


def parse_flow(data: Any, source: str = "flow") -> Flow:
    if not isinstance(data, dict) or not isinstance(data.get("steps"), list):
        raise FlowError(f"{source}: a flow is an object with `name` and a list of `steps`")
    name = data.get("name") or Path(source).stem
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9_-]{1,40}", name):
        raise FlowError(f"{source}: name is 1–40 letters, digits, - or _")
    if not 1 <= len(data["steps"]) <= MAX_STEPS:
        raise FlowError(f"{source}: a flow has 1 to {MAX_STEPS} steps")
    steps = tuple(_step(s, f"{source} step {n + 1}") for n, s in enumerate(data["steps"]))
    defined: set[str] = set()
    for n, s in enumerate(steps):
        used = set(_REF.findall(json.dumps(s.arguments)))
        if used - defined:
            raise FlowError(f"{source} step {n + 1}: uses {sorted(used - defined)} before a step saved it")
        defined |= set(s.save)
    return Flow(name, steps, source)


def load_flow(path: str | Path) -> Flow:
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as e:
        raise FlowError(f"{path}: {e.strerror or e}") from None
    if p.suffix in (".yaml", ".yml"):
        try:
            import yaml
        except ImportError:
            raise FlowError(f"{path}: YAML flow files need PyYAML (pip install 'mcp-stateless[audit]')") from None
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as e:
            raise FlowError(f"{path}: not YAML: {e}") from None
    else:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise FlowError(f"{path}: not JSON: {e}") from None
    return parse_flow(data, str(path))


def flow_schema() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(resources.files(__package__).joinpath("flow.schema.json").read_text())
    return data


# ---------------------------------------------------------------------------------------------- running


def _subst(value: Any, saved: dict[str, Any]) -> Any:
    if isinstance(value, str):
        whole = _REF.fullmatch(value)
        if whole:
            return saved[whole.group(1)]
        return _REF.sub(lambda m: str(saved[m.group(1)]), value)
    if isinstance(value, dict):
        return {k: _subst(v, saved) for k, v in value.items()}
    if isinstance(value, list):
        return [_subst(v, saved) for v in value]
    return value


def result_value(ex: Exchange) -> Any:
    res = ex.result or {}
    if isinstance(res.get("structuredContent"), dict):
        return res["structuredContent"]
    for block in res.get("content") or []:
        if isinstance(block, dict) and block.get("type") == "text":
            try:
                return json.loads(block.get("text", ""))
            except (TypeError, ValueError):
                return block.get("text")
    return None


def _at(value: Any, path: str) -> Any:
    for part in path.split("."):
        if isinstance(value, dict) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            raise KeyError(path)
    return value


def _contains(have: Any, want: Any) -> bool:
    if isinstance(want, dict):
        return isinstance(have, dict) and all(k in have and _contains(have[k], v) for k, v in want.items())
    return bool(have == want)


def failed(ex: Exchange) -> bool:
    return ex.error is not None or bool((ex.result or {}).get("isError")) or ex.result is None


def _judge(step: Step, ex: Exchange) -> str | None:
    """None when the step's outcome is what the flow expects, else what went wrong."""
    if step.expect == "error":
        if failed(ex):
            return None
        return f"{step.call} was expected to fail and succeeded: {excerpt(result_value(ex), 200)}"
    if failed(ex):
        text = excerpt(result_value(ex), 200) if ex.result else ex.outcome()
        return f"{step.call} failed: {text}"
    if isinstance(step.expect, dict) and not _contains(result_value(ex), step.expect):
        return f"{step.call} returned {excerpt(result_value(ex), 200)}, expected it to contain {step.expect}"
    return None


@dataclass
class Run:
    problem: str | None = None
    evidence: list[Exchange] = field(default_factory=list)
    trail: list[str] = field(default_factory=list)


async def run_flow(ctx: Context, flow: Flow, *, restart_after_save: bool = False,
                   intruder: str | None = None) -> Run:
    """One pass over the flow, each call on the next instance. With `intruder`, every first use of a
    saved value is tried by that principal first, and must be refused."""
    t, run = ctx.target, Run()
    saved: dict[str, Any] = {}
    tried: set[str] = set()
    for n, step in enumerate(flow.steps, 1):
        if step.restart is not None:
            if t.can_restart:
                await t.restart(step.restart)
                run.trail.append(f"restart {step.restart}")
            continue
        if step.sleep is not None:
            await asyncio.sleep(step.sleep)
            run.trail.append(f"sleep {step.sleep:g} s")
            continue
        assert step.call is not None
        args = _subst(step.arguments, saved)
        uses = set(_REF.findall(json.dumps(step.arguments))) - tried
        if intruder is not None and uses:
            tried |= uses
            ex = await t.send(call(step.call, args, caps={}), principal=intruder, timeout=ctx.options.call_timeout)
            run.trail.append(f"{step.call} as {intruder} on instance {ex.instance + 1}")
            if not failed(ex):
                run.problem = (f"step {n}: {step.call} with {sorted(uses)} minted for another principal succeeded "
                               f"as {intruder!r}: {excerpt(result_value(ex), 200)}")
                run.evidence.append(ex)
                return run
        if step.drop_after is not None:
            ex = await t.send(call(step.call, args, caps={}), principal=step.principal, timeout=step.drop_after)
            done = "answered before the drop" if ex.failure is None else "stream dropped"
            run.trail.append(f"{step.call} on instance {ex.instance + 1} ({done} at {step.drop_after:g} s)")
            continue
        ex = await t.send(call(step.call, args, caps={}), principal=step.principal, timeout=ctx.options.call_timeout)
        run.trail.append(f"{step.call} on instance {ex.instance + 1}")
        run.evidence.append(ex)
        problem = _judge(step, ex)
        if problem is not None:
            run.problem = f"step {n} ({' → '.join(run.trail)}): {problem}"
            return run
        for name, path in step.save.items():
            try:
                saved[name] = _at(result_value(ex), path)
            except KeyError:
                run.problem = f"step {n}: {step.call}'s result has no {path!r} to save as {name}"
                return run
        if restart_after_save and step.save and t.can_restart:
            await t.restart("all")
            run.trail.append("restart all")
    return run


FIX_SHARED = ("Keep what a handle names in a store every instance reads and that outlives a process (SQLite "
              "on a shared volume, Redis, a database), keyed by the handle itself — not in process memory and "
              "not under a session, connection or client name.")
FIX_PRINCIPAL = ("Bind every handle to the principal that minted it and check that binding on every use; a "
                 "handle is a reference, never proof of who is calling.")


FIX_CANCEL = ("Treat a dropped response stream as cancellation (HTTP: the client disconnected; stdio: "
              "notifications/cancelled): run the work as a cancellable coroutine and check for cancellation "
              "before each side effect, not in a worker thread that cannot be stopped; work that must finish "
              "anyway belongs in a task (the Tasks extension) or behind an idempotency key.")


def flow_checks(flow: Flow) -> list[Check]:
    fix = FIX_CANCEL if flow.breaks_streams else FIX_SHARED

    async def instances(ctx: Context) -> Outcome:
        run = await run_flow(ctx, flow)
        if run.problem:
            return Outcome("fail", f"flow {flow.name} across instances: {run.problem}", run.evidence[-3:], fix)
        return Outcome("pass", f"flow {flow.name}: {' → '.join(run.trail)}", run.evidence[-2:])

    async def restarted(ctx: Context) -> Outcome:
        run = await run_flow(ctx, flow, restart_after_save=True)
        if run.problem:
            return Outcome("fail", f"flow {flow.name} with every instance restarted after each handle: "
                                   f"{run.problem}", run.evidence[-3:], fix)
        return Outcome("pass", f"flow {flow.name}: {' → '.join(run.trail)}", run.evidence[-2:])

    async def principal(ctx: Context) -> Outcome:
        names = list(ctx.target.principals)
        if len(names) < 2:
            return Outcome("skip", "skipped: needs two principals (--principal NAME=TOKEN twice)")
        run = await run_flow(ctx, flow, intruder=names[1])
        if run.problem:
            return Outcome("fail", f"flow {flow.name}: {run.problem}", run.evidence[-2:], FIX_PRINCIPAL)
        return Outcome("pass", f"flow {flow.name}: every handle refused to {names[1]!r} "
                               f"({' → '.join(run.trail)})", run.evidence[-2:])

    calls = frozenset({"modern"})
    return [
        Check(f"flow.{flow.name}.instances", "broken-stream" if flow.breaks_streams else 4,
              f"Flow {flow.name} across instances", instances, needs=calls, timeout=120),
        Check(f"flow.{flow.name}.restart", "restart", f"Flow {flow.name} across restarts of every instance",
              restarted, needs=frozenset({"modern", "restart"}), timeout=180),
        Check(f"flow.{flow.name}.principal", 9, f"Flow {flow.name}: handles refused to another principal",
              principal, needs=calls),
    ]


__all__ = ["Flow", "FlowError", "Step", "flow_checks", "flow_schema", "load_flow", "parse_flow", "run_flow"]
