"""The two primitives every state engine implements, and the bundle one setting selects.

A `RecordStore` keeps versioned records by (namespace, key): create, get, compare-and-swap on the
version, a time-to-live, delete, and a scan for records due by a time (task leases). A `Bus` carries
payloads to the readers of a named topic in every process (change events are one topic). Each engine
(memory, SQLite, Redis) implements both once, over one connection; handles, tasks and change events are
typed layers on top. Stores never read the request and never cache across instances, so two instances
never lose each other's updates.
"""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from ..protocol.errors import INTERNAL_ERROR, McpError

if TYPE_CHECKING:
    from .events import EventBus
    from .handles import HandleStore

# How long a record stays after it expired or ended, so that a late use gets "expired" / "ended" (an
# error the model can act on) rather than "unknown". After that it is physically removed.
DEFAULT_RETENTION_S = 3600.0

S = TypeVar("S")


# Failures seen by this process, by engine (the first word of `where`: "redis", "sqlite"), for the
# metrics exporter to read; a counter only grows, so a reader needs no lock.
STATE_ERRORS: collections.Counter[str] = collections.Counter()


class StateUnavailable(McpError):
    """The state store cannot be reached: the request that needs it fails with -32603 and this message
    (never hangs: every engine has bounded timeouts). The next request tries again."""

    def __init__(self, where: str, reason: str) -> None:
        super().__init__(
            INTERNAL_ERROR,
            f"State store unavailable ({where}): {reason}. The request was not completed; retry shortly.",
            {"retryable": True},
        )

    @classmethod
    def observed(cls, where: str, reason: str) -> StateUnavailable:
        """The error for a failure an engine has just seen, counted in `STATE_ERRORS` (by the first word of
        `where`) for the metrics exporter; building the error alone (a test, a message) counts nothing."""
        STATE_ERRORS[where.split(" ", 1)[0] or "state"] += 1
        return cls(where, reason)


@dataclasses.dataclass(frozen=True, slots=True)
class Versioned:
    """A stored record: its bytes and the version a `swap` must name to replace them."""

    data: bytes
    version: int


class RecordStore(Protocol):
    """Versioned records by (namespace, key).

    A record exists from `create` until it is deleted or its `expires_at` (seconds since the epoch;
    None: never) passes; an expired record reads as absent and may be created again. `due`, when set,
    is a time by which the record wants attention: `due_by` lists those whose time has come.
    """

    async def create(self, ns: str, key: str, data: bytes, *, expires_at: float | None = None,
                     due: float | None = None) -> bool:
        """Store version 1; False (and no change) if a live record has this key."""
        ...

    async def get(self, ns: str, key: str) -> Versioned | None: ...

    async def swap(self, ns: str, key: str, expected_version: int, data: bytes, *,
                   expires_at: float | None = None, due: float | None = None) -> bool:
        """Replace data, expiry and due time and bump the version, atomically, iff the live record's
        version is still `expected_version`."""
        ...

    async def delete(self, ns: str, key: str) -> bool: ...

    async def due_by(self, ns: str, before: float, limit: int = 100) -> list[str]:
        """Keys of live records in `ns` whose due time is before `before`, earliest first."""
        ...

    async def purge(self, now: float) -> int:
        """Physically remove records that expired before `now`; how many (engines with native expiry
        may return 0)."""
        ...

    async def aclose(self) -> None:
        """Release the engine's connection (the next use opens it again)."""
        ...


class TopicSubscription(Protocol):
    async def ready(self) -> None:
        """Return once payloads published from now on reach this subscription."""
        ...

    async def get(self, timeout: float | None) -> bytes | None:
        """Next payload, or None when `timeout` seconds pass without one."""
        ...

    def put(self, payload: bytes) -> None:
        """Deliver `payload` to this reader only (e.g. a shutdown marker)."""
        ...

    def close(self) -> None:
        """Stop receiving: nothing published afterwards reaches this subscription."""
        ...


class Bus(Protocol):
    """Payloads to the readers of a topic in every process that shares the engine (this one included).
    At most once: a reader that is not subscribed yet, or has fallen behind by more than its backlog,
    misses payloads."""

    async def publish(self, topic: str, payload: bytes) -> None: ...

    def subscribe(self, topic: str) -> TopicSubscription: ...

    async def aclose(self) -> None: ...


@dataclasses.dataclass(slots=True)
class StateBundle:
    """Everything shared that one `--state` URL selects: one record store and one bus over one
    connection, and the typed stores on top of them.

    `shared`: the engine is reachable from other machines (Redis); `multiprocess`: several processes
    on one machine may share it (SQLite, Redis). Layers above `state` (the Tasks extension) get their
    typed store with `typed_store(TaskStore)`: one instance per bundle, on the bundle's connection.
    """

    url: str
    records: RecordStore
    bus: Bus
    handles: HandleStore
    events: EventBus
    shared: bool = False
    multiprocess: bool = False
    _typed: dict[Callable[[RecordStore], Any], Any] = dataclasses.field(default_factory=dict, repr=False)

    def typed_store(self, factory: Callable[[RecordStore], S]) -> S:
        """The bundle's one `factory(self.records)` (e.g. `TaskStore`), made on first use."""
        store = self._typed.get(factory)
        if store is None:
            store = self._typed[factory] = factory(self.records)
        result: S = store
        return result

    async def aclose(self) -> None:
        """Stop the bus and release the connection every typed store of this bundle shares."""
        await self.bus.aclose()
        await self.records.aclose()


def redact(url: str) -> str:
    """The URL without a password, for logs and error messages."""
    scheme, sep, rest = url.partition("://")
    if not sep or "@" not in rest.split("/", 1)[0]:
        return url
    cred, _, host = rest.partition("@")
    user = cred.split(":", 1)[0]
    return f"{scheme}://{user + ':***' if user else '***'}@{host}"
