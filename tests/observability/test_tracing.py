"""Spans captured with the OpenTelemetry SDK's in-memory exporter: names, kinds, semconv attributes,
parents; a trace started in our client continues in our server over HTTP (in process) and stdio (a
subprocess exporting through OTEL_TRACES_EXPORTER=console)."""

from __future__ import annotations

import http.server
import json
import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, ClassVar

import httpx
import orjson
import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from mcp_stateless import App, Client, Context, McpError, ToolError
from mcp_stateless.observability import Tracing, known_names
from services import CLI, http_server

ROOT = Path(__file__).resolve().parents[2]
PV = "2026-07-28"
NAME_FORM = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture
def provider(exporter: InMemorySpanExporter) -> TracerProvider:
    p = TracerProvider()
    p.add_span_processor(SimpleSpanProcessor(exporter))
    return p


def traced_app(provider: TracerProvider) -> App:
    app = App("traced")

    @app.tool()
    async def echo(text: str) -> str:
        # the handler runs inside the server span: its own spans nest under it
        with trace.get_tracer("handler", tracer_provider=provider).start_as_current_span("inside echo"):
            return text

    @app.tool()
    async def fail() -> str:
        raise ToolError("no")

    @app.tool()
    async def ask(ctx: Context) -> str:
        return str(ctx.elicit("Name?", NAME_FORM, key="n").content)

    @app.prompt()
    def greet(name: str) -> str:
        return f"hi {name}"

    app.add_request_middleware(Tracing(known_names(app), tracer_provider=provider))
    return app


def server_spans(exporter: InMemorySpanExporter) -> list[ReadableSpan]:
    return [s for s in exporter.get_finished_spans() if s.kind == SpanKind.SERVER]


def by_name(spans: list[ReadableSpan]) -> dict[str, list[ReadableSpan]]:
    out: dict[str, list[ReadableSpan]] = {}
    for s in spans:
        out.setdefault(s.name, []).append(s)
    return out


async def test_a_trace_started_in_our_client_continues_in_our_server_over_http(
        served: Callable[..., Any], provider: TracerProvider, exporter: InMemorySpanExporter) -> None:
    s = served(traced_app(provider))
    tracer = provider.get_tracer("agent")
    with tracer.start_as_current_span("agent turn", kind=SpanKind.CLIENT) as root:
        async with Client(s.url) as c:
            assert (await c.call_tool("echo", {"text": "hi"}))["content"][0]["text"] == "hi"
    spans = by_name(server_spans(exporter))
    root_ctx = root.get_span_context()
    # discovery included: every request the client sent carries the trace
    assert "server/discover" in spans
    for span in [x for group in spans.values() for x in group]:
        assert span.context.trace_id == root_ctx.trace_id
        assert span.parent is not None and span.parent.span_id == root_ctx.span_id
        assert span.parent.is_remote
    (call,) = spans["tools/call echo"]
    assert dict(call.attributes or {}) == {
        "mcp.method.name": "tools/call",
        "gen_ai.tool.name": "echo",
        "gen_ai.operation.name": "execute_tool",
        "jsonrpc.request.id": str(call.attributes["jsonrpc.request.id"]),  # type: ignore[index]
        "mcp.protocol.version": PV,
        "network.transport": "tcp",
        "network.protocol.name": "http",
    }
    assert call.attributes["jsonrpc.request.id"].isdigit()  # type: ignore[index,union-attr]
    assert call.status.status_code == StatusCode.UNSET
    inner = [x for x in exporter.get_finished_spans() if x.name == "inside echo"]
    assert len(inner) == 1 and inner[0].parent is not None
    assert inner[0].parent.span_id == call.context.span_id


