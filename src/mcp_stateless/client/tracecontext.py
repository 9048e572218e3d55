"""The caller's trace context in every request's ``_meta`` (``traceparent``, ``tracestate``, ``baggage``:
SEP-414, unprefixed), so that a trace started around a client call continues in the server.

opentelemetry-api is optional: looked for once, on the first request; without it (or with no span
current) nothing is added.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

_inject: Callable[[dict[str, Any]], None] | None = None
_looked = False


def inject_trace_context(meta: dict[str, Any]) -> None:
    """Add the current trace context to `meta` (a request's ``_meta``), when there is one."""
    global _inject, _looked
    if not _looked:
        _looked = True
        try:
            from opentelemetry import propagate
        except ImportError:
            _inject = None
        else:
            _inject = propagate.inject
    if _inject is not None:
        _inject(meta)
