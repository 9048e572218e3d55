"""The inbound side of one connection, sans-IO: one decoded message in, one decision out.

The MCP counterpart of h11's `Connection`: a transport (stdio of either era, `MemoryChannel`) decodes a
message and calls `Inbound.receive(message)`; what comes back says what to do, and the transport only does
the I/O (start a task, write a refusal, cancel a task). The rules live here once:

- **The request-id rule** (`jsonrpc.as_request_id`): a JSON-RPC id is a string or an integer, of any size.
  `true`/`false`, floats, null, arrays and objects are not ids. Python makes this easy to get wrong:
  `True == 1` and `1.0 == 1` hash alike, so `{1: task}.pop(True)` finds request `1`. Every lookup by an
  id that came off the wire goes through this function first.
- **One in-flight table** (`InflightTable`): the requests of this connection still running, keyed by
  id. A second request with an id already in flight is refused (JSON-RPC ids name one request at a
  time); `notifications/cancelled` names one entry (or nothing); an entry is forgotten only by the
  task that owns it, so a later request that reused a cancelled id is not dropped by the earlier one.
- **Era-aware classification**: a modern connection runs the envelope ladder (`protocol/envelope.py`),
  a 2025 one the legacy ladder (`protocol/legacy.py`); both give the same kinds of decisions below.

HTTP needs no table: there one exchange is one request, and a disconnect (modern) or the 2025 branch's
bus (`server/legacy/`) cancels; both go through `as_request_id` too.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from . import errors
from .envelope import MethodTable, Notification, Rejection, Request, classify
from .errors import McpError
from .jsonrpc import RequestId, as_request_id
from .legacy import LegacyNotification, LegacyRequest, LegacyResponse
from .legacy import classify as classify_legacy
from .versions import MODERN_VERSIONS

CANCELLED = "notifications/cancelled"

T = TypeVar("T")


class InflightTable(Generic[T]):
    """The requests of one connection that are still running, by id, each with what the transport keeps
    for it (`T`: a task, a task and its outbox...)."""

    __slots__ = ("_entries",)

    def __init__(self) -> None:
        self._entries: dict[RequestId, T] = {}

    def __contains__(self, request_id: object) -> bool:
        return as_request_id(request_id) is not None and request_id in self._entries

    def __len__(self) -> int:
        return len(self._entries)

    def __iter__(self) -> Iterator[T]:
        return iter(list(self._entries.values()))

    def start(self, request_id: RequestId, entry: T) -> None:
        """Record a request `Inbound.receive` accepted (its id is valid and not in flight)."""
        self._entries[request_id] = entry

    def get(self, request_id: Any) -> T | None:
        rid = as_request_id(request_id)
        return None if rid is None else self._entries.get(rid)

    def cancel(self, request_id: Any) -> T | None:
        """Remove and return the entry `notifications/cancelled` names; None when `request_id` is not an id
        or names nothing in flight (cancellations race with responses: that is not an error)."""
        rid = as_request_id(request_id)
        return None if rid is None else self._entries.pop(rid, None)

    def finish(self, request_id: RequestId, entry: T) -> bool:
        """Forget `request_id` if `entry` is still what it names (not a later request that reused the id
        after a cancellation); True when it was."""
        if self._entries.get(request_id) is entry:
            del self._entries[request_id]
            return True
        return False


@dataclass(slots=True, frozen=True)
class Cancel(Generic[T]):
    """`notifications/cancelled`: `entry` is what the table held for `request_id` (now removed), or None
    when it named nothing in flight (already answered, unknown, or not an id at all)."""

    request_id: RequestId | None
    entry: T | None


# What `receive` decides; the transport acts on each kind:
# - `Request` / `LegacyRequest`: start it (and `inflight.start` it);
# - `Rejection`: write `body()` when it has one (a refused notification has none);
# - `Cancel`: stop `entry` when there is one, write nothing for it;
# - `Notification` / `LegacyNotification`: any other notification (the era's own meaning);
# - `LegacyResponse`: a 2025 client's answer to a server->client request.
Decision = Request | LegacyRequest | Rejection | Cancel[T] | Notification | LegacyNotification | LegacyResponse


class Inbound(Generic[T]):
    """One connection's inbound rules. `era` is fixed for the connection (stdio picks it from the first
    message, `protocol/legacy.py: stdio_era`); `table`/`versions` are the endpoint's (modern only)."""

    __slots__ = ("inflight", "legacy", "table", "versions")

    def __init__(self, table: MethodTable | None = None, versions: tuple[str, ...] = MODERN_VERSIONS,
                 *, legacy: bool = False) -> None:
        if table is None and not legacy:
            raise ValueError("a modern connection needs the endpoint's method table")
        self.table = table
        self.versions = versions
        self.legacy = legacy
        self.inflight: InflightTable[T] = InflightTable()

    def receive(self, message: Any) -> Decision[T]:
        """Classify one decoded message (stdio and memory carry no HTTP headers)."""
        if self.legacy:
            legacy = classify_legacy(message)
            if isinstance(legacy, LegacyNotification):
                return self._cancel(legacy.params) if legacy.method == CANCELLED else legacy
            if isinstance(legacy, LegacyRequest):
                return self._fresh(legacy)
            return legacy
        assert self.table is not None
        decision = classify(message, None, self.table, self.versions)
        if isinstance(decision, Request):
            return self._fresh(decision)
        if isinstance(decision, Notification) and decision.method == CANCELLED:
            return self._cancel(decision.params)
        return decision

    def _fresh(self, req: Request | LegacyRequest) -> Request | LegacyRequest | Rejection:
        if req.id in self.inflight._entries:  # the id is valid: the ladder checked it
            return Rejection(400, req.id, McpError(
                errors.INVALID_REQUEST, f"request id {req.id!r} is already in flight"))
        return req

    def _cancel(self, params: dict[str, Any]) -> Cancel[T]:
        rid = as_request_id(params.get("requestId"))
        return Cancel(rid, self.inflight.cancel(rid))


__all__ = ["CANCELLED", "Cancel", "Decision", "Inbound", "InflightTable", "as_request_id"]
