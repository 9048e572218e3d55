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
import bisect
import time
from collections.abc import AsyncGenerator, Callable, Iterable, Mapping

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
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


_clock = time.perf_counter
_NAMED = frozenset({"tools/call", "prompts/get"})  # the methods whose target is a label (semconv.target_of)
_NO_TARGET = ("", "")
_TRANSPORT = semconv.NETWORK_TRANSPORT


class _Series:
    """One label set of the histogram: a count per bucket (not cumulative), the sum and the count."""

    __slots__ = ("buckets", "count", "sum")

    def __init__(self, n: int) -> None:
        self.buckets = [0] * n
        self.sum = 0.0
        self.count = 0


class PrometheusMetrics:
    """Middleware recording each request's duration and outcome (`App(request_middleware=[...])` or
    `app.add_request_middleware`). `known` says which tool and prompt names may be label values (others are
    ``_OTHER``); `registry` defaults to a registry of this object's own (`render()` writes it).

    perf: the event loop records into plain per-series counters (no lock, no prometheus_client call per
    request); the registry turns them into metric families when scraped. A scrape from another thread
    (the stdio side listener) may see a request's bucket before its count: the ``+Inf`` bucket is the
    count, so every exposition stays self-consistent."""

    def __init__(self, known: Known = semconv.everything_known, *, registry: CollectorRegistry | None = None,
                 tasks: TaskStats | None = None, legacy: LegacyCounters | None = None,
                 buckets: tuple[float, ...] = BUCKETS) -> None:
        self.known = known
        self.bounds = tuple(buckets)
        self.registry = registry if registry is not None else CollectorRegistry()
        self.series: dict[tuple[str, ...], _Series] = {}  # bounded: every label is (see semconv)
        self.in_flight: dict[str, int] = {}
        self.listen_streams = 0
        self._tasks = tasks
        self._legacy = legacy
        self.registry.register(_Collector(self))

    async def handle(self, req: Request, call: Call, call_next: Handler) -> Reply:
        method = req.method
        in_flight = self.in_flight
        in_flight[method] = in_flight.get(method, 0) + 1
        start = _clock()
        try:
            reply = await call_next(req, call)
        except asyncio.CancelledError:  # the client went away or cancelled
            self._record(req, call, CANCELLED, "error", _clock() - start)
            raise
        except BaseException:
            self._record(req, call, OTHER, "error", _clock() - start)
            raise
        finally:
            in_flight[method] -= 1
        error_type, result_type = semconv.outcome(reply)
        self._record(req, call, error_type, result_type, _clock() - start)
        return reply

    def _record(self, req: Request, call: Call, error_type: str, result_type: str, seconds: float) -> None:
        method = req.method
        tool, prompt = semconv.target_of(req, self.known) if method in _NAMED else _NO_TARGET
        # the era: only the 2025 branch hands requests over able to send server->client requests (`Call`)
        key = (method, tool, prompt, error_type, req.version, _TRANSPORT.get(call.transport, OTHER),
               "legacy" if call.can_send_request else "modern", result_type)
        series = self.series.get(key)
        if series is None:
            series = self.series[key] = _Series(len(self.bounds) + 1)
        series.buckets[bisect.bisect_left(self.bounds, seconds)] += 1
        series.sum += seconds
        series.count += 1

    async def listen(self, req: Request, call: Call, call_next: Lister) -> AsyncGenerator[ListenItem, None]:
        stream = call_next(req, call)
        counted = False
        try:
            async for item in stream:
                if not counted:  # a refused filter raises before the first item: never an open stream
                    counted = True
                    self.listen_streams += 1
                yield item
        finally:
            if counted:
                self.listen_streams -= 1
            await stream.aclose()

    def render(self) -> tuple[bytes, str]:
        """The Prometheus text exposition of the registry, and its content type."""
        return generate_latest(self.registry), CONTENT_TYPE_LATEST


class _Collector(Collector):
    def __init__(self, metrics: PrometheusMetrics) -> None:
        self.m = metrics

    def collect(self) -> Iterable[Metric]:
        m = self.m
        hist = HistogramMetricFamily("mcp_server_operation_duration_seconds", "MCP request duration as observed "
                                     "on the server, until the reply is ready", labels=LABELS, unit="seconds")
        for key, series in sorted(dict(m.series).items()):
            count = series.count
            cumulative, running = [], 0
            for bound, n in zip(m.bounds, list(series.buckets), strict=False):
                running += n
                cumulative.append((_le(bound), min(running, count)))
            cumulative.append(("+Inf", count))
            hist.add_metric(list(key), cumulative, series.sum)
        yield hist
        in_flight = GaugeMetricFamily("mcp_server_requests_in_flight", "Requests being answered now",
                                      labels=["mcp_method_name"])
        for method, n in sorted(dict(m.in_flight).items()):
            in_flight.add_metric([method], n)
        yield in_flight
        yield GaugeMetricFamily("mcp_server_listen_streams", "Open subscriptions/listen streams",
                                value=m.listen_streams)
        errors = CounterMetricFamily("mcp_state_store_errors", "State store operations that failed "
                                     "(the store was unreachable or refused)", labels=["engine"])
        for engine, n in sorted(dict(STATE_ERRORS).items()):
            errors.add_metric([engine], n)
        yield errors
        stats = m._tasks() if m._tasks is not None else None
        if stats is not None:
            running, transitions = stats
            yield GaugeMetricFamily("mcp_server_tasks_running", "Tasks this process is running now", value=running)
            fam = CounterMetricFamily("mcp_server_task_transitions", "Task status changes this process "
                                      "committed, by the status entered", labels=["status"])
            for entered, n in sorted(dict(transitions).items()):
                fam.add_metric([entered], n)
            yield fam
        counters = m._legacy() if m._legacy is not None else None
        if counters is not None:
            fam = CounterMetricFamily("mcp_legacy_exchanges", "2025-era HTTP exchanges answered, by kind and "
                                      "HTTP status", labels=["kind", "status"])
            for (kind, http_status), n in sorted(dict(counters).items()):
                fam.add_metric([kind, str(http_status)], n)
            yield fam


def _le(bound: float) -> str:
    return repr(float(bound))  # Prometheus' own spelling of a bound: 1.0, 0.01, 300.0
