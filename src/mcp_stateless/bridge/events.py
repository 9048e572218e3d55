"""Upstream session notifications as `subscriptions/listen` events, on every bridge instance.

A 2025 upstream tells a session of changes outside any request: `notifications/{tools,prompts,resources}/
list_changed` and, for a URI the session subscribed to, `notifications/resources/updated` (on a stdio
upstream's stdout, on a Streamable HTTP session's GET stream). Every pooled session hands them to one
`Relay`, which publishes each as a `ChangeEvent` on the bridge's event bus (the `--state` bundle's, so a
listener on any instance hears a change any instance saw); the listen streams themselves are
server/listen.py's `Listeners`, over `UpstreamView`.

`Watch` keeps one upstream session per instance subscribed to the URIs its local listeners want
(refcounted: `resources/subscribe` for the first stream that wants a URI, `resources/unsubscribe` after
the last) and, on a Streamable HTTP upstream, its GET stream open while any listener is.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from ..client.errors import ChannelError, ClientError
from ..protocol import errors, methods
from ..protocol.errors import McpError
from ..state.events import ChangeEvent, EventBus
from .pool import Lease

log = logging.getLogger("mcp_stateless.bridge")

_KINDS = {method: kind for kind, method in methods.LIST_CHANGED.items()}  # list_changed method -> kind
_UPDATED = "notifications/resources/updated"
DEFAULT_MAX_PENDING = 1024


def change_of(message: dict[str, Any]) -> ChangeEvent | None:
    """The change an upstream notification announces, or None for any other message."""
    method = message.get("method")
    if method == _UPDATED:
        params = message.get("params")
        uri = params.get("uri") if isinstance(params, dict) else None
        return ChangeEvent("resource_updated", uri) if isinstance(uri, str) and uri else None
    kind = _KINDS.get(method) if isinstance(method, str) else None
    return ChangeEvent(kind) if kind is not None else None  # type: ignore[arg-type]


class Relay:
    """Publishes upstream changes, coalesced: an event equal to one still waiting to be published is
    dropped (the waiting one is published after it arrived, so nobody misses the change), and at most
    `max_pending` distinct events wait, so a flood of notifications costs bounded memory."""

    def __init__(self, events: EventBus, max_pending: int = DEFAULT_MAX_PENDING) -> None:
        self.events = events
        self.max_pending = max_pending
        self.coalesced = 0
        self.dropped = 0
        self._waiting: dict[ChangeEvent, None] = {}  # insertion-ordered set
        self._wake: asyncio.Event | None = None
        self._worker: asyncio.Task[None] | None = None

    def notify(self, message: dict[str, Any]) -> None:
        """An upstream session's notification (called from its reader: never blocks)."""
        ev = change_of(message)
        if ev is None:
            return
        if ev in self._waiting:
            self.coalesced += 1
            return
        if len(self._waiting) >= self.max_pending:
            self.dropped += 1
            if self.dropped == 1:
                log.warning("more than %d upstream changes wait to be published: dropping", self.max_pending)
            return
        self._waiting[ev] = None
        if self._worker is None or self._worker.done():
            self._wake = asyncio.Event()
            self._worker = asyncio.get_running_loop().create_task(self._publish())
        assert self._wake is not None
        self._wake.set()

    async def _publish(self) -> None:
        assert self._wake is not None
        while True:
            await self._wake.wait()
            self._wake.clear()
            while self._waiting:
                ev = next(iter(self._waiting))
                del self._waiting[ev]  # before publishing: an equal change arriving meanwhile is published again
                try:
                    await self.events.publish(ev)
                except Exception as e:  # the bus is down: this change is lost, later ones are tried
                    log.warning("could not publish an upstream change (%s): %s", ev.kind, e)

    async def aclose(self) -> None:
        if self._worker is not None:
            self._worker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._worker
            self._worker = None


