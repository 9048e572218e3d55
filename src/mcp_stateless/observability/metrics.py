"""Prometheus metrics for an endpoint, as middleware: `PrometheusMetrics` (the optional `metrics` extra,
prometheus-client).

- ``mcp_server_operation_duration_seconds`` (histogram; semconv ``mcp.server.operation.duration``, its
  bucket boundaries) labelled ``mcp_method_name``, ``gen_ai_tool_name``, ``gen_ai_prompt_name``,
  ``error_type``, ``mcp_protocol_version``, ``network_transport``, ``mcp_era`` and ``mcp_result_type``;
- ``mcp_server_requests_in_flight`` (gauge, by method) and ``mcp_server_listen_streams`` (gauge);
- read when scraped: ``mcp_server_tasks_running`` and ``mcp_server_task_transitions_total{status}``
  (this process's task runtime), ``mcp_state_store_errors_total{engine}``, and
  ``mcp_legacy_exchanges_total{kind,status}`` (the 2025 branch's own counters).

Every label is bounded (see `semconv`). Metrics are per process: with several workers, each has its own.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator, Callable, Iterable, Mapping
from typing import Any

from prometheus_client import CollectorRegistry, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.registry import Collector

from ..protocol.endpoint import Call, Handler, ListenItem, Lister, Reply
from ..protocol.envelope import Request
from ..state.base import STATE_ERRORS
from . import semconv
from .semconv import CANCELLED, OTHER, Known

# semconv's advice for mcp.server.operation.duration (seconds)
BUCKETS = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
LABELS = ("mcp_method_name", "gen_ai_tool_name", "gen_ai_prompt_name", "error_type", "mcp_protocol_version",
          "network_transport", "mcp_era", "mcp_result_type")

# What the scrape-time collector reads: this process's task runtime (running count, transitions by
# status) and the legacy branch's exchange counters; each optional.
TaskStats = Callable[[], tuple[int, Mapping[str, int]] | None]
LegacyCounters = Callable[[], Mapping[tuple[str, int], int] | None]


class _ScrapeCollector(Collector):
    def __init__(self, tasks: TaskStats | None, legacy: LegacyCounters | None) -> None:
        self._tasks = tasks
        self._legacy = legacy

    def collect(self) -> Iterable[Metric]:
        errors = CounterMetricFamily("mcp_state_store_errors", "State store operations that failed "
                                     "(the store was unreachable or refused)", labels=["engine"])
        for engine, n in sorted(dict(STATE_ERRORS).items()):
            errors.add_metric([engine], n)
        yield errors
        stats = self._tasks() if self._tasks is not None else None
        if stats is not None:
            running, transitions = stats
            yield GaugeMetricFamily("mcp_server_tasks_running", "Tasks this process is running now", value=running)
            fam = CounterMetricFamily("mcp_server_task_transitions", "Task status changes this process "
                                      "committed, by the status entered", labels=["status"])
            for entered, n in sorted(dict(transitions).items()):
                fam.add_metric([entered], n)
            yield fam
        counters = self._legacy() if self._legacy is not None else None
        if counters is not None:
            fam = CounterMetricFamily("mcp_legacy_exchanges", "2025-era HTTP exchanges answered, by kind and "
                                      "HTTP status", labels=["kind", "status"])
            for (kind, http_status), n in sorted(dict(counters).items()):
                fam.add_metric([kind, str(http_status)], n)
            yield fam


class PrometheusMetrics:
    """Middleware recording each request's duration and outcome (`App(middleware=[...])` or
    `app.add_middleware`). `known` says which tool and prompt names may be label values (others are
    ``_OTHER``); `registry` defaults to a registry of this object's own (`render()` writes it)."""

    def __init__(self, known: Known = semconv.everything_known, *, registry: CollectorRegistry | None = None,
                 tasks: TaskStats | None = None, legacy: LegacyCounters | None = None,
                 buckets: tuple[float, ...] = BUCKETS) -> None:
        self.known = known
        self.registry = registry if registry is not None else CollectorRegistry()
        self.duration = Histogram("mcp_server_operation_duration_seconds",
                                  "MCP request duration as observed on the server, until the reply is ready",
                                  LABELS, registry=self.registry, buckets=buckets)
        self.in_flight = Gauge("mcp_server_requests_in_flight", "Requests being answered now",
                               ["mcp_method_name"], registry=self.registry)
        self.listen_streams = Gauge("mcp_server_listen_streams", "Open subscriptions/listen streams",
                                    registry=self.registry)
        self.registry.register(_ScrapeCollector(tasks, legacy))
        # perf: label children looked up once per label combination (bounded), not per request
        self._series: dict[tuple[str, ...], Any] = {}
        self._gauges: dict[str, Any] = {}

    async def handle(self, req: Request, call: Call, call_next: Handler) -> Reply:
        gauge = self._gauges.get(req.method)
        if gauge is None:
            gauge = self._gauges[req.method] = self.in_flight.labels(req.method)
        gauge.inc()
        start = time.perf_counter()
        error_type, result_type = CANCELLED, "error"
        try:
            reply = await call_next(req, call)
            error_type, result_type = semconv.outcome(reply)
            return reply
        except asyncio.CancelledError:
            raise  # the client went away or cancelled: recorded as CANCELLED
        except BaseException:
            error_type = OTHER
            raise
        finally:
            gauge.dec()
            self._observe(req, call, error_type, result_type, time.perf_counter() - start)

    def _observe(self, req: Request, call: Call, error_type: str, result_type: str, seconds: float) -> None:
        tool, prompt = semconv.target_of(req, self.known)
        key = (req.method, tool, prompt, error_type, req.version,
               semconv.NETWORK_TRANSPORT.get(call.transport, OTHER), semconv.era_of(call), result_type)
        series = self._series.get(key)
        if series is None:
            series = self._series[key] = self.duration.labels(*key)
        series.observe(seconds)

    async def listen(self, req: Request, call: Call, call_next: Lister) -> AsyncGenerator[ListenItem, None]:
        stream = call_next(req, call)
        counted = False
        try:
            async for item in stream:
                if not counted:  # a refused filter raises before the first item: never an open stream
                    counted = True
                    self.listen_streams.inc()
                yield item
        finally:
            if counted:
                self.listen_streams.dec()
            await stream.aclose()

    def render(self) -> tuple[bytes, str]:
        """The Prometheus text exposition of the registry, and its content type."""
        return generate_latest(self.registry), CONTENT_TYPE_LATEST
