"""`mcp-stateless bridge --upstream "COMMAND ARGS" | --upstream-url URL (--http HOST:PORT | --stdio)`: a
2026-07-28 front for an unmodified 2025-era server (docs/bridge.md).

The options after the upstream are `serve`'s own (`serve.add_endpoint_options`), read by the same
`config_from_args`; the bridge is served by the same HTTP runner and stdio loop as an app.
"""

from __future__ import annotations

import argparse
import os
import shlex
import signal
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from . import logs, serve
from .base import CliError

if TYPE_CHECKING:
    from ..bridge import Bridge
    from .config import ServeConfig


def register(sub: Any) -> None:
    s = sub.add_parser(
        "bridge",
        help="serve an unmodified 2025-era MCP server (stdio command or URL) as a stateless 2026-07-28 endpoint",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=(
            "Forward 2026-07-28 requests to a 2025-era upstream through a pool of its sessions; its\n"
            "server->client requests (elicitation, sampling, roots) become MRTR input_required rounds."
        ),
        epilog=(
            "examples:\n"
            "  mcp-stateless bridge --upstream 'uvx mcp-server-time' --http 127.0.0.1:8000\n"
            "  mcp-stateless bridge --upstream-url http://127.0.0.1:3001/mcp --stdio\n\n"
            f"Instances behind a balancer share {serve.KEYS_ENV} and a redis:// --state: a retry that\n"
            "lands on another instance is routed to the one holding the upstream call."
        ),
    )
    s.set_defaults(run=run)
    up = s.add_mutually_exclusive_group(required=True)
    up.add_argument("--upstream", metavar="COMMAND", help="the upstream's command line (stdio), one string")
    up.add_argument("--upstream-url", metavar="URL", help="a 2025 Streamable HTTP or HTTP+SSE endpoint")
    s.add_argument("--upstream-sessions", type=int, default=16, metavar="N",
                   help="upstream sessions per instance (default 16)")
    s.add_argument("--upstream-idle", type=float, default=300.0, metavar="S",
                   help="close an upstream session idle this long (default 300 s)")
    s.add_argument("--upstream-timeout", type=float, default=60.0, metavar="S",
                   help="an upstream request that takes longer fails with -32603 (default 60 s)")
    s.add_argument("--forward-authorization", action="store_true",
                   help="with --upstream-url: open each caller's upstream sessions with the Authorization "
                        "header it sent (the upstream checks it); callers are told apart by it")
    s.add_argument("--upstream-watches", type=int, default=None, metavar="N",
                   help="callers whose listen streams hold an upstream session at once, per instance, when "
                        "sessions are per caller (default: half of --upstream-sessions)")
    serve.add_endpoint_options(s)


def run(args: argparse.Namespace) -> int:
    args.app = f"bridge:{args.upstream or args.upstream_url}"
    config = serve.config_from_args(args)
    logs.configure(config.log_level, config.log_format)
    for flag, bad in (("--workers", config.workers != 1), ("--reload", args.reload),
                      ("--legacy-sse", config.legacy_sse), ("--auth-issuer", bool(config.auth_issuers))):
        if bad:
            raise CliError(f"bridge: {flag} is not supported yet")
    if args.upstream_sessions < 1:
        raise CliError("--upstream-sessions must be at least 1")
    if args.upstream_watches is not None and args.upstream_watches < 1:
        raise CliError("--upstream-watches must be at least 1")
    if args.forward_authorization and args.upstream_url is None:
        raise CliError("--forward-authorization needs --upstream-url (a stdio upstream takes no credentials)")
    if args.forward_authorization and config.transport == "stdio":
        raise CliError("--forward-authorization needs an --http front (a stdio client sends no Authorization)")
    if config.transport == "stdio":
        from ..transports.stdio import protect_stdout, serve_stdio

        out_fd = protect_stdout()
        # A stdio client may SIGTERM us right after closing stdin (the TypeScript SDK does, for a probe):
        # the upstream processes are closed first, never left running on their own.
        return serve_stdio(make_bridge(args, config), out_fd, tool_threads=config.tool_threads,
                           max_inflight=config.max_inflight, stop_signals=(signal.SIGTERM,))
    serve.check_port_free(config.host, config.port)
    from ..transports import serve_http
    from ..transports.health import health_routes
    from ..transports.http import HttpTransport
    from ..transports.limits import EdgeLimits

    bridge = make_bridge(args, config)
    transport = serve_http.drained(HttpTransport(
        bridge, path=config.path, origin_policy=config.origin_policy(), max_body=config.max_body,
        instance=config.instance_name, public_url=config.resource_url, routes=health_routes(bridge.readiness)))
    limits = EdgeLimits(config.idle_timeout, config.header_timeout, config.body_timeout, config.max_connections)
    return serve_http.run(transport, host=config.host, port=config.port, log_level=config.log_level,
                          limits=limits, tool_threads=config.tool_threads,
                          uvicorn_logging=config.log_format == "text")


def make_bridge(args: argparse.Namespace, config: ServeConfig) -> Bridge:
    from ..bridge import Bridge
    from ..client.channels import Channel, HttpChannel, StdioChannel
    from ..protocol.mrtr import KeyRing
    from ..state import open_state, redact

    ring = None
    if config.keys:
        try:
            ring = KeyRing.from_config(config.keys)
        except ValueError as e:
            raise CliError(f"{serve.KEYS_ENV}: {e}") from None
    bus = events = None
    if config.state:
        try:
            bundle = open_state(config.state)
        except ValueError as e:
            raise CliError(f"--state: {e}") from None
        if bundle.shared and ring is None:
            raise CliError(f"--state {redact(config.state)} is shared by several instances, so they need one "
                           f"MRTR key: set {serve.KEYS_ENV}=kid:base64secret (the same on every instance)")
        bus, events = bundle.bus, bundle.events  # MRTR answers and listen events cross instances
    credentialed: Callable[[str], Channel] | None = None
    if args.upstream is not None:
        argv = shlex.split(args.upstream)
        if not argv:
            raise CliError("--upstream is empty")

        def factory() -> Channel:
            # The upstream's stderr stays ours (its logs), its stdout is the protocol. Its grace after stdin
            # closes is short: a stdio front's own client sends SIGTERM 2 s after closing ours (the SDKs do),
            # and every upstream must be gone by then, not orphaned.
            return StdioChannel(argv, env=dict(os.environ), shutdown_timeout=0.5)
        per_principal = False
    else:
        url = args.upstream_url

        def factory() -> Channel:
            return HttpChannel(url, timeout=args.upstream_timeout)

        def credentialed_factory(authorization: str) -> Channel:
            return HttpChannel(url, timeout=args.upstream_timeout, headers={"Authorization": authorization})
        per_principal = True
        if args.forward_authorization:
            credentialed = credentialed_factory
    return Bridge(factory, key_ring=ring, bus=bus, events=events, per_principal=per_principal,
                  max_sessions=args.upstream_sessions, idle_s=args.upstream_idle,
                  upstream_timeout=args.upstream_timeout, credentialed=credentialed,
                  max_watches=args.upstream_watches)
