"""OpenTelemetry spans for an endpoint, as middleware: `Tracing` (the optional `otel` extra,
opentelemetry-api).

One SERVER span per request, named ``{mcp.method.name} {target}`` (the tool or prompt name when it is
registered, else the method alone), with the MCP semantic conventions' attributes. Its parent is the
trace context the client put in ``params._meta`` (``traceparent``/``tracestate``, SEP-414); the
ambient context (an HTTP server span, or the request's ``traceparent`` header) is linked, and is the
parent only when ``_meta`` carries none. While no tracer provider is configured (the API alone is
installed) nothing is extracted or created: the cost is one check per request.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator, Mapping
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.trace import Link, SpanKind, Status, StatusCode

from ..protocol.endpoint import Call, Handler, ListenItem, Lister, Reply
from ..protocol.envelope import Request
from . import semconv
from .semconv import Known

PROPAGATION_KEYS = ("traceparent", "tracestate", "baggage")
RECHECK_S = 1.0  # how soon a global tracer provider set after start-up is used
_MAX_NAME = 256  # a requested name is an attribute, never unbounded


def _carrier(source: Mapping[str, Any] | None) -> dict[str, str] | None:
    if not source:
        return None
    carrier = {k: v for k in PROPAGATION_KEYS if isinstance(v := source.get(k), str)}
    return carrier or None


class Tracing:
    """Middleware emitting one span per request (`App(request_middleware=[...])` or `app.add_request_middleware`).
    `tracer_provider`: None uses the global one (`opentelemetry.trace.set_tracer_provider`, or what
    `configure_from_env` set up); `known` bounds the span names (see `semconv.target_of`)."""

    def __init__(self, known: Known = semconv.everything_known, *,
                 tracer_provider: trace.TracerProvider | None = None) -> None:
        self.known = known
        self._provider = tracer_provider
        self._seen: trace.TracerProvider | None = None
        self._tracer: trace.Tracer | None = None
        self._recheck_at = 0.0

    def _current_tracer(self) -> trace.Tracer | None:
        if self._provider is not None:
            provider = self._provider
        else:
            # perf: the global provider is looked up at most once a second (the lookup reads os.environ);
            # one set later is used from then on
            now = time.monotonic()
            if now < self._recheck_at:
                return self._tracer
            self._recheck_at = now + RECHECK_S
            provider = trace.get_tracer_provider()
        if provider is not self._seen:
            self._seen = provider
            # perf: the API's own providers make non-recording spans; skip the work entirely for them
            noop = isinstance(provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider)
            self._tracer = None if noop else provider.get_tracer("mcp_stateless")
        return self._tracer

    async def handle(self, req: Request, call: Call, call_next: Handler) -> Reply:
        tracer = self._current_tracer()
        if tracer is None:
            return await call_next(req, call)
        parent, links = self._parent_and_links(req, call)
        tool, prompt = semconv.target_of(req, self.known)
        target = tool or prompt
        name = req.method if target in ("", semconv.OTHER) else f"{req.method} {target}"
        with tracer.start_as_current_span(name, context=parent, kind=SpanKind.SERVER, links=links,
                                          attributes=self._attributes(req, call),
                                          record_exception=False, set_status_on_exception=False) as span:
            try:
                reply = await call_next(req, call)
            except BaseException as e:
                cancelled = isinstance(e, asyncio.CancelledError)
                span.set_attribute("error.type", semconv.CANCELLED if cancelled else type(e).__qualname__)
                span.set_status(Status(StatusCode.ERROR))
                raise
            error_type, _ = semconv.outcome(reply)
            if reply.error_code is not None:
                span.set_attribute("rpc.response.status_code", str(reply.error_code))
            if error_type:
                span.set_attribute("error.type", error_type)
                span.set_status(Status(StatusCode.ERROR, semconv.error_message(reply)))
            return reply

    def _parent_and_links(self, req: Request, call: Call) -> tuple[otel_context.Context | None, list[Link]]:
        meta = req.params.get("_meta")
        from_meta = _carrier(meta) if isinstance(meta, dict) else None
        ambient = trace.get_current_span().get_span_context()
        header_ctx: trace.SpanContext | None = None
        if call.headers is not None:
            carrier = _carrier(call.headers)
            if carrier is not None:
                header_ctx = trace.get_current_span(propagate.extract(carrier)).get_span_context()
        transport = ambient if ambient.is_valid else header_ctx
        if from_meta is not None:
            parent = propagate.extract(from_meta)
            parent_span = trace.get_current_span(parent).get_span_context()
            if parent_span.is_valid:
                linked = transport is not None and transport.is_valid and transport.span_id != parent_span.span_id
                return parent, [Link(transport)] if linked and transport is not None else []
        if ambient.is_valid:
            return None, []  # the current context is the parent
        if header_ctx is not None and header_ctx.is_valid:
            return trace.set_span_in_context(trace.NonRecordingSpan(header_ctx)), []
        return None, []

    def _attributes(self, req: Request, call: Call) -> dict[str, Any]:
        attrs: dict[str, Any] = {
            "mcp.method.name": req.method,
            "jsonrpc.request.id": str(req.id),
            "mcp.protocol.version": req.version,
            "network.transport": semconv.NETWORK_TRANSPORT.get(call.transport, semconv.OTHER),
        }
        if call.transport == "http":
            attrs["network.protocol.name"] = "http"
        params = req.params
        name = params.get("name")
        if req.method == "tools/call" and isinstance(name, str):
            attrs["gen_ai.tool.name"] = name[:_MAX_NAME]
            attrs["gen_ai.operation.name"] = "execute_tool"
        elif req.method == "prompts/get" and isinstance(name, str):
            attrs["gen_ai.prompt.name"] = name[:_MAX_NAME]
        uri = params.get("uri")
        if req.method.startswith("resources/") and isinstance(uri, str):
            attrs["mcp.resource.uri"] = uri
        if call.can_send_request:
            attrs["mcp.era"] = "legacy"
        return attrs

    def listen(self, req: Request, call: Call, call_next: Lister) -> AsyncGenerator[ListenItem, None]:
        # A listen stream lasts for hours: no span around it (its events are not operations).
        return call_next(req, call)
