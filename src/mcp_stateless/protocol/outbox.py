"""One request's outgoing messages waiting to be written: one bound and one drop policy for every transport.

A handler emits request-scoped messages (progress, log, and on the 2025 branch server->client requests)
through `Call.outbox.emit()`, which never blocks; the transport writes them when it can. `BoundedOutbox`
is what waits in between, with one policy, so a progress-heavy tool gets the same result on HTTP (SSE),
stdio of either era and the memory channel:

- **Progress is coalesced.** Once `COALESCE_AT` messages wait, a new `notifications/progress` replaces
  the latest progress still waiting (a request has one progress token, and only its latest value
  matters; the values on the wire still increase).
- **Other notifications are dropped beyond `MAX_PENDING`**, counted, and reported in one
  `notifications/message` warning when the writer catches up.
- **Messages with an id (server->client requests) are never dropped**: each one is awaited by its
  handler, so there are never more of them than handlers waiting. Responses never pass through here.

So at most `MAX_PENDING` notifications plus one warning wait per request, whatever the handler does.
A writer that keeps up (it runs between the handler's awaits) sees every message. The writer is woken
by `wake()` (set by the transport) and takes everything with `take()`.

`LineOutbox` is the form for transports that write whole messages as lines (stdio of both eras): it does
no I/O itself; it calls `write` for the waiting messages on the next turn of the event loop, so a burst
emitted without an await is bounded exactly as it is on HTTP.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

COALESCE_AT = 32
MAX_PENDING = 256
PROGRESS = "notifications/progress"


def dropped_notice(count: int) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": "notifications/message", "params": {
        "level": "warning", "logger": "mcp_stateless",
        "data": f"{count} log messages dropped: the client read slower than they were sent"}}


class BoundedOutbox:
    """Collects one request's messages under the module's policy. `enabled` False: emit drops everything
    (a client that takes no stream, or a request that already answered)."""

    __slots__ = ("dropped", "enabled", "pending", "progress_at", "wake")

    def __init__(self, enabled: bool = True, wake: Callable[[], None] | None = None) -> None:
        self.enabled = enabled
        self.pending: list[dict[str, Any]] = []
        self.progress_at = -1  # index in `pending` of the latest progress notification not yet written
        self.dropped = 0
        self.wake = wake

    def emit(self, message: dict[str, Any]) -> None:
        if not self.enabled:
            return
        pending = self.pending
        method = message.get("method")
        if method == PROGRESS:
            if self.progress_at >= 0 and len(pending) >= COALESCE_AT:
                pending[self.progress_at] = message
                return
            self.progress_at = len(pending)
        elif len(pending) >= MAX_PENDING and "id" not in message:
            self.dropped += 1
            return
        pending.append(message)
        if self.wake is not None:
            self.wake()

    def take(self) -> list[dict[str, Any]]:
        """Everything waiting, in order (plus the notice of dropped ones), and start afresh."""
        out = self.pending
        self.pending = []
        self.progress_at = -1
        if self.dropped:
            out.append(dropped_notice(self.dropped))
            self.dropped = 0
        return out


class LineOutbox(BoundedOutbox):
    """A `BoundedOutbox` that hands its messages to `write` one loop turn after the first of a burst;
    `live` False (cancelled, answered, or the output is gone) writes nothing more. `hold(outbox)` True
    means the output is full (a client that does not read): the messages keep waiting, under the policy,
    until the transport calls `flush()` again once it drains."""

    __slots__ = ("_scheduled", "hold", "live", "write")

    def __init__(self, write: Callable[[dict[str, Any]], None],
                 hold: Callable[[LineOutbox], bool] | None = None) -> None:
        super().__init__(True, self._schedule)
        self.write = write
        self.hold = hold
        self.live = True
        self._scheduled = False

    def _schedule(self) -> None:
        if not self._scheduled:
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self.flush)

    def flush(self, force: bool = False) -> None:
        """Write what waits now, unless the output is held (`force`: even then; the transport calls it
        so before the response, which goes after what its handler emitted)."""
        self._scheduled = False
        if not self.pending and not self.dropped:
            return
        if not force and self.hold is not None and self.hold(self):
            return
        messages = self.take()
        if self.live:
            for message in messages:
                self.write(message)

    def close(self) -> None:
        """Nothing more is written (what still waits is discarded)."""
        self.live = False
        self.enabled = False
        self.pending = []


__all__ = ["COALESCE_AT", "MAX_PENDING", "BoundedOutbox", "LineOutbox", "dropped_notice"]