class UpstreamView:
    """What listen streams honour, from the upstream's declared capabilities (`capabilities()` returns
    the `initialize` result's): a list flag only for a kind whose `listChanged` it declares, resource
    subscriptions only when it declares `resources.subscribe`."""

    def __init__(self, capabilities: Callable[[], dict[str, Any]]) -> None:
        self._capabilities = capabilities

    def _flag(self, name: str, flag: str) -> bool:
        cap = self._capabilities().get(name)
        return isinstance(cap, dict) and cap.get(flag) is True

    @property
    def declares_tools(self) -> bool:
        return self._flag("tools", "listChanged")

    @property
    def declares_prompts(self) -> bool:
        return self._flag("prompts", "listChanged")

    @property
    def declares_resources(self) -> bool:
        return self._flag("resources", "listChanged")

    @property
    def declares_subscriptions(self) -> bool:
        return self._flag("resources", "subscribe")

    def resource_scopes(self, uri: str) -> frozenset[str]:
        return frozenset()  # an upstream publishes no per-resource scopes


class Watch:
    """The upstream session that hears changes for this instance's listeners: the pool's shared session
    (no asking capabilities, no principal: the one plain calls use too, so on a stdio upstream a tool
    that starts updates in its process starts them where the subscriptions are), held while any listen
    stream is open so the pool neither expires nor evicts it."""

    def __init__(self, acquire: Callable[[], Awaitable[Lease]], release: Callable[[Lease], Awaitable[None]],
                 timeout: float = 10.0) -> None:
        self._acquire = acquire
        self._release = release
        self.timeout = timeout
        self.lease: Lease | None = None
        self.streams = 0
        self.refs: collections.Counter[str] = collections.Counter()
        self.subscribed: set[str] = set()  # what the upstream session is subscribed to
        self._lock = asyncio.Lock()
        self._settling: set[asyncio.Task[None]] = set()

    @contextlib.asynccontextmanager
    async def hold(self, honoured: dict[str, Any]) -> AsyncIterator[None]:
        """Held by one listen stream from before its acknowledgement to its end."""
        if not honoured:
            yield
            return
        uris: list[str] = list(honoured.get("resourceSubscriptions", ()))
        await self._add(uris)
        try:
            yield
        finally:
            self.streams -= 1
            self.refs.subtract(uris)
            # Unsubscribing upstream must not hold up the stream's end (nor run inside its cancellation).
            task = asyncio.get_running_loop().create_task(self._settle())
            self._settling.add(task)
            task.add_done_callback(self._settling.discard)

    async def _add(self, uris: list[str]) -> None:
        async with self._lock:
            self.streams += 1
            self.refs.update(uris)
            try:
                if self.lease is None:
                    self.lease = await self._acquire()
                    await self.lease.session.open_stream()
                for uri in uris:
                    if uri not in self.subscribed:
                        await self._request("resources/subscribe", uri)
                        self.subscribed.add(uri)
            except BaseException:
                self.streams -= 1
                self.refs.subtract(uris)
                await self._settle_locked()
                raise

    async def _request(self, method: str, uri: str) -> None:
        assert self.lease is not None
        try:
            await self.lease.session.request(method, {"uri": uri}, timeout=self.timeout)
        except McpError:
            raise
        except (ClientError, ChannelError, OSError, TimeoutError) as e:
            self.lease.broken = True
            raise McpError(errors.INTERNAL_ERROR, f"the upstream server failed {method}: {e}") from None

    async def _settle(self) -> None:
        async with self._lock:
            await self._settle_locked()

    async def _settle_locked(self) -> None:
        """Unsubscribe what no stream wants any more; let the session go when no stream is open."""
        if self.lease is None:  # closed meanwhile (or never opened): nothing upstream to undo
            self.subscribed.clear()
            return
        for uri in [u for u in self.subscribed if self.refs[u] <= 0]:
            self.subscribed.discard(uri)
            try:
                await self._request("resources/unsubscribe", uri)
            except McpError as e:
                log.info("resources/unsubscribe %s upstream: %s", uri, e.message)
        self.refs = +self.refs  # forget the zero counts
        if self.streams <= 0 and self.lease is not None:
            lease, self.lease = self.lease, None
            self.subscribed.clear()
            await self._release(lease)

    async def aclose(self) -> None:
        for task in list(self._settling):
            task.cancel()
        if self._settling:
            await asyncio.gather(*self._settling, return_exceptions=True)
        self.subscribed.clear()
        if self.lease is not None:
            lease, self.lease = self.lease, None
            await self._release(lease)