async def test_errors_tool_errors_and_mrtr_rounds(provider: TracerProvider, exporter: InMemorySpanExporter) -> None:
    async def name(params: dict[str, Any]) -> dict[str, Any]:
        return {"action": "accept", "content": {"name": "Ada"}}

    async with Client(traced_app(provider), elicitation=name) as c:
        await c.call_tool("fail", {})
        with pytest.raises(McpError):
            await c.call_tool("unknown-tool", {})
        await c.call_tool("ask", {})
        await c.get_prompt("greet", {"name": "x"})
    spans = by_name(server_spans(exporter))
    (fail,) = spans["tools/call fail"]
    assert fail.attributes["error.type"] == "tool_error"  # type: ignore[index]
    assert "rpc.response.status_code" not in (fail.attributes or {})
    assert fail.status.status_code == StatusCode.ERROR
    # an unregistered name never becomes part of a span name; the attribute says what was asked
    (unknown,) = spans["tools/call"]
    assert unknown.attributes["gen_ai.tool.name"] == "unknown-tool"  # type: ignore[index]
    assert unknown.attributes["error.type"] == "-32602"  # type: ignore[index]
    assert unknown.attributes["rpc.response.status_code"] == "-32602"  # type: ignore[index]
    assert (unknown.status.status_code, unknown.status.description) == (StatusCode.ERROR, "Unknown tool: unknown-tool")
    asks = spans["tools/call ask"]
    assert len(asks) == 2  # the input_required round and the completing one
    assert all("error.type" not in (a.attributes or {}) for a in asks)
    assert all(a.status.status_code == StatusCode.UNSET for a in asks)
    assert all(a.attributes["network.transport"] == "inproc" for a in asks)  # type: ignore[index]
    (greet,) = spans["prompts/get greet"]
    assert greet.attributes["gen_ai.prompt.name"] == "greet"  # type: ignore[index]
    assert "gen_ai.operation.name" not in (greet.attributes or {})


def _post(url: str, meta_extra: dict[str, str], **headers: str) -> httpx.Response:
    msg = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {
        "name": "echo", "arguments": {"text": "x"},
        "_meta": {"io.modelcontextprotocol/protocolVersion": PV, "io.modelcontextprotocol/clientCapabilities": {},
                  **meta_extra}}}
    h = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
         "MCP-Protocol-Version": PV, "Mcp-Method": "tools/call", "Mcp-Name": "echo", **headers}
    return httpx.post(url, content=orjson.dumps(msg), headers=h, timeout=10)


META_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
META_SPAN = "00f067aa0ba902b7"
HTTP_TRACE = "0af7651916cd43dd8448eb211c80319c"
HTTP_SPAN = "b7ad6b7169203331"


def test_meta_context_is_the_parent_and_the_http_traceparent_a_link(
        served: Callable[..., Any], provider: TracerProvider, exporter: InMemorySpanExporter) -> None:
    s = served(traced_app(provider))
    r = _post(s.url, {"traceparent": f"00-{META_TRACE}-{META_SPAN}-01", "tracestate": "rojo=00f067aa0ba902b7"},
              traceparent=f"00-{HTTP_TRACE}-{HTTP_SPAN}-01")
    assert r.status_code == 200, r.text
    (span,) = server_spans(exporter)
    assert span.name == "tools/call echo"
    assert (f"{span.context.trace_id:032x}", f"{span.parent.span_id:016x}") == (META_TRACE, META_SPAN)  # type: ignore[union-attr]
    assert span.context.trace_state.get("rojo") == "00f067aa0ba902b7"
    assert span.attributes["jsonrpc.request.id"] == "7"  # type: ignore[index]
    (link,) = span.links
    assert (f"{link.context.trace_id:032x}", f"{link.context.span_id:016x}") == (HTTP_TRACE, HTTP_SPAN)


def test_without_meta_context_the_http_traceparent_is_the_parent(
        served: Callable[..., Any], provider: TracerProvider, exporter: InMemorySpanExporter) -> None:
    s = served(traced_app(provider))
    assert _post(s.url, {}, traceparent=f"00-{HTTP_TRACE}-{HTTP_SPAN}-01").status_code == 200
    assert _post(s.url, {"traceparent": "not a traceparent"}).status_code == 200  # garbage is ignored
    with_header, without = server_spans(exporter)
    assert (f"{with_header.context.trace_id:032x}", f"{with_header.parent.span_id:016x}") == (  # type: ignore[union-attr]
        HTTP_TRACE, HTTP_SPAN)
    assert with_header.links == ()
    assert without.parent is None and without.links == ()  # a new trace


async def test_no_tracer_provider_means_no_spans_and_no_context_work() -> None:
    """With only the API installed (no SDK provider set), the middleware passes requests straight on."""
    app = App("untraced")

    @app.tool()
    async def echo(text: str) -> str:
        return text

    tracing = Tracing(known_names(app))
    app.add_request_middleware(tracing)
    assert isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)
    async with Client(app) as c:
        assert (await c.call_tool("echo", {"text": "ok"}))["content"][0]["text"] == "ok"
    assert tracing._tracer is None


