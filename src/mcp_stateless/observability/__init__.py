"""Metrics and traces for an app, as middleware at the endpoint seam: every transport (HTTP, stdio, the
in-memory client) and both eras are observed the same way, and no handler knows.

- `PrometheusMetrics` (`metrics.py`, the ``metrics`` extra): the semconv request-duration histogram and
  the gauges and counters a dashboard needs; `MetricsRoute` serves them at ``GET /metrics``.
- `Tracing` (`tracing.py`, the ``otel`` extra): one SERVER span per request, parented on the trace
  context in ``params._meta``; `configure_from_env` sets up export from the ``OTEL_*`` variables.
- `instrument(app, …)` adds both with the app's registrations as the bound on label values.

Neither extra is imported unless asked for.
"""

import typing as _typing

from .instrument import Observed, instrument, known_names, otel_installed
from .route import MetricsRoute, metrics_endpoint
from .semconv import Known

if _typing.TYPE_CHECKING:
    from .metrics import PrometheusMetrics
    from .tracing import Tracing

__all__ = ["Known", "MetricsRoute", "Observed", "PrometheusMetrics", "Tracing", "instrument", "known_names",
           "metrics_endpoint", "otel_installed"]


def __getattr__(name: str) -> object:
    """The two extras' classes load on first use (their libraries are optional), then stay bound."""
    value: object
    if name == "PrometheusMetrics":
        from .metrics import PrometheusMetrics as value
    elif name == "Tracing":
        from .tracing import Tracing as value
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value
