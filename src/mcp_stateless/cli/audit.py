"""`mcp-stateless audit`: run the hidden-state checks against a server and report them.

TARGET is one or more URLs (instances of one server; each request goes to the next), `--launch "CMD
{port}" --instances N` (the auditor starts, restarts and stops them), or `--stdio "CMD"`. The live view
(progress and a table) goes to stderr; `--json`, `--markdown` and `--junit` write the report (to a file, or
to stdout with `-`). Exit status 0 only when no check failed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
from collections.abc import Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, TextIO

from .base import CliError

if TYPE_CHECKING:
    from ..audit import Check, Result


def register(sub: Any) -> None:
    help_ = "find hidden state in an MCP server: balancer, restart, stdio and envelope checks"
    p = sub.add_parser("audit", help=help_, description=help_ + ". " + (__doc__ or "").split("\n\n")[1],
                       formatter_class=argparse.RawDescriptionHelpFormatter,
                       epilog='Example: mcp-stateless audit --launch "python server.py --port {port}" --instances 3')
    p.set_defaults(run=run)
    p.add_argument("urls", nargs="*", metavar="URL", help="instances of the server (Streamable HTTP)")
    p.add_argument("--launch", metavar="COMMAND", help='start instances of COMMAND, "{port}" in it is replaced')
    p.add_argument("--instances", type=int, default=3, help="how many to --launch (default 3)")
    p.add_argument("--path", default="/mcp", help="the MCP endpoint path of launched instances (default /mcp)")
    p.add_argument("--stdio", metavar="COMMAND", help="audit one server process over stdio")
    p.add_argument("--principal", action="append", default=[], metavar="NAME=TOKEN",
                   help="a bearer token to send (the first is the default; a second enables the handle-theft check)")
    p.add_argument("--flow", action="append", default=[], metavar="FILE", help="a flow file (JSON or YAML)")
    p.add_argument("--only", action="append", default=[], metavar="ID", help="run only these checks (or id prefixes)")
    p.add_argument("--no-calls", action="store_true", help="never call tools (only lists, discovery, envelopes)")
    p.add_argument("--exclude-tool", action="append", default=[], metavar="NAME", help="never call this tool")
    p.add_argument("--call-tool", action="append", default=[], metavar="NAME",
                   help="an argument-free tool the auditor may call although its name or description suggests "
                        "deletion or it is annotated destructiveHint: true (skipped by default)")
    p.add_argument("--read-tool", action="append", default=[], metavar="NAME[=JSON]",
                   help="a read-only call (arguments as a JSON object) for the state-through-results check, "
                        "besides the tools annotated readOnlyHint: true")
    p.add_argument("--answer", action="append", default=[], metavar="KEY=JSON",
                   help="the answer to give to a server's question (an MRTR inputRequests key), e.g. "
                        "'confirm={\"action\": \"accept\", \"content\": {\"ok\": true}}'; without one, every "
                        "elicitation and sampling request is declined")
    p.add_argument("--listen-trigger", action="append", default=[], metavar="TOOL",
                   help="an argument-free tool that changes a list, for the listen check (default: every "
                        "argument-free tool)")
    p.add_argument("--mrtr-tool", metavar="NAME[=JSON]",
                   help="a call that asks for input (MRTR), for the mrtr checks (default: the first "
                        "argument-free tool that does)")
    p.add_argument("--task-tool", metavar="NAME[=JSON]",
                   help="a call that becomes a task, for the tasks checks (default: the first argument-free "
                        "tool that does)")
    p.add_argument("--timeout", type=float, default=10.0, help="per-request timeout in seconds (default 10)")
    p.add_argument("--json", nargs="?", const="-", metavar="FILE", help="write the JSON report (- for stdout)")
    p.add_argument("--markdown", nargs="?", const="-", metavar="FILE", help="write a Markdown report")
    p.add_argument("--junit", metavar="FILE", help="write JUnit XML")
    p.add_argument("--quiet", action="store_true", help="no live view")


def _principals(items: list[str]) -> dict[str, str]:
    out = {}
    for item in items:
        name, sep, token = item.partition("=")
        if not sep or not name or not token:
            raise CliError(f"--principal takes NAME=TOKEN, not {item!r}")
        out[name] = token
    return out


def _call_spec(spec: str | None, option: str) -> tuple[str, dict[str, Any]] | None:
    """NAME or NAME={"json": "arguments"}."""
    if spec is None:
        return None
    name, sep, raw = spec.partition("=")
    try:
        arguments = json.loads(raw) if sep else {}
    except ValueError as e:
        raise CliError(f"{option} {spec!r}: the arguments are not JSON ({e})") from None
    if not name or not isinstance(arguments, dict):
        raise CliError(f"{option} takes NAME or NAME=JSON-OBJECT, not {spec!r}")
    return name, arguments


def _answers(items: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        try:
            value = json.loads(raw) if sep else None
        except ValueError as e:
            raise CliError(f"--answer {item!r}: the answer is not JSON ({e})") from None
        if not key or not isinstance(value, dict):
            raise CliError(f"--answer takes KEY=JSON-OBJECT, not {item!r}")
        out[key] = value
    return out


def _target(args: argparse.Namespace) -> Any:
    from ..audit import HttpTarget, LaunchedTarget, StdioTarget, TargetError

    given = sum(bool(x) for x in (args.urls, args.launch, args.stdio))
    if given != 1:
        raise CliError("give URLs, or --launch COMMAND, or --stdio COMMAND (exactly one)")
    principals = _principals(args.principal)
    try:
        if args.launch:
            return LaunchedTarget(args.launch, args.instances, path=args.path, principals=principals)
        if args.stdio:
            return StdioTarget(args.stdio, principals)
        return HttpTarget(args.urls, principals)
    except TargetError as e:
        raise CliError(str(e)) from None


class _Plain:
    """One line per finished check on stderr: for logs and pipes."""

    def __init__(self, out: TextIO) -> None:
        self.out = out

    def __call__(self, check: Check, result: Result | None) -> None:
        if result is not None:
            print(f"{result.status.upper():4} {check.id}: {result.finding}", file=self.out, flush=True)

    def close(self, rep: dict[str, Any]) -> None:
        from ..audit.report import plan_lines, tool_lines

        s = rep["summary"]
        for line in tool_lines(rep):
            print(f"TOOL {line}", file=self.out)
        for line in plan_lines(rep.get("migrationPlan") or []):
            print(f"PLAN {line}", file=self.out)
        print(f"{s['pass']} passed, {s['fail']} failed, {s['warn']} warnings, {s['skip']} skipped "
              f"in {s['seconds']} s", file=self.out)


class _Live:
    """A progress bar while checks run, then the table of results (rich, on stderr)."""

    STYLE: ClassVar[dict[str, str]] = {"pass": "green", "fail": "bold red", "warn": "yellow", "skip": "dim"}

    def __init__(self, total: int) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self.console = Console(stderr=True)
        self.progress = Progress(TextColumn("[bold]audit"), BarColumn(), MofNCompleteColumn(),
                                 TextColumn("{task.description}"), TimeElapsedColumn(), console=self.console,
                                 transient=True)
        self.task = self.progress.add_task("", total=total)
        self.progress.start()

    def __call__(self, check: Check, result: Result | None) -> None:
        if result is None:
            self.progress.update(self.task, description=check.id)
        else:
            self.progress.advance(self.task)

    def close(self, rep: dict[str, Any]) -> None:
        self.progress.stop()
        render(self.console, rep)


def render(console: Any, rep: dict[str, Any]) -> None:
    """The report for a terminal of any width (80 columns included): a heading line per check (status, id,
    where it belongs) with its finding on lines of its own below, wrapped at the console's width (a long
    word folded, never cut off); then the fix of every failure, the tools called and skipped, the summary."""
    from rich.padding import Padding
    from rich.text import Text

    from ..audit.report import plan_lines, step_label, tool_lines

    def block(text: str, style: str = "") -> Padding:
        return Padding(Text(text, style=style, overflow="fold"), (0, 0, 0, 6))

    t, s = rep["target"], rep["summary"]
    console.print(Text(f"{t['description']} — era {t['era']}", style="bold", overflow="fold"))
    for c in rep["checks"]:
        st = _Live.STYLE[c["status"]]
        head = Text.assemble((f"{c['status'].upper():<5} ", st), (c["id"], "bold"), f"  {step_label(c['step'])}")
        head.overflow = "fold"
        console.print(head)
        console.print(block(c["finding"], "dim" if c["status"] == "skip" else ""))
        if c["status"] == "fail" and c["fix"]:
            console.print(block(f"fix: {c['fix']}", "red"))
    console.print(Text("tools", style="bold"))
    for line in tool_lines(rep):
        console.print(Padding(Text(line, overflow="fold"), (0, 0, 0, 2)))
    plan = plan_lines(rep.get("migrationPlan") or [])
    if plan:
        console.print(Text("migration plan", style="bold"))
        for line in plan:
            # a reason ("  - …") wraps under its own text, not under the step line
            reason = line.startswith("  - ")
            console.print(Padding(Text(line[4:] if reason else line, overflow="fold"), (0, 0, 0, 6 if reason else 2)))
    console.print(Text(f"{s['pass']} passed, {s['fail']} failed, {s['warn']} warnings, {s['skip']} skipped "
                       f"in {s['seconds']} s", overflow="fold"))


def _write(dest: str, text: str) -> None:
    if dest == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
    else:
        Path(dest).write_text(text)


class _Terminated(Exception):
    pass


async def _until_terminated(work: Coroutine[Any, Any, dict[str, Any]]) -> dict[str, Any]:
    """`work`, cancelled by SIGTERM (how CI runners and timeout(1) stop a job) as SIGINT already cancels
    it, so the audit's own cleanup stops every instance it launched before the process exits."""
    task = asyncio.ensure_future(work)
    loop = asyncio.get_running_loop()
    terminated = False

    def on_term() -> None:
        nonlocal terminated
        if terminated:
            return  # a second SIGTERM must not cut the cleanup the first one started
        terminated = True
        task.cancel()

    loop.add_signal_handler(signal.SIGTERM, on_term)
    try:
        return await task
    except asyncio.CancelledError:
        if terminated:
            raise _Terminated from None
        raise
    finally:
        loop.remove_signal_handler(signal.SIGTERM)


