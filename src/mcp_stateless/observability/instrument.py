"""`instrument(app)`: tracing and metrics added to an app as request middleware, bounded by its registrations."""

from __future__ import annotations

import importlib.util
from typing import TYPE_CHECKING, Any, Protocol

from ..protocol.endpoint import RequestMiddleware
from .semconv import Known, TargetKind

if TYPE_CHECKING:
    from .metrics import PrometheusMetrics


class Observed(Protocol):
    """What `instrument` needs of an app (`App` is one): its registrations (the bound on label values),
    its task runtime, and a place for request middleware. Structural, so the server layer may call
    `instrument` (its one HTTP assembly does) without this package importing it."""

    @property
    def catalog(self) -> Any: ...

    @property
    def tasks(self) -> Any: ...

    def add_request_middleware(self, middleware: RequestMiddleware) -> None: ...


def otel_installed() -> bool:
    """Is opentelemetry-api importable? (Checked without importing it.)"""
    try:
        return importlib.util.find_spec("opentelemetry.trace") is not None
    except ModuleNotFoundError:
        return False


def known_names(app: Observed) -> Known:
    """Tool and prompt names that may be label values: the ones `app` has registered right now."""
    catalog = app.catalog

    def known(kind: TargetKind, name: str) -> bool:
        return name in (catalog.tools if kind == "tool" else catalog.prompts)

    return known


def instrument(app: Observed, *, metrics: bool = False, tracing: bool | None = None,
               legacy_counters: Any = None) -> PrometheusMetrics | None:
    """Add `Tracing` (when `tracing`, or when None and opentelemetry-api is installed) and, when
    `metrics`, a `PrometheusMetrics` (returned, for `MetricsRoute`) to `app`. Tracing goes outermost, so
    a span covers the time the histogram measures. `legacy_counters`: the 2025 branch's
    ``LegacyServer.counters``, exported as ``mcp_legacy_exchanges_total``."""
    known = known_names(app)
    if tracing or (tracing is None and otel_installed()):
        from .tracing import Tracing

        app.add_request_middleware(Tracing(known))
    if not metrics:
        return None
    try:
        from .metrics import PrometheusMetrics
    except ImportError as e:
        raise RuntimeError(f"metrics need the 'metrics' extra (pip install 'mcp-stateless[metrics]'): {e}") from None

    def task_stats() -> tuple[int, Any] | None:
        runtime = app.tasks
        return None if runtime is None else (runtime.running, runtime.store.transitions)

    m = PrometheusMetrics(known, tasks=task_stats,
                          legacy=(lambda: legacy_counters) if legacy_counters is not None else None)
    app.add_request_middleware(m)
    return m