def console_spans(text: str) -> list[dict[str, Any]]:
    """The JSON objects ConsoleSpanExporter wrote (one indented object per span), among log lines."""
    decoder = json.JSONDecoder()
    out = []
    i = text.find("{\n")
    while i != -1:
        obj, end = decoder.raw_decode(text, i)
        if isinstance(obj, dict) and "context" in obj:
            out.append(obj)
        i = text.find("{\n", end)
    return out


@pytest.fixture
def stderr_file(tmp_path: Path) -> Iterator[Any]:
    with open(tmp_path / "server.stderr", "w+") as f:
        yield f


@pytest.mark.slow
async def test_a_trace_continues_over_stdio_and_otel_env_configures_export(
        provider: TracerProvider, stderr_file: Any) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "MCP_STATELESS_"))}
    env.update({"OTEL_TRACES_EXPORTER": "console", "OTEL_SERVICE_NAME": "observed-stdio", "PYTHONUNBUFFERED": "1"})
    argv = [CLI, "serve", "tests/apps/observed_app.py:app", "--stdio", "--state", "memory://"]
    with provider.get_tracer("agent").start_as_current_span("agent turn") as root:
        async with Client(stdio=argv, cwd=str(ROOT), env=env, stderr=stderr_file.fileno()) as c:
            assert (await c.call_tool("echo", {"text": "piped"}))["content"][0]["text"] == "piped"
    # the client closed stdin, the server exited and flushed its batch at exit
    stderr_file.seek(0)
    spans = console_spans(stderr_file.read())
    names = sorted(s["name"] for s in spans)
    assert "tools/call echo" in names and "server/discover" in names, names
    trace_id = f"0x{root.get_span_context().trace_id:032x}"
    parent = f"0x{root.get_span_context().span_id:016x}"
    for s in spans:
        assert (s["kind"], s["context"]["trace_id"], s["parent_id"]) == ("SpanKind.SERVER", trace_id, parent)
        assert s["resource"]["attributes"]["service.name"] == "observed-stdio"
    (echo,) = [s for s in spans if s["name"] == "tools/call echo"]
    assert echo["attributes"]["network.transport"] == "pipe"
    assert echo["attributes"]["gen_ai.tool.name"] == "echo"
    assert "network.protocol.name" not in echo["attributes"]


class _Collector(http.server.BaseHTTPRequestHandler):
    """A minimal OTLP/HTTP trace receiver: keeps every ExportTraceServiceRequest it is sent."""

    received: ClassVar[list[Any]] = []

    def do_POST(self) -> None:
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

        body = self.rfile.read(int(self.headers["content-length"]))
        msg = ExportTraceServiceRequest()
        msg.ParseFromString(body)
        type(self).received.append((self.path, msg))
        self.send_response(200)
        self.send_header("content-type", "application/x-protobuf")
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.mark.slow
def test_otlp_export_configured_by_the_standard_variables() -> None:
    collector = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Collector)
    _Collector.received = []
    thread = threading.Thread(target=collector.serve_forever, daemon=True)
    thread.start()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "MCP_STATELESS_"))}
    env.update({"OTEL_TRACES_EXPORTER": "otlp",  # the protocol left to its default, http/protobuf
                "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{collector.server_port}",
                "OTEL_BSP_SCHEDULE_DELAY": "100", "OTEL_SERVICE_NAME": "observed-otlp"})
    argv = [CLI, "serve", "tests/apps/observed_app.py:app", "--http", "127.0.0.1:{port}", "--state", "memory://"]
    try:
        with http_server(argv, "serve with OTLP export", cwd=ROOT, env=env) as url:
            assert _post(url, {"traceparent": f"00-{META_TRACE}-{META_SPAN}-01"}).status_code == 200
            deadline = time.monotonic() + 20
            spans: list[Any] = []
            while not spans:
                assert time.monotonic() < deadline, "no span reached the OTLP receiver"
                time.sleep(0.1)
                spans = [(path, rs, span) for path, msg in list(_Collector.received) for rs in msg.resource_spans
                         for ss in rs.scope_spans for span in ss.spans if span.name == "tools/call echo"]
    finally:
        collector.shutdown()
        collector.server_close()
    ((path, resource_spans, span),) = spans
    assert path == "/v1/traces"
    assert (span.trace_id.hex(), span.parent_span_id.hex()) == (META_TRACE, META_SPAN)
    assert span.kind == span.SPAN_KIND_SERVER
    service = {a.key: a.value.string_value for a in resource_spans.resource.attributes}["service.name"]
    assert service == "observed-otlp"
