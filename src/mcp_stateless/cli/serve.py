"""`mcp-stateless serve APP`: one app over stdio or Streamable HTTP (one process or `--workers N`).

The arguments (and the documented settings MCP_STATELESS_KEYS, MCP_STATELESS_STATE and
MCP_STATELESS_INSTANCE) become one `ServeConfig`; `serve(config)` does the rest, and each worker process
rebuilds the same app from the same config (`worker_transport`).
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import socket
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from . import logs
from .base import CliError
from .config import (
    DEFAULT_BODY_TIMEOUT,
    DEFAULT_HEADER_TIMEOUT,
    DEFAULT_IDLE_TIMEOUT,
    DEFAULT_MAX_BODY,
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_MAX_INFLIGHT,
    DEFAULT_MAX_LISTEN_STREAMS,
    DEFAULT_TOOL_THREADS,
    LEGACY_MODES,
    LOG_FORMATS,
    LOG_LEVELS,
    ServeConfig,
)
from .loader import load_app

if TYPE_CHECKING:
    from ..observability.metrics import PrometheusMetrics
    from ..protocol.endpoint import LegacyEndpoint
    from ..protocol.retirement import Retirement
    from ..server.app import App
    from ..transports.http import HttpTransport

log = logging.getLogger("mcp_stateless")

KEYS_ENV = "MCP_STATELESS_KEYS"
AUTH_ISSUERS_ENV = "MCP_STATELESS_AUTH_ISSUERS"
RESOURCE_URL_ENV = "MCP_STATELESS_RESOURCE_URL"
AUTH_SCOPES_ENV = "MCP_STATELESS_AUTH_SCOPES"
LEGACY_UNTIL_ENV = "MCP_STATELESS_LEGACY_UNTIL"
WORKER_FACTORY = f"{__name__}:worker_transport"


def register(sub: Any) -> None:
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
    s.set_defaults(run=run)
    s.add_argument("app", metavar="APP", help="module:attr or path/to/file.py:attr")
    add_endpoint_options(s)


def add_endpoint_options(s: Any) -> None:
    """How an endpoint is served: the transport, limits, state, legacy, metrics, logs and auth options
    (`serve` and `bridge` share them, so one `config_from_args` reads both)."""
    mode = s.add_mutually_exclusive_group(required=True)
    mode.add_argument("--stdio", action="store_true", help="newline-delimited JSON on stdin/stdout")
    mode.add_argument("--http", metavar="HOST:PORT", help="Streamable HTTP, e.g. 127.0.0.1:8000")
    s.add_argument("--path", default="/mcp", help="HTTP endpoint path (default /mcp)")
    s.add_argument("--workers", type=int, default=1, help="HTTP worker processes (default 1)")
    s.add_argument("--allowed-host", action="append", default=[], metavar="HOST",
                   help="accept only these Host headers (repeatable; default: loopback names on a loopback "
                        "bind, any Host elsewhere; '*' any Host)")
    s.add_argument("--allowed-origin", action="append", default=[], metavar="ORIGIN",
                   help="accept this browser Origin, e.g. https://app.example.com (repeatable; '*' any). "
                        "By default every bind refuses (403) an Origin that is not an allowed host's own")
    s.add_argument("--max-body", type=int, default=DEFAULT_MAX_BODY, metavar="BYTES",
                   help="largest accepted request body (default 4 MiB; larger gets 413)")
    s.add_argument("--idle-timeout", type=float, default=DEFAULT_IDLE_TIMEOUT, metavar="S",
                   help=f"close a connection idle this long, fresh or between requests (default "
                        f"{DEFAULT_IDLE_TIMEOUT:g} s)")
    s.add_argument("--header-timeout", type=float, default=DEFAULT_HEADER_TIMEOUT, metavar="S",
                   help=f"408 and close when a request head takes longer (default {DEFAULT_HEADER_TIMEOUT:g} s)")
    s.add_argument("--body-timeout", type=float, default=DEFAULT_BODY_TIMEOUT, metavar="S",
                   help=f"408 and close when a request body takes longer (default {DEFAULT_BODY_TIMEOUT:g} s)")
    s.add_argument("--max-connections", type=int, default=DEFAULT_MAX_CONNECTIONS, metavar="N",
                   help=f"open connections per process (default {DEFAULT_MAX_CONNECTIONS}, lowered to fit "
                        "ulimit -n); at the cap a new connection evicts the longest-idle one, or gets 503")
    s.add_argument("--tool-threads", type=int, default=DEFAULT_TOOL_THREADS, metavar="N",
                   help=f"threads running sync handlers, per process (default {DEFAULT_TOOL_THREADS}); state "
                        "store I/O has its own")
    s.add_argument("--max-inflight", type=int, default=DEFAULT_MAX_INFLIGHT, metavar="N",
                   help=f"stdio: requests running at once (default {DEFAULT_MAX_INFLIGHT}); beyond it, and while "
                        "more than 1 MiB of output waits for the client, stdin is not read")
    s.add_argument("--listen-max-subscriptions", type=int, default=None, metavar="N",
                   help="resourceSubscriptions (and taskIds) one listen stream may name; more is refused with "
                        "-32602 (default: the app's, 1000)")
    s.add_argument("--max-listen-streams", type=int, default=DEFAULT_MAX_LISTEN_STREAMS, metavar="N",
                   help=f"open subscriptions/listen streams per principal (per peer address when anonymous), per "
                        f"process (default {DEFAULT_MAX_LISTEN_STREAMS}); beyond it a listen gets 429")
    s.add_argument("--state", metavar="URL", default=None,
                   help="where handles and change events live: sqlite:///path.db (default: one file per app "
                        "under ~/.local/state/mcp-stateless), redis://host:6379/0 (several machines), "
                        "redis-cluster://h1:p1,h2:p2 (a Redis Cluster), postgresql://user@host:5432/db (Postgres), "
                        "memory:// (tests, one process); also MCP_STATELESS_STATE")
    s.add_argument("--instance-name", metavar="NAME", default=None,
                   help="name this instance in an X-Mcp-Instance response header (off by default; "
                        "also MCP_STATELESS_INSTANCE)")
    add_legacy_options(s)
    s.add_argument("--metrics", nargs="?", const="", default=None, metavar="HOST:PORT",
                   help="Prometheus metrics (needs the 'metrics' extra): GET /metrics on the HTTP port, or, given "
                        "HOST:PORT, on a listener of their own there (the way for --stdio)")
    s.add_argument("--log-level", default="info", choices=LOG_LEVELS,
                   help="server log level (logs go to stderr)")
    s.add_argument("--reload", action="store_true",
                   help="development: restart the server when a .py file of the app's directory (or package) "
                        "changes; needs the 'reload' extra; HTTP only")
    s.add_argument("--reload-dir", action="append", default=[], metavar="DIR",
                   help="watch this directory instead (repeatable)")
    s.add_argument("--log-format", default="text", choices=LOG_FORMATS,
                   help="text (default) or json: one object per line with time, level, logger, message and "
                        "the record's fields (tokens scrubbed)")
    auth = s.add_argument_group("authorization (OAuth 2.1 resource server; needs the 'auth' extra)")
    auth.add_argument("--auth-issuer", action="append", default=[], metavar="URL",
                      help="a trusted authorization server (repeatable); also MCP_STATELESS_AUTH_ISSUERS "
                           "(space-separated)")
    auth.add_argument("--resource-url", metavar="URL", default=None,
                      help="this server's canonical URI, the audience its tokens must name, e.g. "
                           "https://mcp.example.com/mcp; also MCP_STATELESS_RESOURCE_URL")
    auth.add_argument("--auth-required-scopes", nargs="+", default=[], metavar="SCOPE",
                      help="scopes every request needs; also MCP_STATELESS_AUTH_SCOPES (space-separated)")
    auth.add_argument("--auth-jwks-refresh", type=int, default=30, metavar="SECONDS",
                      help="least time between two key fetches of one issuer on an unknown key id (default 30)")


def add_legacy_options(s: Any) -> None:
    """The 2025-era options `serve` and `contract` share (the card describes what `serve` would do)."""
    s.add_argument("--legacy", default="serve", choices=LEGACY_MODES,
                   help="2025-era clients (initialize, sessions): serve them on the same endpoint (default) "
                        "or reject them (modern 2026-07-28 only)")
    s.add_argument("--legacy-sse", action="store_true",
                   help="also serve the 2024-11-05 HTTP+SSE transport: a GET on the endpoint (or <endpoint>/sse) "
                        "opens its stream (off by default)")
    s.add_argument("--legacy-until", metavar="DATE", default=None,
                   help="retire the 2025 era on DATE (2027-01-31, or an ISO 8601 date-time; UTC): Deprecation "
                        "and Sunset headers on legacy responses before, HTTP 410 after; also "
                        f"{LEGACY_UNTIL_ENV}")


def legacy_options(args: argparse.Namespace, environ: Mapping[str, str]) -> dict[str, Any]:
    from ..protocol import retirement

    until = args.legacy_until or environ.get(LEGACY_UNTIL_ENV) or None
    if until is not None:
        try:
            retirement.parse(until)
        except ValueError as e:
            raise CliError(f"--legacy-until: {e}") from None
    if args.legacy_sse and args.legacy != "serve":
        raise CliError("--legacy-sse needs --legacy serve")
    return {"legacy": args.legacy, "legacy_sse": args.legacy_sse, "legacy_until": until}


def run(args: argparse.Namespace) -> int:
    config = config_from_args(args)
    logs.configure(config.log_level, config.log_format)
    if args.reload:
        from .reload import supervise

        return supervise(config, args.reload_dir)
    return serve(config)


def config_from_args(args: argparse.Namespace, environ: Mapping[str, str] = os.environ) -> ServeConfig:
    """The one config: the command line first, then the documented environment settings."""
    from ..state import STATE_ENV
    from ..transports.http import INSTANCE_ENV

    if args.workers < 1:
        raise CliError("--workers must be at least 1")
    if args.max_body < 1:
        raise CliError("--max-body must be positive")
    for flag in ("idle_timeout", "header_timeout", "body_timeout"):
        if not getattr(args, flag) > 0:
            raise CliError(f"--{flag.replace('_', '-')} must be a positive number of seconds")
    if args.max_connections < 1:
        raise CliError("--max-connections must be at least 1")
    if args.tool_threads < 1:
        raise CliError("--tool-threads must be at least 1")
    if args.max_inflight < 1:
        raise CliError("--max-inflight must be at least 1")
    if args.max_listen_streams < 1:
        raise CliError("--max-listen-streams must be at least 1")
    if args.listen_max_subscriptions is not None and args.listen_max_subscriptions < 1:
        raise CliError("--listen-max-subscriptions must be at least 1")
    if args.metrics:
        parse_hostport(args.metrics, "--metrics")
        if args.workers > 1:
            raise CliError("--metrics HOST:PORT serves one process: with --workers, give --metrics alone "
                           "(each worker answers GET /metrics on the HTTP port)")
    elif args.metrics == "" and args.stdio:
        raise CliError("--stdio has no HTTP port for /metrics: give --metrics HOST:PORT")
    common: dict[str, Any] = {
        "app": args.app,
        "path": args.path,
        "workers": args.workers,
        "state": args.state or environ.get(STATE_ENV) or None,
        "keys": environ.get(KEYS_ENV) or None,
        "allowed_hosts": tuple(args.allowed_host),
        "allowed_origins": tuple(args.allowed_origin),
        "max_body": args.max_body,
        "log_level": args.log_level,
        "log_format": args.log_format,
        "idle_timeout": args.idle_timeout,
        "header_timeout": args.header_timeout,
        "body_timeout": args.body_timeout,
        "max_connections": args.max_connections,
        "tool_threads": args.tool_threads,
        "max_inflight": args.max_inflight,
        "listen_max_subscriptions": args.listen_max_subscriptions,
        "max_listen_streams": args.max_listen_streams,
        **legacy_options(args, environ),
        "metrics": args.metrics,
        **_auth_options(args, environ),
    }
    if args.stdio:
        return ServeConfig(transport="stdio", **common)
    host, port = parse_hostport(args.http)
    instance = args.instance_name or environ.get(INSTANCE_ENV) or None
    return ServeConfig(transport="http", host=host, port=port, instance_name=instance, **common)


def _auth_options(args: argparse.Namespace, environ: Mapping[str, str]) -> dict[str, Any]:
    issuers = tuple(args.auth_issuer) or tuple(environ.get(AUTH_ISSUERS_ENV, "").split())
    resource = args.resource_url or environ.get(RESOURCE_URL_ENV) or None
    scopes = tuple(args.auth_required_scopes) or tuple(environ.get(AUTH_SCOPES_ENV, "").split())
    if issuers and resource is None:
        raise CliError("--auth-issuer needs --resource-url (the audience tokens must be issued for)")
    if (resource is not None or scopes) and not issuers:
        raise CliError("--resource-url and --auth-required-scopes need at least one --auth-issuer")
    if args.auth_jwks_refresh < 0:
        raise CliError("--auth-jwks-refresh must be >= 0")
    return {"auth_issuers": issuers, "resource_url": resource, "auth_required_scopes": scopes,
            "auth_refresh_seconds": args.auth_jwks_refresh}


def parse_hostport(value: str, flag: str = "--http") -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or not host or int(port) > 65535:
        raise CliError(f"{flag} expects HOST:PORT (e.g. 127.0.0.1:8000), got {value!r}")
    return host.strip("[]"), int(port)


def serve(config: ServeConfig) -> int:
    """Serve until stdin ends or SIGTERM (stdio), or SIGINT/SIGTERM (HTTP); the exit status."""
    if config.transport == "stdio":
        from ..transports.stdio import protect_stdout, serve_stdio

        out_fd = protect_stdout()  # before the app is imported: its prints must not reach the stream
        app = open_app(config)
        from ..server.compose import legacy_branch

        legacy = legacy_branch(app, config.legacy)
        _observe(config, app, legacy)
        # SIGTERM ends the serve as stdin's EOF does (the lifespan's exit runs, running requests get the
        # drain): stdio hosts send it to stop a server, often with stdin still open.
        return serve_stdio(app, out_fd, legacy=legacy, tool_threads=config.tool_threads,
                           max_inflight=config.max_inflight, legacy_until=_retirement(config),
                           stop_signals=(signal.SIGTERM,))
    app = open_app(config)  # fail fast on a bad APP, even with several workers
    check_port_free(config.host, config.port)
    from ..transports import serve_http
    from ..transports.limits import EdgeLimits

    limits = EdgeLimits(config.idle_timeout, config.header_timeout, config.body_timeout, config.max_connections)
    edge: dict[str, Any] = {"log_level": config.log_level, "limits": limits, "tool_threads": config.tool_threads,
                            "uvicorn_logging": config.log_format == "text"}
    if config.workers == 1:
        return serve_http.run(_transport(config, app), host=config.host, port=config.port, **edge)
    config.to_env()
    return serve_http.run(WORKER_FACTORY, host=config.host, port=config.port, workers=config.workers, **edge)


def worker_transport() -> HttpTransport:
    """The uvicorn factory each worker process calls: the parent's config, the same app."""
    config = ServeConfig.from_env()
    logs.configure(config.log_level, config.log_format)
    return _transport(config, open_app(config))


