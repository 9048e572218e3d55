"""Span export configured by the standard ``OTEL_*`` environment variables (the SDK, optional).

``OTEL_TRACES_EXPORTER`` names the exporters (``otlp``, ``console``, ``none``; comma-separated), found by
the SDK's own entry points (``opentelemetry_traces_exporter``; ``otlp`` is the one for
``OTEL_EXPORTER_OTLP_PROTOCOL``, by default http/protobuf as the specification says), each configuring itself from its
variables (``OTEL_EXPORTER_OTLP_ENDPOINT``, ``OTEL_EXPORTER_OTLP_HEADERS``, …). ``OTEL_SERVICE_NAME`` and
``OTEL_RESOURCE_ATTRIBUTES`` name the service, ``OTEL_TRACES_SAMPLER`` samples, ``OTEL_BSP_*`` tune the
batching, ``OTEL_PROPAGATORS`` the propagators, ``OTEL_SDK_DISABLED=true`` turns it all off. A tracer
provider set before (by the application, or by ``opentelemetry-instrument``) is kept as it is.
"""

from __future__ import annotations

import atexit
import logging
import os
from collections.abc import Mapping
from importlib.metadata import entry_points

from opentelemetry import trace

log = logging.getLogger("mcp_stateless")

# `otlp` is the exporter for the configured OTLP protocol; unset, the specification's default
# (http/protobuf: the exporter the `otel-export` extra installs).
OTLP_BY_PROTOCOL = {"grpc": "otlp_proto_grpc", "http/protobuf": "otlp_proto_http", "http/json": "otlp_json_http"}


def _entry_point_name(name: str, environ: Mapping[str, str]) -> str:
    if name != "otlp":
        return name
    protocol = (environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or environ.get("OTEL_EXPORTER_OTLP_PROTOCOL")
                or "http/protobuf").strip()
    if protocol not in OTLP_BY_PROTOCOL:
        raise RuntimeError(f"OTEL_EXPORTER_OTLP_PROTOCOL={protocol}: not one of {', '.join(OTLP_BY_PROTOCOL)}")
    return OTLP_BY_PROTOCOL[protocol]


def configure_from_env(service_name: str, environ: Mapping[str, str] = os.environ) -> bool:
    """Install a tracer provider exporting where ``OTEL_TRACES_EXPORTER`` says; True when one was
    installed. Nothing happens when the variable is unset or ``none``, or a provider is already set."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    names = [n.strip() for n in environ.get("OTEL_TRACES_EXPORTER", "").split(",") if n.strip()]
    names = [n for n in names if n != "none"]
    if not names:
        return False
    if not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
        return False  # somebody configured tracing already
    try:
        from opentelemetry.sdk.resources import SERVICE_NAME, Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter
    except ImportError as e:
        raise RuntimeError(f"OTEL_TRACES_EXPORTER is set but the OpenTelemetry SDK is missing "
                           f"(pip install opentelemetry-sdk and an exporter): {e}") from None
    attrs = {} if "OTEL_SERVICE_NAME" in environ or "service.name=" in environ.get(
        "OTEL_RESOURCE_ATTRIBUTES", "") else {SERVICE_NAME: service_name}
    provider = TracerProvider(resource=Resource.create(attrs))
    available = {ep.name: ep for ep in entry_points(group="opentelemetry_traces_exporter")}
    for name in names:
        ep = available.get(_entry_point_name(name, environ))
        if ep is None:
            raise RuntimeError(f"OTEL_TRACES_EXPORTER={name}: no such exporter installed "
                               f"(have: {', '.join(sorted(available)) or 'none'}; the 'otel-export' extra "
                               "installs the SDK and OTLP over HTTP)")
        exporter_class: type[SpanExporter] = ep.load()
        provider.add_span_processor(BatchSpanProcessor(exporter_class()))
    trace.set_tracer_provider(provider)
    atexit.register(provider.shutdown)  # flush what is batched when the process ends
    log.info("tracing: exporting spans to %s", ", ".join(names))
    return True