def run(args: argparse.Namespace) -> int:
    from ..audit import FlowError, Options, TargetError, audit, load_flow, plan, to_junit, to_markdown

    try:
        flows = [load_flow(f) for f in args.flow]
    except FlowError as e:
        raise CliError(str(e)) from None
    target = _target(args)
    read_tools = tuple(spec for spec in (_call_spec(r, "--read-tool") for r in args.read_tool) if spec)
    options = Options(calls=not args.no_calls, exclude=frozenset(args.exclude_tool), call_timeout=args.timeout,
                      listen_triggers=tuple(args.listen_trigger), task_tool=_call_spec(args.task_tool, "--task-tool"),
                      mrtr_tool=_call_spec(args.mrtr_tool, "--mrtr-tool"), call_tools=frozenset(args.call_tool),
                      read_tools=read_tools, answers=_answers(args.answer))
    view: _Plain | _Live | None = None
    if not args.quiet:
        try:
            view = _Live(len(plan(flows))) if sys.stderr.isatty() else _Plain(sys.stderr)
        except ImportError:
            view = _Plain(sys.stderr)
    try:
        rep = asyncio.run(_until_terminated(audit(target, flows=flows, options=options, only=args.only,
                                                  progress=view)))
    except _Terminated:
        if isinstance(view, _Live):
            view.progress.stop()
        return 128 + signal.SIGTERM
    except TargetError as e:
        if isinstance(view, _Live):
            view.progress.stop()
        raise CliError(str(e)) from None
    if view is not None:
        view.close(rep)
    if args.json:
        _write(args.json, json.dumps(rep, indent=2, ensure_ascii=False) + "\n")
    if args.markdown:
        _write(args.markdown, to_markdown(rep))
    if args.junit:
        _write(args.junit, to_junit(rep))
    return 0 if rep["summary"]["ok"] else 1