def _transport(config: ServeConfig, app: App) -> HttpTransport:
    """The same assembly `App.asgi()` makes (`server.compose`), from the config; its listen streams end
    gracefully on shutdown."""
    from ..server.compose import http_transport, legacy_branch
    from ..transports.serve_http import drained

    legacy = legacy_branch(app, config.legacy)
    metrics = _observe(config, app, legacy)
    on_port = metrics if metrics is not None and config.metrics == "" else False  # else: its own listener
    return drained(http_transport(
        app, path=config.path, legacy=legacy, legacy_sse=config.legacy_sse, legacy_until=_retirement(config),
        metrics=on_port, origin_policy=config.origin_policy(), max_body=config.max_body,
        instance=config.instance_name, public_url=config.resource_url, max_listen_streams=config.max_listen_streams))


def _retirement(config: ServeConfig) -> Retirement | None:
    from ..protocol import retirement

    return None if config.legacy_until is None else retirement.parse(config.legacy_until)


def _observe(config: ServeConfig, app: App, legacy: LegacyEndpoint | None) -> PrometheusMetrics | None:
    """Tracing whenever opentelemetry-api is installed (exported as the OTEL_* variables say), and the
    metrics `--metrics` asks for (on their own listener when it names an address)."""
    from ..observability import instrument, otel_installed

    if otel_installed():
        from ..observability.otelenv import configure_from_env

        try:
            configure_from_env(app.name)
        except RuntimeError as e:
            raise CliError(str(e)) from None
    try:
        metrics = instrument(app, metrics=config.metrics is not None,
                             legacy_counters=getattr(legacy, "counters", None))
    except RuntimeError as e:
        raise CliError(str(e)) from None
    if metrics is not None and config.metrics:
        from prometheus_client import start_http_server

        host, port = parse_hostport(config.metrics, "--metrics")
        try:
            start_http_server(port, host, registry=metrics.registry)
        except OSError as e:
            raise CliError(f"--metrics: cannot listen on {host}:{port}: {e.strerror}") from None
        log.info("metrics: http://%s:%d/metrics", host, port)
    return metrics


