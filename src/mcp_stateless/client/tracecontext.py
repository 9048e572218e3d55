"""The caller's trace context in every request's ``_meta`` (``traceparent``, ``tracestate``, ``baggage``:
SEP-414, unprefixed), so that a trace started around a client call continues in the server.

opentelemetry-api is optional: looked for once, on the first request; without it (or with no span
current) nothing is added.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

_inject: Callable[[dict[str, Any]], None] | None = None
_current: Callable[[], Mapping[str, Any]] | None = None
_looked = False


def inject_trace_context(meta: dict[str, Any]) -> None:
    """Add the current trace context to `meta` (a request's ``_meta``), when there is one."""
    global _inject, _current, _looked
    if not _looked:
        _looked = True
        try:
            from opentelemetry import context, propagate
        except ImportError:
            _inject = None
        else:
            _inject, _current = propagate.inject, context.get_current
    # An empty context holds no span and no baggage: nothing any propagator could write (the common case
    # of a process that never starts a span, skipped at the cost of one context-variable read).
    if _inject is not None and _current is not None and _current():
        _inject(meta)
