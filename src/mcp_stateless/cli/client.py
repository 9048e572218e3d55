"""Client commands of `mcp-stateless`: discover, tools, call, resources, read, prompts, prompt, listen, complete.

Over HTTP they send the token `mcp-stateless login` stored for the server, if any.

TARGET is a URL (Streamable HTTP) or `--stdio "command"`. Output is readable by default, JSON with `--json`.
Only the public `mcp_stateless.client` API is used, imported when a command runs: the server stack
(pydantic, jsonschema) is never loaded.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import sys
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any

from . import progress
from .base import CliError
from .login import token_store_option
from .progress import StatusLine

if TYPE_CHECKING:
    from ..client import Client, ServerEvent


def add_target(p: argparse.ArgumentParser) -> None:
    p.add_argument("target", nargs="?", metavar="TARGET", help="server URL, e.g. http://127.0.0.1:8000/mcp")
    p.add_argument("--stdio", metavar="COMMAND", help='spawn the server, e.g. --stdio "python server.py"')
    p.add_argument("--version", dest="protocol_version", default="auto",
                   help="protocol version: auto (default; probe, fall back to legacy) or a version to pin")
    p.add_argument("--json", action="store_true", help="print JSON instead of readable text")
    p.add_argument("--timeout", type=float, default=60.0, help="per-request timeout in seconds (default 60)")
    p.add_argument("--verbose", action="store_true",
                   help="with --stdio: pass the server's stderr through as it is written (by default it is held "
                        "back, and its last lines are shown only when the command fails)")
    token_store_option(p)


_USAGE = {
    "discover": ("show a server's versions, capabilities and identity", ""),
    "tools": ("list a server's tools", ""),
    "call": ("call a tool: call TARGET TOOL key=value … (values may be JSON)", "TOOL [KEY=VALUE ...]"),
    "resources": ("list a server's resources, then its resource templates", ""),
    "read": ("read a resource", "URI"),
    "prompts": ("list a server's prompts", ""),
    "prompt": ("get a prompt: prompt TARGET NAME key=value …", "NAME [KEY=VALUE ...]"),
    "listen": ("print change notifications until interrupted", ""),
    "complete": ("complete an argument: complete TARGET --prompt NAME ARG=PARTIAL (or --resource TEMPLATE "
                 "VAR=PARTIAL)", ""),
}


def register(sub: Any) -> None:
    for name, (help_, rest) in _USAGE.items():
        p = sub.add_parser(name, help=help_, description=help_ + ". TARGET is a URL or --stdio COMMAND.")
        p.set_defaults(run=run)
        add_target(p)
        if rest:
            p.add_argument("rest", nargs="*", metavar=rest)
        if name == "listen":
            p.add_argument("--uri", action="append", default=[], help="also subscribe to updates of this resource")
            p.add_argument("--count", type=int, default=None, help="stop after this many events")
        if name == "call":
            p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                           help="draw the server's progress notifications on stderr (default: when stderr is "
                                "a terminal)")
            p.add_argument("--task", action="store_true",
                           help="declare the tasks extension: a tool that can run as a task answers with its "
                                "id at once (then `task wait TARGET ID`)")
        if name == "complete":
            ref = p.add_mutually_exclusive_group(required=True)
            # Two values each: argparse cannot take a positional after an option once TARGET was matched.
            ref.add_argument("--prompt", nargs=2, metavar=("NAME", "ARG=PARTIAL"),
                             help="complete the argument ARG of this prompt, typed so far as PARTIAL")
            ref.add_argument("--resource", nargs=2, metavar=("TEMPLATE", "VAR=PARTIAL"),
                             help="complete a variable of this resource template, e.g. 'file:///{path}' path=src/")
            p.add_argument("--context", action="append", default=[], metavar="KEY=VALUE",
                           help="an argument already given (repeatable)")


def _positionals(args: Any) -> None:
    """With --stdio there is no TARGET: argparse put the first positional there, so shift it back."""
    pos = ([args.target] if args.target is not None else []) + list(getattr(args, "rest", []) or [])
    if args.stdio is None:
        if not pos:
            raise CliError("give a TARGET URL or --stdio COMMAND")
        args.target = pos.pop(0)
    else:
        args.target = None
    cmd = args.command
    if cmd == "task":
        if len(pos) != 1:
            raise CliError(f"task {args.action} takes one task ID")
        args.task_id = pos.pop()
    elif cmd in ("call", "prompt", "read"):
        if not pos:
            raise CliError(f"{cmd} needs {_USAGE[cmd][1].split()[0]}")
        first = pos.pop(0)
        if cmd == "call":
            args.tool, args.args = first, pos
        elif cmd == "prompt":
            args.name, args.args = first, pos
        else:
            if pos:
                raise CliError("read takes one URI")
            args.uri = first
    elif pos:
        raise CliError(f"unexpected arguments: {' '.join(pos)}")


def parse_kv(items: list[str], *, strings: bool = False) -> dict[str, Any]:
    """`key=value` pairs; a value that parses as JSON is taken as JSON (unless `strings`)."""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise CliError(f"expected key=value, got {item!r}")
        if strings:
            out[key] = raw
            continue
        try:
            out[key] = json.loads(raw)
        except ValueError:
            out[key] = raw
    return out


def _elicit_tty(params: dict[str, Any]) -> dict[str, Any]:
    """Ask the server's question at the terminal (on stderr, so stdout carries the result only); without a
    terminal on stdin nobody can answer, so it is declined, and the user is told it was asked."""
    message = params.get("message", "The server asks for input")
    if not sys.stdin.isatty():
        print(f"mcp-stateless: declined the server's elicitation {json.dumps(message, ensure_ascii=False)}: "
              "stdin is not a terminal", file=sys.stderr)
        return {"action": "decline"}
    print(f"? {message}", file=sys.stderr)
    schema = params.get("requestedSchema") or {}
    content: dict[str, Any] = {}
    for name, prop in (schema.get("properties") or {}).items():
        sys.stderr.write(f"  {name} ({prop.get('type', 'string')}): ")
        sys.stderr.flush()
        answer = sys.stdin.readline()
        if not answer:  # end of input: no answer
            return {"action": "decline"}
        answer = answer.rstrip("\r\n")
        try:
            content[name] = json.loads(answer) if prop.get("type") != "string" else answer
        except ValueError:
            content[name] = answer
    return {"action": "accept", "content": content}


def open_client(args: Any, *, tasks: bool = False, line: StatusLine | None = None) -> Client:
    """The client TARGET names. `line`, a progress line being drawn, is erased before a question is asked."""
    from ..client import Client

    _positionals(args)

    def elicit(params: dict[str, Any]) -> dict[str, Any]:
        if line is not None:
            line.close()
        return _elicit_tty(params)

    kw: dict[str, Any] = {"version": args.protocol_version, "timeout": args.timeout, "elicitation": elicit,
                          "tasks": tasks}
    if args.stdio is not None:
        import asyncio

        # A server's stderr is its own diagnostics (a 1.x server logs a page of warnings for the probe alone):
        # noise on success, the explanation on failure, so it is held back and shown by `drive` if needed.
        client = Client(stdio=args.stdio, stderr=None if args.verbose else asyncio.subprocess.PIPE, **kw)
        args.held_stderr = client.channel
        return client
    from ..client.oauth import FileTokenStore, OAuth

    # The token `mcp-stateless login` stored (refreshed when it expires); no new authorization from here.
    return Client(args.target, auth=OAuth(store=FileTokenStore(args.token_store)), **kw)


def _dump(obj: Any) -> None:
    import orjson

    sys.stdout.write(orjson.dumps(obj, option=orjson.OPT_INDENT_2).decode() + "\n")


def _content(blocks: Any) -> list[str]:
    lines: list[str] = []
    for b in blocks if isinstance(blocks, list) else []:
        t = b.get("type") if isinstance(b, dict) else None
        if t == "text":
            lines.append(str(b.get("text", "")))
        elif t in ("image", "audio"):
            lines.append(f"[{t} {b.get('mimeType', '')}, {len(str(b.get('data', '')))} base64 chars]")
        elif t == "resource":
            r = b.get("resource") or {}
            lines.append(f"[resource {r.get('uri')}]" + (f"\n{r['text']}" if "text" in r else ""))
        elif t == "resource_link":
            lines.append(f"[link {b.get('uri')}] {b.get('name', '')}")
        else:
            lines.append(json.dumps(b))
    return lines


async def _run(args: Any) -> int:
    from ..client import Acknowledged, ListenEnded

    cmd = args.command
    bar = StatusLine() if cmd == "call" and progress.wanted(args.progress) else None
    async with open_client(args, tasks=cmd == "call" and args.task, line=bar) as c:
        if cmd == "discover":
            d = await c.discover()
            if args.json:
                _dump({"era": c.era, "version": c.version, **d})
            else:
                info = c.server_info or {}
                print(f"server:   {info.get('name', '?')} {info.get('version', '')}".rstrip())
                print(f"era:      {c.era} ({c.version})")
                print(f"versions: {', '.join(d.get('supportedVersions') or [])}")
                print(f"capabilities: {', '.join(sorted((d.get('capabilities') or {}).keys())) or '(none)'}")
                if c.instructions:
                    print(f"instructions: {c.instructions}")
        elif cmd == "tools":
            tools = await c.list_tools()
            if args.json:
                _dump(tools)
            else:
                for t in tools:
                    props = (t.get("inputSchema") or {}).get("properties") or {}
                    sig = ", ".join(f"{k}: {v.get('type', 'any')}" for k, v in props.items()
                                    if isinstance(v, dict))
                    print(f"{t['name']}({sig})" + (f"  — {t['description']}" if t.get("description") else ""))
        elif cmd == "call":
            try:
                handle = await c.start_tool(args.tool, parse_kv(args.args),
                                            progress=bar.progress if bar is not None else None)
            finally:
                if bar is not None:
                    bar.close()
            if handle.task_id is not None:
                print_task(handle.task, args.json)
                return 0
            return print_result(await handle.wait(), args.json)
        elif cmd == "resources":
            resources = await c.list_resources()
            templates = await _resource_templates(c)
            if args.json:
                _dump({"resources": resources, "resourceTemplates": templates})
            else:
                for r in resources:
                    print(_described(f"{r.get('uri')}  {r.get('name', '')}", r))
                for t in templates:  # told apart by the {variables} of their URI template
                    print(_described(f"{t.get('uriTemplate')}  {t.get('name', '')}", t))
        elif cmd == "prompts":
            prompts = await c.list_prompts()
            if args.json:
                _dump(prompts)
            else:
                for pr in prompts:
                    names = [f"{a.get('name')}" + ("" if a.get("required") else "?")
                             for a in pr.get("arguments") or [] if isinstance(a, dict)]
                    print(_described(f"{pr.get('name')}({', '.join(names)})", pr))
        elif cmd == "read":
            result = await c.read_resource(args.uri)
            if args.json:
                _dump(result)
            else:
                for item in result.get("contents") or []:
                    if "text" in item:
                        print(item["text"])
                    else:
                        print(f"[blob {item.get('mimeType', '')}, {len(str(item.get('blob', '')))} base64 chars]")
        elif cmd == "prompt":
            result = await c.get_prompt(args.name, parse_kv(args.args, strings=True))
            if args.json:
                _dump(result)
            else:
                for m in result.get("messages") or []:
                    for line in _content([m.get("content")]):
                        print(f"{m.get('role', '?')}: {line}")
        elif cmd == "complete":
            target, argument = args.prompt or args.resource
            name, sep, partial = argument.partition("=")
            if not sep or not name:
                raise CliError(f"expected ARG=PARTIAL after {target!r}, got {argument!r}")
            ref = ({"type": "ref/prompt", "name": target} if args.prompt is not None
                   else {"type": "ref/resource", "uri": target})
            context = parse_kv(args.context, strings=True)
            result = await c.complete(ref, {"name": name, "value": partial},
                                      {"arguments": context} if context else None)
            completion = result.get("completion") or {}
            if args.json:
                _dump(completion)
            else:
                values = completion.get("values") or []
                for v in values:
                    print(v)
                if completion.get("hasMore"):
                    total = completion.get("total")
                    print(f"({len(values)} shown" + (f" of {total})" if isinstance(total, int) else ", more exist)"),
                          file=sys.stderr)
        elif cmd == "listen":
            n = 0
            async with c.listen(tools=True, prompts=True, resources=True, resource_uris=args.uri or None) as sub:
                async for ev in sub:
                    _print_event(ev, args.json)
                    if isinstance(ev, ListenEnded):
                        break
                    if not isinstance(ev, Acknowledged):
                        n += 1
                        if args.count is not None and n >= args.count:
                            break
    return 0


async def _resource_templates(c: Client) -> list[dict[str, Any]]:
    """The server's resource templates; none when it lists resources but not templates (some 2025 servers)."""
    from ..protocol.errors import METHOD_NOT_FOUND, McpError

    try:
        return await c.list_resource_templates()
    except McpError as e:
        if e.code != METHOD_NOT_FOUND:
            raise
        return []


