"""The store interfaces for what must outlive one request, and the bundle one setting selects.

Every implementation (memory, SQLite, Redis) passes the same contract suite (tests/state/). Stores are
plain async objects: they never read the request, never cache across instances, and every mutation is
atomic at the store (compare-and-set on a version), so two instances never lose each other's updates.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

from ..protocol.errors import INTERNAL_ERROR, McpError
from ..server.events import ChangeEvent, EventBus, Subscription

if TYPE_CHECKING:  # the task store's interface lives with the Tasks extension (it imports this module)
    from ..tasks.store import TaskStore

# How long a record stays after it expired or ended, so that a late use gets "expired" / "ended" (an
# error the model can act on) rather than "unknown". After that it is physically removed.
DEFAULT_RETENTION_S = 3600.0


class StateUnavailable(McpError):
    """The state store cannot be reached: the request that needs it fails with -32603 and this message
    (never hangs: every backend has bounded timeouts). The next request tries again."""

    def __init__(self, where: str, reason: str) -> None:
        super().__init__(
            INTERNAL_ERROR,
            f"State store unavailable ({where}): {reason}. The request was not completed; retry shortly.",
            {"retryable": True},
        )


@dataclasses.dataclass(slots=True)
class HandleRecord:
    """What a store keeps behind one handle. `key` is a digest of the handle, never the handle itself."""

    key: str
    principal: str
    kind: str
    data: dict[str, Any]
    version: int
    created_at: float
    expires_at: float
    purge_at: float
    ended: bool = False


class HandleStore(Protocol):
    """Records behind application handles.

    `swap` is the one mutation: it succeeds only while the stored version equals `expected_version`
    and then stores version + 1, atomically (a Lua script, an UPDATE … WHERE version = ?, a dict under
    one event loop). `get` returns records whatever their expiry: expiry is policy, decided above.
    """

    async def create(self, record: HandleRecord) -> bool:
        """Insert; False (and no change) if the key exists."""
        ...

    async def get(self, key: str) -> HandleRecord | None: ...

    async def swap(
        self,
        key: str,
        expected_version: int,
        data: dict[str, Any],
        expires_at: float,
        purge_at: float,
        ended: bool,
    ) -> bool:
        """Replace data/expiry/ended and bump the version iff the version is still `expected_version`."""
        ...

    async def touch(self, key: str, expires_at: float, purge_at: float) -> None:
        """Extend a live, un-ended record's expiry (sliding TTL) without bumping its version; never
        shortens it."""
        ...

    async def delete(self, key: str) -> bool: ...

    async def purge(self, now: float) -> int:
        """Remove records whose `purge_at` has passed; returns how many (backends with native expiry
        may return 0)."""
        ...

    async def aclose(self) -> None: ...


class ClosableEventBus(EventBus, Protocol):
    """An `EventBus` that holds resources (a pub/sub connection, a poller)."""

    async def aclose(self) -> None: ...


class ReadySubscription(Subscription, Protocol):
    """A subscription that can say when it is live at the shared bus: events published after
    `ready()` returns reach it. `App.listen` awaits it before acknowledging."""

    async def ready(self) -> None: ...


class BusSubscription:
    """A shared bus's subscription: a local queue of events plus `ready()`, which waits until the bus
    itself is live (so nothing published after the listen acknowledgement is missed)."""

    __slots__ = ("_inner", "_ready")

    def __init__(self, ready: Callable[[], Awaitable[None]], inner: Subscription) -> None:
        self._ready = ready
        self._inner = inner

    async def ready(self) -> None:
        await self._ready()

    async def get(self, timeout: float | None) -> ChangeEvent | None:
        return await self._inner.get(timeout)

    def end(self) -> None:
        self._inner.end()

    def close(self) -> None:
        self._inner.close()




@dataclasses.dataclass(slots=True)
class StateBundle:
    """Everything shared that one `--state` URL selects.

    `shared`: the backend is reachable from other machines (Redis); `multiprocess`: several processes
    on one machine may share it (SQLite, Redis). `tasks` is filled by the Tasks extension: each
    backend's `open_bundle` sets it in one line.
    """

    url: str
    handles: HandleStore
    events: ClosableEventBus
    tasks: TaskStore | None = None
    shared: bool = False
    multiprocess: bool = False
    resources: tuple[Any, ...] = ()

    async def aclose(self) -> None:
        await self.events.aclose()
        await self.handles.aclose()
        closer = getattr(self.tasks, "aclose", None)
        if closer is not None:
            await closer()


def redact(url: str) -> str:
    """The URL without a password, for logs and error messages."""
    scheme, sep, rest = url.partition("://")
    if not sep or "@" not in rest.split("/", 1)[0]:
        return url
    cred, _, host = rest.partition("@")
    user = cred.split(":", 1)[0]
    return f"{scheme}://{user + ':***' if user else '***'}@{host}"
