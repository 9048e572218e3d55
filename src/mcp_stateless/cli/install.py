"""`mcp-stateless install HOST APP`: register APP with an MCP host (Claude Desktop, Claude Code, Cursor, VS Code,
or a generic `mcp.json`) in the config file that host reads, in the shape that host documents.

The server entry either launches `serve APP --stdio` with this interpreter (the default: hosts start servers
with a bare environment, so the absolute interpreter path is what keeps the right venv), or points at a
running server's URL (`--http URL`). The entry is merged into the existing file: other servers and settings
are kept, and an entry of the same name that differs is replaced only with `--force`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from .base import CliError

Transport = Literal["stdio", "http"]


@dataclass(frozen=True, slots=True)
class Host:
    """Where one host keeps its servers and how it spells an entry."""

    key: str  # the top-level object holding the servers
    typed: bool  # whether entries carry `"type": "stdio" | "http"`
    remote: bool  # whether the file accepts a URL entry (else HTTP goes through the mcp-remote bridge)
    doc: str

    def entry(self, transport: Transport, target: str | list[str], env: Mapping[str, str]) -> dict[str, Any]:
        if transport == "http":
            assert isinstance(target, str)
            if not self.remote:
                # Claude Desktop's file launches local processes only: bridge to the URL over stdio.
                return _with_env({"command": "npx", "args": ["-y", "mcp-remote", target]}, env)
            return {"type": "http", "url": target} if self.typed else {"url": target}
        assert isinstance(target, list)
        out: dict[str, Any] = {"type": "stdio"} if self.typed else {}
        out.update(command=target[0], args=target[1:])
        return _with_env(out, env)


HOSTS: dict[str, Host] = {
    "claude-desktop": Host("mcpServers", typed=False, remote=False,
                           doc="https://modelcontextprotocol.io/quickstart/user"),
    "claude-code": Host("mcpServers", typed=True, remote=True, doc="https://code.claude.com/docs/en/mcp"),
    "cursor": Host("mcpServers", typed=False, remote=True, doc="https://cursor.com/docs/mcp"),
    "vscode": Host("servers", typed=True, remote=True,
                   doc="https://code.visualstudio.com/docs/copilot/reference/mcp-configuration"),
    "mcp-json": Host("mcpServers", typed=False, remote=True, doc="the de-facto mcp.json shared by many hosts"),
}


def _with_env(entry: dict[str, Any], env: Mapping[str, str]) -> dict[str, Any]:
    if env:
        entry["env"] = dict(env)
    return entry


def default_path(host: str, *, cwd: Path | None = None, platform: str = sys.platform,
                 environ: Mapping[str, str] = os.environ) -> Path:
    """The file each host reads: Claude Desktop's per-user file, the project files of the others."""
    here = cwd or Path.cwd()
    if host == "claude-desktop":
        home = Path(environ.get("HOME") or Path.home())
        if platform == "darwin":
            return home / "Library" / "Application Support" / "Claude" / "claude_desktop_config.json"
        if platform == "win32":
            return Path(environ.get("APPDATA") or home / "AppData" / "Roaming") / "Claude" / \
                "claude_desktop_config.json"
        return Path(environ.get("XDG_CONFIG_HOME") or home / ".config") / "Claude" / "claude_desktop_config.json"
    return here / {"claude-code": ".mcp.json", "cursor": ".cursor/mcp.json", "vscode": ".vscode/mcp.json",
                   "mcp-json": "mcp.json"}[host]


def stdio_command(app: str, extra: list[str]) -> list[str]:
    """`python -m mcp_stateless.cli serve APP --stdio`, with a file APP made absolute (hosts start servers in a
    directory of their choosing)."""
    target, sep, attr = app.partition(":")
    if target.endswith(".py") or os.sep in target:
        path = Path(target)
        if not path.is_file():
            raise CliError(f"cannot install {app!r}: file {target} does not exist")
        app = str(path.resolve()) + sep + attr
    return [sys.executable, "-m", "mcp_stateless.cli", "serve", app, "--stdio", *extra]


def default_name(app: str) -> str:
    target = app.partition(":")[0]
    stem = Path(target).stem if target.endswith(".py") else target.rpartition(".")[2]
    return "".join(c if c.isalnum() or c in "-_" else "-" for c in stem) or "mcp-server"


def merge(document: dict[str, Any], key: str, name: str, entry: dict[str, Any], *, force: bool) -> bool:
    """Put `entry` under `document[key][name]`; False when it was already there as is."""
    servers = document.setdefault(key, {})
    if not isinstance(servers, dict):
        raise CliError(f"its {key!r} is a {type(servers).__name__}, not an object: fix the file first")
    old = servers.get(name)
    if old == entry:
        return False
    if old is not None and not force:
        raise CliError(f"a server named {name!r} is already configured differently: pass --force to replace "
                       "it, or --name to add this one under another name")
    servers[name] = entry
    return True


