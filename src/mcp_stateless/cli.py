"""The `mcp-stateless` command line."""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import logging
import os
import socket
import sys
from pathlib import Path
from typing import Any, NoReturn

from .protocol.mrtr import KeyRing
from .protocol.security import LOOPBACK_HOSTS, OriginPolicy
from .server.app import App

log = logging.getLogger("mcp_stateless")

KEYS_ENV = "MCP_STATELESS_KEYS"


class CliError(Exception):
    """A mistake on the command line: printed as one line, exit status 2."""


class _Parser(argparse.ArgumentParser):
    """Usage mistakes as one line (plus where to look), exit status 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")


def load_app(spec: str) -> App:
    """Import `module:attr` or `path/to/file.py:attr` (attr defaults to `app`)."""
    target, _, attr = spec.partition(":")
    attr = attr or "app"
    if not target:
        raise CliError(f"invalid APP {spec!r}: expected module:attr or path/to/file.py:attr")
    if target.endswith(".py") or os.sep in target:
        path = Path(target)
        if not path.is_file():
            raise CliError(f"cannot load {spec!r}: file {target} does not exist")
        sys.path.insert(0, str(path.resolve().parent))
        mod_name = "_mcp_app_" + path.stem
        loader_spec = importlib.util.spec_from_file_location(mod_name, path)
        if loader_spec is None or loader_spec.loader is None:
            raise CliError(f"cannot load {spec!r}: not a Python file")
        module = importlib.util.module_from_spec(loader_spec)
        sys.modules[mod_name] = module
        try:
            loader_spec.loader.exec_module(module)
        except Exception as e:
            raise CliError(f"cannot load {spec!r}: {_describe(e)}") from None
    else:
        try:
            module = importlib.import_module(target)
        except ModuleNotFoundError as e:
            raise CliError(f"cannot load {spec!r}: no module named {e.name!r}") from None
        except Exception as e:
            raise CliError(f"cannot load {spec!r}: {_describe(e)}") from None
    obj = getattr(module, attr, None)
    if obj is None:
        raise CliError(f"cannot load {spec!r}: {target} has no attribute {attr!r}")
    if callable(obj) and not isinstance(obj, App):
        try:
            obj = obj()  # a factory
        except Exception as e:
            raise CliError(f"cannot load {spec!r}: calling {attr}() to build the app raised "
                           f"{type(e).__name__}: {e}") from None
    if not isinstance(obj, App):
        raise CliError(f"cannot load {spec!r}: {attr} is a {type(obj).__name__}, not an mcp_stateless.App")
    return obj


def _describe(e: Exception) -> str:
    if isinstance(e, SyntaxError):
        return f"syntax error in {e.filename}, line {e.lineno}: {e.msg}"
    return f"importing it raised {type(e).__name__}: {e}"


def parse_hostport(value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or not host or int(port) > 65535:
        raise CliError(f"--http expects HOST:PORT (e.g. 127.0.0.1:8000), got {value!r}")
    return host.strip("[]"), int(port)


def configure_keys(app: App, instances: int) -> None:
    """Shared MRTR key ring from the environment; required when more than one process serves."""
    spec = os.environ.get(KEYS_ENV)
    if spec:
        try:
            app.key_ring = KeyRing.from_config(spec)
        except ValueError as e:
            raise CliError(f"{KEYS_ENV}: {e}") from None
    elif app.key_ring is None and instances > 1:
        raise CliError(
            f"{instances} workers need a shared MRTR key: set {KEYS_ENV}=kid:base64secret "
            "(the same on every instance)"
        )


def default_state_url(app: App, workers: int) -> str:
    """SQLite under $XDG_STATE_HOME (~/.local/state)/mcp-stateless/<app name>.db. One process keeps its
    change events to itself (so unrelated servers of the same app never cross-talk); workers share them."""
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    name = "".join(c if c.isalnum() or c in "-_." else "_" for c in app.name) or "app"
    url = f"sqlite:///{os.path.join(base, 'mcp-stateless', name + '.db')}"
    return url if workers > 1 else url + "?events=local"


def configure_state(app: App, url: str | None, workers: int) -> None:
    """Open the state store `--state` (or MCP_STATELESS_STATE) names, or the SQLite default."""
    from .state import STATE_ENV, open_state, redact

    spec = url or os.environ.get(STATE_ENV)
    if not spec and app.state is not None:
        return  # the app opened its own state and nothing on the command line overrides it
    spec = spec or default_state_url(app, workers)
    try:
        bundle = open_state(spec)
    except ValueError as e:
        raise CliError(f"--state: {e}") from None
    if workers > 1 and not bundle.multiprocess:
        raise CliError(f"--state {redact(spec)} cannot be shared by {workers} workers: "
                       "use sqlite:///path.db (one machine) or redis://host:port/db")
    if bundle.shared and app.key_ring is None:
        raise CliError(f"--state {redact(spec)} is shared by several instances, so they need one MRTR key: "
                       f"set {KEYS_ENV}=kid:base64secret (the same on every instance)")
    os.environ[STATE_ENV] = spec  # worker processes open the same store
    app.use_state(bundle)
    log.debug("state: %s", redact(spec))


def origin_policy(host: str, allowed_hosts: list[str], allowed_origins: list[str]) -> OriginPolicy | None:
    if allowed_hosts or allowed_origins:
        if "*" in allowed_hosts:
            return OriginPolicy.disabled()
        base = OriginPolicy.loopback() if host in LOOPBACK_HOSTS else OriginPolicy()
        return OriginPolicy(
            base.allowed_hosts | {h.lower() for h in allowed_hosts},
            frozenset(o.lower() for o in allowed_origins),
        )
    if host in LOOPBACK_HOSTS:
        return OriginPolicy.loopback()
    return None


def _check_port_free(host: str, port: int) -> None:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError as e:
            raise CliError(f"cannot listen on {host}:{port}: {e.strerror}") from None


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="mcp-stateless",
        description="Serve an MCP (2026-07-28, stateless) application over Streamable HTTP or stdio.",
        epilog="Example: mcp-stateless serve examples/echo.py:app --http 127.0.0.1:8000",
    )
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    s = sub.add_parser(
        "serve",
        help="serve an app over stdio or Streamable HTTP",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=(
            "Serve APP, an mcp_stateless.App (or a function returning one), given as\n"
            "  path/to/file.py:attr   a Python file, e.g. examples/echo.py:app\n"
            "  package.module:attr    an importable module\n"
            "(`:attr` may be left out: it defaults to `app`)."
        ),
        epilog=(
            "examples:\n"
            "  mcp-stateless serve examples/echo.py:app --stdio\n"
            "      a client launches this command and talks JSON lines on its stdin/stdout\n"
            "  mcp-stateless serve examples/echo.py:app --http 127.0.0.1:8000\n"
            "      endpoint http://127.0.0.1:8000/mcp\n"
            f"  {KEYS_ENV}=k1:$(head -c32 /dev/urandom | base64) \\\n"
            "    mcp-stateless serve examples/echo.py:app --http 0.0.0.0:8000 --workers 2 \\\n"
            "      --allowed-host mcp.example.com --allowed-origin https://app.example.com\n\n"
            "Several workers (or instances behind a load balancer) must share the MRTR key:\n"
            f"{KEYS_ENV}=kid:base64secret[,oldkid:oldsecret] (first key seals, all open).\n"
            "Logs go to stderr; with --stdio, stdout carries MCP messages only."
        ),
    )
    s.add_argument("app", metavar="APP", help="module:attr or path/to/file.py:attr")
    mode = s.add_mutually_exclusive_group(required=True)
    mode.add_argument("--stdio", action="store_true", help="newline-delimited JSON on stdin/stdout")
    mode.add_argument("--http", metavar="HOST:PORT", help="Streamable HTTP, e.g. 127.0.0.1:8000")
    s.add_argument("--path", default="/mcp", help="HTTP endpoint path (default /mcp)")
    s.add_argument("--workers", type=int, default=1, help="HTTP worker processes (default 1)")
    s.add_argument("--allowed-host", action="append", default=[], metavar="HOST",
                   help="accept this Host header (repeatable; '*' turns the Host/Origin check off)")
    s.add_argument("--allowed-origin", action="append", default=[], metavar="ORIGIN",
                   help="accept this Origin, e.g. https://app.example.com (repeatable)")
    s.add_argument("--max-body", type=int, default=4 * 1024 * 1024, metavar="BYTES",
                   help="largest accepted request body (default 4 MiB; larger gets 413)")
    s.add_argument("--state", metavar="URL", default=None,
                   help="where handles and change events live: sqlite:///path.db (default: one file per app "
                        "under ~/.local/state/mcp-stateless), redis://host:6379/0 (several machines), memory:// "
                        "(tests, one process); also MCP_STATELESS_STATE")
    s.add_argument("--instance-name", metavar="NAME", default=None,
                   help="name this instance in an X-Mcp-Instance response header (off by default; "
                        "also MCP_STATELESS_INSTANCE)")
    s.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error", "critical"],
                   help="server log level (logs go to stderr)")
    from .client.cli import add_subcommands as add_client_subcommands

    add_client_subcommands(sub)  # discover, tools, call, read, prompt, listen
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    from .client import cli as client_cli

    if args.command in client_cli.COMMANDS:
        return client_cli.run(args)
    logging.basicConfig(level=args.log_level.upper(), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        if args.command == "serve":
            return _serve(args)
    except CliError as e:
        print(f"mcp-stateless: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    return 2


def _serve(args: Any) -> int:
    if args.workers < 1:
        raise CliError("--workers must be at least 1")
    if args.max_body < 1:
        raise CliError("--max-body must be positive")
    if args.stdio:
        from .transports.stdio import protect_stdout, serve_stdio

        out_fd = protect_stdout()  # before the app is imported: its prints must not reach the stream
        app = load_app(args.app)
        configure_keys(app, 1)
        configure_state(app, args.state, 1)
        return serve_stdio(app, out_fd)
    host, port = parse_hostport(args.http)
    app = load_app(args.app)  # fail fast on a bad APP, even with several workers
    configure_keys(app, args.workers)
    configure_state(app, args.state, args.workers)
    if args.instance_name:
        os.environ["MCP_STATELESS_INSTANCE"] = args.instance_name
    _check_port_free(host, port)
    from .transports import serve_http

    settings = serve_http.Settings(
        app_spec=args.app,
        host=host,
        port=port,
        path=args.path,
        workers=args.workers,
        allowed_hosts=tuple(args.allowed_host),
        allowed_origins=tuple(args.allowed_origin),
        max_body=args.max_body,
        log_level=args.log_level,
    )
    return serve_http.run(settings, app)


if __name__ == "__main__":
    sys.exit(main())