def _described(head: str, item: dict[str, Any]) -> str:
    """One line of a listing: `head`, the item's MIME type if it has one, its description if any."""
    mime = item.get("mimeType")
    line = head.rstrip() + (f" ({mime})" if mime else "")
    return line + (f"  — {item['description']}" if item.get("description") else "")


def print_result(result: dict[str, Any], as_json: bool) -> int:
    """A CallToolResult on stdout; the exit status says whether the tool reported an error."""
    if as_json:
        _dump(result)
    else:
        for line in _content(result.get("content")):
            print(line)
        if "structuredContent" in result and not result.get("content"):
            print(json.dumps(result["structuredContent"], ensure_ascii=False))
    return 1 if result.get("isError") else 0


def print_task(task: dict[str, Any], as_json: bool) -> None:
    """A task as `call --task` and `task get` show it: the whole object with --json, else its id and status."""
    if as_json:
        _dump(task)
        return
    message = task.get("statusMessage")
    print(f"task {task.get('taskId')}: {task.get('status')}" + (f" ({message})" if message else ""))


def _print_event(ev: ServerEvent, as_json: bool) -> None:
    import orjson

    from ..client import Acknowledged, ResourceUpdated

    if as_json:
        sys.stdout.write(orjson.dumps({"event": type(ev).__name__, "method": ev.method, "params": ev.params})
                         .decode() + "\n")
    elif isinstance(ev, Acknowledged):
        print(f"subscribed: {', '.join(sorted(ev.honoured)) or '(nothing)'}"
              + (f" (not offered: {', '.join(sorted(ev.dropped))})" if ev.dropped else ""))
    elif isinstance(ev, ResourceUpdated):
        print(f"resource updated: {ev.uri}")
    else:
        print(ev.method.removeprefix("notifications/"))
    sys.stdout.flush()


def run(args: argparse.Namespace) -> int:
    return drive(_run(args), args)


# The lines of a stdio server's held-back stderr shown when a command fails.
STDERR_LINES = 20


def drive(command: Coroutine[Any, Any, int], args: argparse.Namespace) -> int:
    """Run one client command; usage mistakes raise `CliError` (exit status 2), failures exit 1 (and show the
    end of a stdio server's stderr, held back until then)."""
    status = _drive(command)
    held = getattr(args, "held_stderr", None)
    if status == 1 and held is not None:
        lines = held.stderr_tail.splitlines()[-STDERR_LINES:]
        if lines:
            print("mcp-stateless: the server's stderr ended with (--verbose shows all of it):\n  "
                  + "\n  ".join(lines), file=sys.stderr)
    return status


def _drive(command: Coroutine[Any, Any, int]) -> int:
    import asyncio

    from ..client import ChannelError, ClientError, TaskCancelled
    from ..protocol.errors import McpError

    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")
    try:
        return asyncio.run(command)
    except McpError as e:
        print(f"mcp-stateless: server error {e.code}: {e.message}", file=sys.stderr)
        return 1
    except (ClientError, ChannelError, TaskCancelled, TimeoutError, ValueError) as e:
        print(f"mcp-stateless: error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()