def read_config(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {}
    try:
        text = path.read_text(encoding="utf-8")
        document = json.loads(text) if text.strip() else {}
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise CliError(f"cannot read {path}: {e} (nothing was changed)") from None
    if not isinstance(document, dict):
        raise CliError(f"{path} holds a JSON {type(document).__name__}, not an object (nothing was changed)")
    return document


def write_config(path: Path, document: dict[str, Any]) -> None:
    """Replace the file in one rename, so a host reading it never sees half a document."""
    import tempfile

    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(json.dumps(document, indent=2, ensure_ascii=False) + "\n")
        if path.exists():
            os.chmod(tmp, path.stat().st_mode & 0o777)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def register(sub: Any) -> None:
    s = sub.add_parser(
        "install",
        help="add an app to an MCP host's config (Claude Desktop, Claude Code, Cursor, VS Code, mcp.json)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Register APP with HOST: by default the host launches `serve APP --stdio`; with --http it\n"
                    "connects to a server you run. Other servers in the file are kept.",
        epilog="files written:\n" + "\n".join(
            f"  {name:<15}{_shown_path(name)}  ({h.doc})" for name, h in HOSTS.items()),
    )
    s.set_defaults(run=run)
    s.add_argument("host", metavar="HOST", choices=sorted(HOSTS), help=" | ".join(HOSTS))
    s.add_argument("app", metavar="APP", help="module:attr or path/to/file.py:attr (as for serve)")
    s.add_argument("--http", metavar="URL", default=None,
                   help="point the host at this running server, e.g. http://127.0.0.1:8000/mcp")
    s.add_argument("--name", default=None, help="the server's name in the host (default: from APP)")
    s.add_argument("--env", action="append", default=[], metavar="KEY=VALUE",
                   help="an environment variable for the launched server (stdio; repeatable), e.g. "
                        "MCP_STATELESS_STATE=sqlite:///notes.db")
    s.add_argument("--serve-arg", action="append", default=[], metavar="ARG",
                   help="one more argument for `serve` (stdio; repeatable), e.g. --serve-arg=--log-level=debug")
    s.add_argument("--config", metavar="PATH", type=Path, default=None,
                   help="write this file instead of the host's default")
    s.add_argument("--print", dest="print_only", action="store_true",
                   help="print the config (for claude-code: the `claude mcp add-json` command) instead of writing")
    s.add_argument("--force", action="store_true", help="replace a differing server of the same name")


def _shown_path(host: str) -> str:
    if host == "claude-desktop":
        return "~/Library/Application Support/Claude/claude_desktop_config.json (macOS), " \
               "%APPDATA%\\Claude\\... (Windows), ~/.config/Claude/... (Linux)"
    return str(default_path(host, cwd=Path(".")))


def build_entry(args: argparse.Namespace) -> tuple[str, dict[str, Any]]:
    host = HOSTS[args.host]
    env: dict[str, str] = {}
    for item in args.env:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise CliError(f"--env expects KEY=VALUE, got {item!r}")
        env[key] = value
    name = args.name or default_name(args.app)
    if args.http is not None:
        if not args.http.startswith(("http://", "https://")):
            raise CliError(f"--http expects a URL such as http://127.0.0.1:8000/mcp, got {args.http!r}")
        if args.serve_arg:
            raise CliError("--serve-arg is for the stdio command; with --http the server is yours to start")
        if env and host.remote:
            raise CliError("--env is for a launched server; with --http the host launches nothing")
        return name, host.entry("http", args.http, env)
    return name, host.entry("stdio", stdio_command(args.app, args.serve_arg), env)


def run(args: argparse.Namespace) -> int:
    name, entry = build_entry(args)
    host = HOSTS[args.host]
    if args.print_only:
        if args.host == "claude-code":
            import shlex

            print(shlex.join(["claude", "mcp", "add-json", name, json.dumps(entry)]))
        else:
            print(json.dumps({host.key: {name: entry}}, indent=2, ensure_ascii=False))
        return 0
    path: Path = args.config or default_path(args.host)
    document = read_config(path)
    try:
        changed = merge(document, host.key, name, entry, force=args.force)
    except CliError as e:
        raise CliError(f"{path}: {e}") from None
    if changed:
        write_config(path, document)
        print(f"{name}: written to {path}" + ("" if args.host != "claude-desktop" else " (restart Claude Desktop)"))
    else:
        print(f"{name}: already in {path}, unchanged")
    return 0
