"""The benchmark targets: the same two-tool server (echo, add) built with each library, plus a bare ASGI baseline.

Importable from both virtual environments: each builder imports its library only when called, so the
peers' venv never needs mcp_stateless and ours never needs mcp/fastmcp.

Every target serves POST /mcp with:
  echo(text: str) -> str         the measured call
  add(a: int, b: int) -> int
  progress_echo(text: str) -> str   sends one progress notification first (SSE response)
Ours additionally has `touch()` (publishes a tools/list_changed event, for the listen fan-out test) and
takes the principal from the Authorization header (for the memory-flatness test). `ours_metrics` and
`ours_otel` are ours with the observability middleware (`serve --metrics`; opentelemetry-api installed,
no exporter). `ours_anon` / `ours_jwt` are the pair of the authentication section: the same echo server
with no authentication at all, and as an OAuth resource server checking a JWT access token on every
request (`BENCH_AUTH_ISSUER` / `BENCH_AUTH_RESOURCE` name the issuer and this server's resource URI).
"""



from typing import Any

TARGETS = ("bare", "ours", "ours_sync", "ours_metrics", "ours_otel", "ours_anon", "ours_jwt", "mcp", "fastmcp",
           "ours_legacy", "mcp_legacy")
PEERS = ("mcp", "fastmcp", "mcp_legacy")  # run from the peers' venv


def build_ours_sync() -> Any:
    """Ours with plain `def` tools (the README's style): each call runs in a worker thread."""
    from mcp_stateless import App
    from mcp_stateless.transports.http import HttpTransport

    app = App("bench", "1.0.0")

    @app.tool()
    def echo(text: str) -> str:
        """Return the text unchanged."""
        return text

    @app.tool()
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    return HttpTransport(app)


def build_ours() -> Any:
    from mcp_stateless import App, Context
    from mcp_stateless.transports.http import HttpTransport

    def principal(headers: Any) -> str:
        return (headers or {}).get("authorization", "anonymous")

    app = App("bench", "1.0.0", principal=principal)

    @app.tool()
    async def echo(text: str) -> str:
        """Return the text unchanged."""
        return text

    @app.tool()
    async def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    @app.tool()
    async def progress_echo(text: str, ctx: Context) -> str:
        """Report progress once, then return the text."""
        await ctx.report_progress(1, 2)
        return text

    @app.tool()
    async def touch() -> str:
        """Publish a tools/list_changed event to every listen stream."""
        await app.notify_tools_changed()
        return "ok"

    return HttpTransport(app), app


def build_ours_legacy() -> Any:
    """Ours serving both eras, as `mcp-stateless serve` does by default (`--legacy serve`)."""
    from mcp_stateless.server.legacy import LegacyServer
    from mcp_stateless.transports.http import HttpTransport

    app = build_ours()[1]
    return HttpTransport(app, legacy=LegacyServer(app))


def build_ours_metrics() -> Any:
    """Ours as `serve --metrics` runs it (without tracing): the Prometheus middleware and GET /metrics."""
    from mcp_stateless.observability import MetricsRoute, instrument

    transport, app = build_ours()
    metrics = instrument(app, metrics=True, tracing=False)
    assert metrics is not None
    return MetricsRoute(transport, metrics)


def build_ours_otel() -> Any:
    """Ours as `serve` runs it with opentelemetry-api installed and no exporter configured: the tracing
    middleware in place, the global tracer provider the API's default."""
    from mcp_stateless.observability import instrument

    transport, app = build_ours()
    instrument(app, tracing=True)
    return transport


def build_ours_stdio() -> Any:
    return build_ours()[1]


def build_ours_auth(authenticated: bool) -> Any:
    """The echo server anonymous, or behind a `BearerAuthenticator` (RS256 JWT, keys cached after the
    first fetch) requiring one scope, as a deployment would."""
    import os

    from mcp_stateless import App
    from mcp_stateless.transports.http import HttpTransport

    if authenticated:
        from mcp_stateless.auth import BearerAuthenticator

        app = App("bench", "1.0.0", authenticator=BearerAuthenticator(
            os.environ["BENCH_AUTH_RESOURCE"], [os.environ["BENCH_AUTH_ISSUER"]], required_scopes=["tools:read"]))
    else:
        app = App("bench", "1.0.0")

    @app.tool()
    async def echo(text: str) -> str:
        """Return the text unchanged."""
        return text

    return HttpTransport(app)


def build_mcp() -> Any:
    from mcp.server.mcpserver import Context, MCPServer

    server = MCPServer("bench", version="1.0.0")

    @server.tool()
    async def echo(text: str) -> str:
        """Return the text unchanged."""
        return text

    @server.tool()
    async def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    @server.tool()
    async def progress_echo(text: str, ctx: Context) -> str:
        """Report progress once, then return the text."""
        await ctx.report_progress(1, 2)
        return text

    return server


def build_mcp_http(json_response: bool) -> Any:
    return build_mcp().streamable_http_app(json_response=json_response, stateless_http=True)


def build_mcp_legacy() -> Any:
    """The official SDK's 2025-era path as it ships: stateful sessions (a per-process session map),
    SSE responses (its default `json_response=False`)."""
    return build_mcp().streamable_http_app()


def build_fastmcp() -> Any:
    from fastmcp import Context, FastMCP

    server = FastMCP("bench", version="1.0.0")

    @server.tool
    async def echo(text: str) -> str:
        """Return the text unchanged."""
        return text

    @server.tool
    async def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    @server.tool
    async def progress_echo(text: str, ctx: Context) -> str:
        """Report progress once, then return the text."""
        await ctx.report_progress(1, 2)
        return text

    return server


def build_fastmcp_http(json_response: bool) -> Any:
    return build_fastmcp().http_app(json_response=json_response, stateless_http=True)


def build_bare() -> Any:
    """Parses the JSON-RPC body and answers a fixed result: the floor any MCP server on this stack pays."""
    import orjson

    headers = [(b"content-type", b"application/json")]
    result = {"content": [{"type": "text", "text": "hi"}], "resultType": "complete"}

    async def app(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            if scope["type"] == "lifespan":
                while True:
                    msg = await receive()
                    if msg["type"] == "lifespan.startup":
                        await send({"type": "lifespan.startup.complete"})
                    elif msg["type"] == "lifespan.shutdown":
                        await send({"type": "lifespan.shutdown.complete"})
                        return
            return
        body = b""
        more = True
        while more:
            msg = await receive()
            body += msg.get("body", b"")
            more = msg.get("more_body", False)
        req = orjson.loads(body)
        out = orjson.dumps({"jsonrpc": "2.0", "id": req.get("id"), "result": result})
        await send({"type": "http.response.start", "status": 200,
                    "headers": [*headers, (b"content-length", str(len(out)).encode())]})
        await send({"type": "http.response.body", "body": out})

    return app


def asgi_app(target: str, json_response: bool = True) -> Any:
    if target == "bare":
        return build_bare()
    if target == "ours":
        return build_ours()[0]
    if target == "ours_sync":
        return build_ours_sync()
    if target == "ours_metrics":
        return build_ours_metrics()
    if target == "ours_otel":
        return build_ours_otel()
    if target in ("ours_anon", "ours_jwt"):
        return build_ours_auth(target == "ours_jwt")
    if target == "mcp":
        return build_mcp_http(json_response)
    if target == "fastmcp":
        return build_fastmcp_http(json_response)
    if target == "ours_legacy":
        return build_ours_legacy()
    if target == "mcp_legacy":
        return build_mcp_legacy()
    raise ValueError(f"unknown target {target!r}")
