"""Upstream session notifications as `subscriptions/listen` events, on every bridge instance.

A 2025 upstream tells a session of changes outside any request: `notifications/{tools,prompts,resources}/
list_changed` and, for a URI the session subscribed to, `notifications/resources/updated` (on a stdio
upstream's stdout, on a Streamable HTTP session's GET stream). Every pooled session hands them to one
`Relay`, which publishes each as a `ChangeEvent` on the bridge's event bus (the `--state` bundle's, so a
listener on any instance hears a change any instance saw); the listen streams themselves are
server/listen.py's `Listeners`, over `UpstreamView`.

`Watch` keeps one upstream session per instance subscribed to the URIs its local listeners want
(refcounted: `resources/subscribe` for the first stream that wants a URI, `resources/unsubscribe` after
the last) and, on a Streamable HTTP upstream, its GET stream open while any listener is. When sessions
are per caller, `Watches` keeps one `Watch` per listening principal, on that principal's own session, and
the `Relay` publishes what such a session hears addressed to that principal (`ChangeEvent.audience`).
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
from ..protocol.endpoint import Call
from ..protocol.errors import McpError
from ..state.events import ChangeEvent, EventBus
from .pool import Lease

log = logging.getLogger("mcp_stateless.bridge")

_KINDS = {method: kind for kind, method in methods.LIST_CHANGED.items()}  # list_changed method -> kind
_UPDATED = "notifications/resources/updated"
DEFAULT_MAX_PENDING = 1024


def change_of(message: dict[str, Any], audience: str | None = None) -> ChangeEvent | None:
    """The change an upstream notification announces, or None for any other message; `audience` is the
    principal whose session heard it (None: a session every caller shares)."""
    method = message.get("method")
    if method == _UPDATED:
        params = message.get("params")
        uri = params.get("uri") if isinstance(params, dict) else None
        return ChangeEvent("resource_updated", uri, audience) if isinstance(uri, str) and uri else None
    kind = _KINDS.get(method) if isinstance(method, str) else None
    return ChangeEvent(kind, None, audience) if kind is not None else None  # type: ignore[arg-type]


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

    def notify(self, message: dict[str, Any], principal: str | None = None) -> None:
        """An upstream session's notification (called from its reader: never blocks). A session opened for
        one principal (`principal`) tells of that caller's view: only that caller's listeners hear it."""
        ev = change_of(message, principal)
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


class Watches:
    """One `Watch` per principal with open listen streams on this instance (`key` of a call: its principal
    when upstream sessions are per caller, else None for all). A per-caller upstream (an HTTP one that
    takes each caller's credentials) has no session every listener could share: one opened with P's
    credentials sees P's resources and must never carry another caller's subscriptions. So P's watch
    session is the pool's plain session of P, opened with P's credentials, held from P's first listen
    stream to P's last, then given back to the pool (which closes it once idle). At most `max_watches`
    principals have one at a time: each holds a pooled session for as long as it listens."""

    def __init__(self, open_watch: Callable[[Call], Watch], key: Callable[[Call], str | None],
                 max_watches: int) -> None:
        self.open_watch = open_watch
        self.key = key
        self.max_watches = max_watches
        self.watches: dict[str | None, Watch] = {}

    def live(self) -> int:
        """Watches with a stream or a session (one still settling its last stream's end counts)."""
        return sum(1 for w in self.watches.values() if not w.idle)

    @contextlib.asynccontextmanager
    async def hold(self, honoured: dict[str, Any], call: Call) -> AsyncIterator[None]:
        if not honoured:
            yield
            return
        key = self.key(call)
        # A watch whose streams all ended and whose session went back is forgotten (kept until it is
        # settled: a new one on the same session must not race its unsubscribes).
        for k in [k for k, w in self.watches.items() if w.idle and k != key]:
            del self.watches[k]
        watch = self.watches.get(key)
        if watch is None:
            if self.live() >= self.max_watches:
                raise McpError(errors.INTERNAL_ERROR,
                               f"this bridge instance already holds upstream watch sessions for "
                               f"{self.max_watches} callers' listen streams (--upstream-watches): each caller's "
                               "events come from a session opened with its own credentials; try again later",
                               {"limit": self.max_watches})
            watch = self.watches[key] = self.open_watch(call)
        async with watch.hold(honoured):
            yield

    async def aclose(self) -> None:
        watches, self.watches = list(self.watches.values()), {}
        for watch in watches:
            await watch.aclose()


class Watch:
    """The upstream session that hears changes for this instance's listeners (of one principal, when
    sessions are per caller): the pool's plain session (no asking capabilities: the one plain calls use
    too, so on a stdio upstream a tool that starts updates in its process starts them where the
    subscriptions are), held while any listen stream is open so the pool neither expires nor evicts it."""

    def __init__(self, acquire: Callable[[], Awaitable[Lease]], release: Callable[[Lease], Awaitable[None]],
                 timeout: float = 10.0) -> None:
        self._acquire = acquire
        self._release = release
        self.timeout = timeout
        self.lease: Lease | None = None
        self.streams = 0
        self.holders = 0  # streams in `hold`, counted before they wait for the lock
        self.refs: collections.Counter[str] = collections.Counter()
        self.subscribed: set[str] = set()  # what the upstream session is subscribed to
        self._lock = asyncio.Lock()
        self._settling: set[asyncio.Task[None]] = set()

    @property
    def idle(self) -> bool:
        """No stream, no session, nothing left to settle: the watch may be forgotten."""
        return self.holders <= 0 and self.lease is None and not self._settling and not self._lock.locked()

    @contextlib.asynccontextmanager
    async def hold(self, honoured: dict[str, Any]) -> AsyncIterator[None]:
        """Held by one listen stream from before its acknowledgement to its end."""
        if not honoured:
            yield
            return
        uris: list[str] = list(honoured.get("resourceSubscriptions", ()))
        self.holders += 1  # at once, before any wait: `idle` must not let it be forgotten meanwhile
        try:
            await self._add(uris)
        except BaseException:
            self.holders -= 1
            raise
        try:
            yield
        finally:
            self.holders -= 1
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