def open_app(config: ServeConfig) -> App:
    """The app `config.app` names, with the MRTR keys and the state store the config asks for."""
    app = load_app(config.app)
    _use_keys(app, config)
    _use_state(app, config)
    _use_auth(app, config)
    if config.listen_max_subscriptions is not None:
        app.listeners.max_subscriptions = config.listen_max_subscriptions
    return app


def _use_auth(app: App, config: ServeConfig) -> None:
    if not config.auth_issuers:
        return
    assert config.resource_url is not None
    try:
        from ..auth import BearerAuthenticator
    except ImportError as e:
        raise CliError(f"--auth-issuer needs the 'auth' extra (pip install 'mcp-stateless[auth]'): {e}") from None
    try:
        # scopes_supported: the required ones first, then those the app's tools, prompts and resources need
        # (registered by now: the app module has been imported), so a client can register for a later step-up.
        required = list(config.auth_required_scopes)
        app.authenticator = BearerAuthenticator(
            config.resource_url, config.auth_issuers, required_scopes=required,
            scopes_supported=list(dict.fromkeys([*required, *app.catalog.scopes()])),
            min_refresh_interval=config.auth_refresh_seconds)
    except ValueError as e:
        raise CliError(str(e)) from None


def _use_keys(app: App, config: ServeConfig) -> None:
    """The shared MRTR key ring; required when more than one process serves."""
    from ..protocol.mrtr import KeyRing

    if config.keys:
        try:
            app.key_ring = KeyRing.from_config(config.keys)
        except ValueError as e:
            raise CliError(f"{KEYS_ENV}: {e}") from None
    elif app.key_ring is None and config.processes > 1:
        raise CliError(
            f"{config.processes} workers need a shared MRTR key: set {KEYS_ENV}=kid:base64secret "
            "(the same on every instance)"
        )


