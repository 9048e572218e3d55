"""The check engine: each check is data (id, migration-guide step or test, title, what it needs) plus a run
function over the audit `Context`; `run_checks` runs them in order, each bounded in time, and turns every
outcome, a crash of the check included, into a `Result` with its evidence and the fix."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from .safety import skip_reason
from .targets import Target
from .wire import Exchange

Status = Literal["pass", "fail", "warn", "skip"]
# Where a check belongs: a step (1–9) of the migration guide's "migrate each concern", or one of its tests.
Step = int | Literal["balancer", "stdio", "restart", "broken-stream"]
# What a check needs of the target: modern, legacy (a 2025-only server: the legacy profile), http, stdio,
# instances (two or more), restart, calls (tool calls on).
NEEDS = frozenset({"modern", "legacy", "http", "stdio", "instances", "restart", "calls"})


@dataclass
class Outcome:
    """What a check found: `fix` is the concrete change that makes a failing check pass."""

    status: Status
    finding: str
    evidence: list[Exchange] = field(default_factory=list)
    fix: str = ""


@dataclass(frozen=True)
class Check:
    id: str
    step: Step
    title: str
    run: Callable[[Context], Awaitable[Outcome]]
    needs: frozenset[str] = frozenset({"modern"})
    timeout: float = 45.0


@dataclass
class Result:
    id: str
    step: Step
    title: str
    status: Status
    finding: str
    evidence: list[dict[str, Any]]
    fix: str
    seconds: float
    # "upstream": the target is a bridge and this failure is state its upstream keeps (report key "attributedTo")
    attributed_to: str | None = None


@dataclass
class Profile:
    """What the era probe learned, shared by every check."""

    era: Literal["modern", "dual", "legacy", "unknown"] = "unknown"
    versions: list[str] = field(default_factory=list)
    capabilities: dict[str, Any] = field(default_factory=dict)
    server_info: dict[str, Any] = field(default_factory=dict)
    tools: list[dict[str, Any]] = field(default_factory=list)
    mrtr: tuple[str, dict[str, Any]] | None = None  # a call that asks for input, once looked for
    mrtr_searched: bool = False
    mrtr_completes_alone: bool | None = None  # whether that call's rounds end on one instance, once tried
    task_tool: tuple[str, dict[str, Any]] | None = None  # a call that became a task
    # A 2025-only server over HTTP: whether its initialize minted an Mcp-Session-Id (None: not probed).
    legacy_sessions: bool | None = None
    legacy_get_stream: bool = False  # … and whether its session answered a GET with a standalone SSE stream
    # What a bridge fronts, from its Server Card (`_meta["dev.mcp-stateless/bridge"]`); None: not a bridge.
    fronts: dict[str, Any] | None = None


@dataclass
class Options:
    calls: bool = True  # may the auditor call tools that take no arguments?
    exclude: frozenset[str] = frozenset()
    max_probe_tools: int = 12
    call_timeout: float = 10.0
    listen_triggers: tuple[str, ...] = ()  # tools that change a list, for the listen check
    task_tool: tuple[str, dict[str, Any]] | None = None  # a call that becomes a task, for the tasks checks
    mrtr_tool: tuple[str, dict[str, Any]] | None = None  # a call that asks for input, for the mrtr checks
    call_tools: frozenset[str] = frozenset()  # tools the auditor may call despite a deletion word or destructiveHint
    read_tools: tuple[tuple[str, dict[str, Any]], ...] = ()  # read-only calls, for results.read-tools
    answers: dict[str, Any] = field(default_factory=dict)  # an input request's key → the answer to give

    def named(self) -> frozenset[str]:
        """Every tool an option names: calling those is the user's decision, not the auditor's."""
        names = set(self.call_tools) | {n for n, _ in self.read_tools} | set(self.listen_triggers)
        names |= {c[0] for c in (self.mrtr_tool, self.task_tool) if c is not None}
        return frozenset(names)


@dataclass
class Context:
    target: Target
    options: Options = field(default_factory=Options)
    profile: Profile = field(default_factory=Profile)
    flows: list[Any] = field(default_factory=list)

    def named_tools(self) -> frozenset[str]:
        """The tools an option or a flow names."""
        steps = (s for f in self.flows for s in getattr(f, "steps", ()))
        return self.options.named() | {s.call for s in steps if getattr(s, "call", None)}

    def skip_reason(self, tool: dict[str, Any]) -> str | None:
        """Why the auditor will not call `tool` with no arguments on its own (safety.skip_reason), or None."""
        if not self.options.calls:
            return "tool calls are off (--no-calls)"
        return skip_reason(tool, named=self.named_tools(), exclude=self.options.exclude)

    def probe_tools(self, limit: int | None = None) -> list[dict[str, Any]]:
        """Tools the auditor may call to stand for "unrelated earlier calls": no required arguments, not
        declared destructive nor named like a deletion (unless an option names them), not excluded, not left
        unanswered within the timeout by an earlier call, at most `max_probe_tools`."""
        out = [t for t in self.profile.tools
               if self.skip_reason(t) is None and t.get("name") not in self.target.slow_tools]
        return out[: limit or self.options.max_probe_tools]

    def skipped_tools(self) -> list[dict[str, str]]:
        """Every listed tool the audit did not call, and why."""
        called = self.target.ledger.names()
        out = []
        for t in self.profile.tools:
            name = str(t.get("name", ""))
            if name in self.target.slow_tools:
                out.append({"name": name, "reason": f"no answer within {self.options.call_timeout:g} s (--timeout) "
                                                    "when called: left out of the checks after that call"})
            elif name not in called:
                out.append({"name": name, "reason": self.skip_reason(t) or "no check that ran needed it"})
        return out


def unmet(check: Check, ctx: Context) -> str | None:
    """Why a check cannot run against this target, or None."""
    t, p = ctx.target, ctx.profile
    if "modern" in check.needs and p.era not in ("modern", "dual"):
        return "the server does not speak 2026-07-28" if p.era == "legacy" else "the era probe failed"
    if "legacy" in check.needs and p.era != "legacy":
        return "the legacy profile is for 2025-only servers" if p.era != "unknown" else "the era probe failed"
    if "http" in check.needs and t.kind != "http":
        return "HTTP only"
    if "stdio" in check.needs and t.kind != "stdio":
        return "stdio only (use --stdio)"
    if "instances" in check.needs and t.instances < 2:
        return "needs two or more instances (several URLs, or --launch … --instances N)"
    if "restart" in check.needs and not t.can_restart:
        return "needs instances the auditor can restart (--launch or --stdio)"
    if "calls" in check.needs and not ctx.options.calls:
        return "tool calls are off (--no-calls)"
    return None


async def run_check(check: Check, ctx: Context) -> Result:
    start = time.monotonic()
    ctx.target.ledger.check = check.id
    reason = unmet(check, ctx)
    if reason is not None:
        outcome = Outcome("skip", f"skipped: {reason}")
    else:
        try:
            async with asyncio.timeout(check.timeout):
                outcome = await check.run(ctx)
        except TimeoutError:
            outcome = Outcome("fail", f"the check did not finish within {check.timeout:g} s: the server stopped "
                                      "answering", fix="Every request must be answered (or refused) promptly.")
        except Exception as e:  # a check that crashed must not take the audit down with it
            outcome = Outcome("warn", f"the check could not complete: {type(e).__name__}: {e}")
    finding, attributed = outcome.finding, None
    fronts = ctx.profile.fronts
    if fronts is not None and outcome.status == "fail" and check.id in UPSTREAM_STATE_CHECKS:
        finding, attributed = f"{finding} — {upstream_note(fronts)}", "upstream"
    return Result(check.id, check.step, check.title, outcome.status, finding,
                  [x.evidence() for x in outcome.evidence[:6]], outcome.fix, round(time.monotonic() - start, 3),
                  attributed)


# The checks through which state kept by a bridge's upstream shows: each bridge instance runs its own upstream
# sessions (for a stdio upstream, its own processes), so a toggle, a counter or a per-process list is seen only
# through the instance and session that made it. The others test what the bridge itself does.
UPSTREAM_STATE_CHECKS = frozenset({"stateless.instances", "stateless.history", "stateless.capabilities",
                                   "results.read-tools"})


def upstream_note(fronts: dict[str, Any]) -> str:
    given = fronts.get("upstream")
    up: dict[str, Any] = given if isinstance(given, dict) else {}
    named = " ".join(str(up[k]) for k in ("name", "version") if up.get(k)) or "a 2025-era server"
    return (f"the target is an mcp-stateless bridge in front of {named}, and this is state that upstream keeps in "
            "its own process or session, which each bridge instance runs separately: the bridge cannot share it; "
            "migrating the upstream (or keeping that state in a shared store) does")


Progress = Callable[[Check, Result | None], None]


async def run_checks(checks: Sequence[Check], ctx: Context, progress: Progress | None = None) -> list[Result]:
    results = []
    for check in checks:
        if progress:
            progress(check, None)
        r = await run_check(check, ctx)
        results.append(r)
        if progress:
            progress(check, r)
    return results


__all__ = ["NEEDS", "UPSTREAM_STATE_CHECKS", "Check", "Context", "Options", "Outcome", "Profile", "Result", "Status",
           "Step", "run_checks", "upstream_note"]