def default_state_url(app_name: str, processes: int) -> str:
    """SQLite under $XDG_STATE_HOME (~/.local/state)/mcp-stateless/<app name>.db. One process keeps its
    change events to itself (so unrelated servers of the same app never cross-talk); workers share them."""
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    name = "".join(c if c.isalnum() or c in "-_." else "_" for c in app_name) or "app"
    url = f"sqlite:///{os.path.join(base, 'mcp-stateless', name + '.db')}"
    return url if processes > 1 else url + "?events=local"


def _use_state(app: App, config: ServeConfig) -> None:
    """Open the store `config.state` names, or keep the app's own, or open the SQLite default."""
    from ..state import open_state, redact

    if not config.state and app.state is not None:
        return  # the app opened its own state and nothing in the config overrides it
    spec = config.state or default_state_url(app.name, config.processes)
    try:
        bundle = open_state(spec)
    except ValueError as e:
        raise CliError(f"--state: {e}") from None
    if config.processes > 1 and not bundle.multiprocess:
        raise CliError(f"--state {redact(spec)} cannot be shared by {config.processes} workers: "
                       "use sqlite:///path.db (one machine), redis://, redis-cluster:// or postgresql://")
    if bundle.shared and app.key_ring is None:
        raise CliError(f"--state {redact(spec)} is shared by several instances, so they need one MRTR key: "
                       f"set {KEYS_ENV}=kid:base64secret (the same on every instance)")
    app.use_state(bundle)
    log.debug("state: %s", redact(spec))


def check_port_free(host: str, port: int) -> None:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError as e:
            raise CliError(f"cannot listen on {host}:{port}: {e.strerror}") from None
