"""`LegacyServer`: the 2025-era half of a dual-era endpoint (the `LegacyEndpoint` seam).

It answers `initialize` (negotiating 2025-11-25 down to 2025-03-26), `ping`, `logging/setLevel`,
`resources/subscribe`/`unsubscribe`, the app's own methods through `bridge`, clients' responses to
server->client requests, the standalone GET stream (list changes and subscribed resource updates, from
the state bus, so a change made on any instance arrives) and DELETE; the 2024-11-05 HTTP+SSE transport
through `sse.SseChannels`. Nothing here is kept per process: any instance sharing the key ring and the
state store serves any session.
"""

from __future__ import annotations

import asyncio
import collections
import logging
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

from ...protocol import errors, methods
from ...protocol.encoding import decode_exact, encode_record
from ...protocol.endpoint import (
    KEEPALIVE,
    LegacyAnswer,
    LegacyCounters,
    LegacyItem,
    Outbox,
    Reply,
    SseEvent,
    StdioSession,
)
from ...protocol.envelope import LOG_LEVEL_RANK, LOG_LEVELS, Rejection
from ...protocol.errors import InsufficientScope, McpError, error_response
from ...protocol.jsonrpc import as_request_id
from ...protocol.legacy import (
    SERVED_VERSIONS,
    SESSION_HEADER,
    VERSION_HEADER,
    LegacyNotification,
    LegacyRequest,
    LegacyResponse,
    classify,
    negotiate,
    session_not_found,
    session_required,
)
from ...protocol.mrtr import MRTR_METHODS
from ...protocol.principal import ANONYMOUS, Principal
from ...state import StateBundle
from ...state.events import ChangeEvent
from ..context import Context
from . import bridge
from .changelog import GET_STREAM, ChangeLog, LoggedEvents
from .outbox import PendingMessages
from .peer import Peer
from .sessions import Session, SessionGone, Sessions, SessionState
from .sse import SseChannels
from .streams import StreamLog, parse_event_id

if TYPE_CHECKING:
    from ..app import App

log_ = logging.getLogger("mcp_stateless.legacy")
RETRY_MS = 1000  # how long a client waits before reconnecting a dropped stream (SSE `retry`)

_LIST_CHANGED = methods.LIST_CHANGED  # change kind -> its notification (protocol/methods.py)
MAX_SESSION_ID = 4096  # characters
CANCEL_TOPIC = "legacy-cancel"  # `notifications/cancelled` of any instance, read by the one running the call


class LegacyServer:
    """Serves 2025-era clients from `app`'s handlers. `session_ttl_s`: how long a session id stays
    valid; `request_timeout_s`: how long a call waits for a client's answer to a server->client request;
    `stream_ttl_s`: how long a call's stream, or an event of the GET streams, can be resumed
    (`Last-Event-ID`) after it was sent; `get_log_max`: how many GET-stream events are kept at most;
    `heartbeat_s`: how often a running call says it is alive (a call silent for 5 beats is taken for
    dead, its instance gone: a client resuming its stream gets an error response instead of waiting);
    `json_within_s`: a call that finishes this quickly without sending anything is answered as JSON;
    `max_inflight_per_session` / `max_inflight_per_principal`: calls (tools/call, prompts/get, ...) one
    session / one principal may have running on this instance at once - a 2025 call runs to its end after
    its client left (a disconnect is not a cancel), so without a bound one client could start thousands
    and hold the tool threads; beyond it a call is refused with HTTP 429 (-32600, `Retry-After`). Anonymous
    callers share one principal; keep the principal bound below the tool threads (64 under `serve`) so
    one principal never holds them all; `max_stream_bytes`: what a 2024-11-05 HTTP+SSE stream may have
    waiting for a client that does not read it before it is closed; `max_sessions_per_principal`: open
    sessions one authenticated principal may hold (None: unbounded; anonymous callers are not counted,
    as they share one principal), beyond which `initialize` is refused with HTTP 429 (-32600)."""

    def __init__(self, app: App, *, session_ttl_s: float = 24 * 3600.0, request_timeout_s: float = 300.0,
                 keepalive_s: float | None = None, versions: tuple[str, ...] = SERVED_VERSIONS,
                 stream_ttl_s: float = 600.0, get_log_max: int = 10_000, heartbeat_s: float = 2.0,
                 json_within_s: float = 0.25, max_inflight_per_session: int = 16,
                 max_inflight_per_principal: int = 32, max_stream_bytes: int = 16 * 1024 * 1024,
                 max_sessions_per_principal: int | None = 1000) -> None:
        self.max_sessions_per_principal = max_sessions_per_principal
        self.max_stream_bytes = max_stream_bytes
        self.max_inflight_per_session = max_inflight_per_session
        self.max_inflight_per_principal = max_inflight_per_principal
        # calls running on this instance, by session key and by principal id (entries at zero are removed)
        self._inflight_session: collections.Counter[str] = collections.Counter()
        self._inflight_principal: collections.Counter[str] = collections.Counter()
        self.stream_ttl_s = stream_ttl_s
        self.heartbeat_s = heartbeat_s
        self.json_within_s = json_within_s
        self.get_log_max = get_log_max
        self.app = app
        self.session_ttl_s = session_ttl_s
        self.request_timeout_s = request_timeout_s
        self.keepalive_s = keepalive_s
        self.versions = versions
        self._own_state: StateBundle | None = None
        self._running: set[asyncio.Future[None]] = set()
        # Exchanges by (kind, HTTP status): this era's own counters, for the metrics exporter to read.
        self.counters: collections.Counter[tuple[str, int]] = collections.Counter()
        self._calls: dict[tuple[str, Any], asyncio.Future[Any]] = {}  # this instance's streamed calls
        self._cancel_reader: asyncio.Future[None] | None = None
        # Every change event published through this app, on this instance, is logged once for the GET
        # streams of every instance (publishers log; readers only read).
        app.tap_events("legacy-get-log", lambda bus: LoggedEvents(bus, lambda: self.change_log))

    # ------------------------------------------------------------------ shared parts, read per use
    def _state(self) -> StateBundle:
        """The app's state (shared by instances), or this process's memory when it has none."""
        if self.app.state is not None:
            return self.app.state
        if self._own_state is None:
            from ...state.memory import open_bundle

            self._own_state = open_bundle()
        return self._own_state

    @property
    def sessions(self) -> Sessions:
        return Sessions(self.app.ensure_key_ring(), self._state().records, self.session_ttl_s)

    @property
    def streams(self) -> StreamLog:
        keepalive = self.keepalive_s if self.keepalive_s is not None else self.app.listen_keepalive_s
        return StreamLog(self._state().records, self._state().bus, self.stream_ttl_s, keepalive, self.heartbeat_s)

    @property
    def change_log(self) -> ChangeLog:
        return ChangeLog(self._state().records, self.stream_ttl_s, self.get_log_max)

    @property
    def peer(self) -> Peer:
        return Peer(self._state().records, self._state().bus, self.request_timeout_s)

    # ------------------------------------------------------------------ the seam
    async def exchange(self, http_method: str, message: Any, headers: Mapping[str, str],
                       principal: Principal, can_sse: bool, outbox: Outbox | None = None) -> LegacyAnswer:
        """`outbox`: where a request's messages go when the transport has a channel of its own (the
        2024-11-05 SSE stream); None answers on the POST itself."""
        try:
            answer = await self._exchange(http_method, message, headers, principal, can_sse, outbox)
        except SessionGone as e:  # ended (DELETE) while this exchange was being served
            answer = LegacyAnswer(404, error_response(None, e))
        except McpError as e:  # e.g. the state store is unreachable
            answer = LegacyAnswer(500 if e.code == errors.INTERNAL_ERROR else 400, error_response(None, e))
        kind = _kind(http_method, message)
        self.counters[(kind, answer.status)] += 1
        if log_.isEnabledFor(logging.DEBUG):
            log_.debug("legacy %s -> %d", kind, answer.status, extra={"era": "legacy", "legacy_kind": kind})
        return answer

    async def _exchange(self, http_method: str, message: Any, headers: Mapping[str, str],
                        principal: Principal, can_sse: bool, outbox: Outbox | None = None) -> LegacyAnswer:
        decision = None
        if http_method == "POST":
            decision = classify(message)
            if isinstance(decision, Rejection):
                return _rejected(decision)
            if isinstance(decision, LegacyRequest) and decision.method == "initialize":
                return await self._initialize(decision, principal)
        rid = decision.id if isinstance(decision, LegacyRequest) else None
        sid = headers.get(SESSION_HEADER)
        if sid is None:
            return _rejected(session_required(rid))
        sessions = self.sessions
        session = sessions.open(sid.strip(), principal.id)
        if session is None:
            return _rejected(session_not_found(rid))
        state = await sessions.state(session)
        if state is None:  # deleted, or its record lost: either way it cannot come back
            return _rejected(session_not_found(rid, "Session not found: it was terminated"))
        hv = headers.get(VERSION_HEADER)
        if hv is not None and hv.strip() != session.version:
            return _rejected(Rejection(400, rid, McpError(
                errors.INVALID_REQUEST,
                f"Bad Request: MCP-Protocol-Version {hv.strip()!r} is not this session's {session.version!r}")))
        if http_method == "GET":
            if not can_sse:
                return _rejected(Rejection(406, None, McpError(
                    errors.INVALID_REQUEST, "Not Acceptable: the GET stream needs Accept: text/event-stream")))
            last = headers.get("last-event-id")
            if last is not None:
                return await self._resume(session, last)
            return LegacyAnswer(200, stream=self.events(session))
        if http_method == "DELETE":
            await self.end_session(session)
            return LegacyAnswer(200)
        if isinstance(decision, LegacyNotification):
            if decision.method == "notifications/cancelled":
                await self._cancel(session, decision.params.get("requestId"))
            return LegacyAnswer(202)
        if isinstance(decision, LegacyResponse):
            if await self.peer.answer(session, decision):
                return LegacyAnswer(202)
            return _rejected(Rejection(400, None, McpError(
                errors.INVALID_REQUEST, f"no request with id {decision.id!r} is waiting for a response")))
        assert isinstance(decision, LegacyRequest)
        return await self._request(decision, session, state, principal, headers, can_sse, outbox)

    # ------------------------------------------------------------------ lifecycle
    async def _initialize(self, req: LegacyRequest, principal: Principal) -> LegacyAnswer:
        answer, session = self.initialize(req, principal)
        refused = None if session is None else await self.start_session(session)
        if refused is not None:
            return LegacyAnswer(429, error_response(req.id, refused), headers=(("Retry-After", "60"),))
        return answer

    def _bounds_sessions(self, session: Session) -> bool:
        # Anonymous callers share one principal: bounding it would bound every anonymous client together.
        return self.max_sessions_per_principal is not None and session.principal != ANONYMOUS.id

    async def start_session(self, session: Session) -> McpError | None:
        """Make the record of a session just issued; or why not (its principal has too many open)."""
        limit = self.max_sessions_per_principal
        if limit is not None and self._bounds_sessions(session) and not await self.sessions.admit(session, limit):
            return McpError(errors.INVALID_REQUEST, f"Too many sessions: this principal has {limit} open; end one "
                            "(DELETE) or wait for one to expire", {"limit": limit, "scope": "sessions"})
        await self.sessions.create(session)
        return None

    async def end_session(self, session: Session) -> None:
        await self.sessions.end(session)
        if self._bounds_sessions(session):
            await self.sessions.forget(session)

    def initialize(self, req: LegacyRequest, principal: Principal,
                   versions: tuple[str, ...] | None = None) -> tuple[LegacyAnswer, Session | None]:
        """The answer to `initialize`, and the session it opened (None when refused); the caller makes the
        session's record (`sessions.create`) before the client may use it. `versions`: what this
        transport may negotiate (default: the server's)."""
        params = req.params
        requested = params.get("protocolVersion")
        caps = params.get("capabilities", {})
        info = params.get("clientInfo")
        if not isinstance(requested, str):
            return _error(req, errors.invalid_params("initialize needs params.protocolVersion (a string)")), None
        if not isinstance(caps, dict):
            return _error(req, errors.invalid_params("params.capabilities must be an object")), None
        if info is not None and not isinstance(info, dict):
            return _error(req, errors.invalid_params("params.clientInfo must be an object")), None
        version = negotiate(requested, self.versions if versions is None else versions)
        sid, session = self.sessions.issue(principal.id, version, caps, info)
        if len(sid) > MAX_SESSION_ID:  # the id travels on every request: keep headers within proxies' limits
            why = f"the declared capabilities are too large for a session id ({len(sid)} > {MAX_SESSION_ID})"
            return _error(req, errors.invalid_params(why)), None
        app = self.app
        result: dict[str, Any] = {
            "protocolVersion": version,
            "capabilities": legacy_capabilities(app.capabilities()),
            "serverInfo": dict(app.server_info),
        }
        if app.instructions:
            result["instructions"] = app.instructions
        answer = LegacyAnswer(200, {"jsonrpc": "2.0", "id": req.id, "result": result},
                              headers=((SESSION_HEADER, sid),))
        return answer, session

    # ------------------------------------------------------------------ requests
    async def _request(self, req: LegacyRequest, session: Session, state: SessionState, principal: Principal,
                       headers: Mapping[str, str] | None, can_sse: bool, outbox: Outbox | None = None) -> LegacyAnswer:
        """One request of a live session. `outbox`: where its notifications and server->client requests go
        when the transport has a channel of its own (stdio); on HTTP, the call's SSE stream."""
        method = req.method
        if method == "ping":
            return _ok(req, {})
        if method == "logging/setLevel":
            level = req.params.get("level")
            if level not in LOG_LEVEL_RANK:
                return _error(req, errors.invalid_params(f"level must be one of {', '.join(LOG_LEVELS)}"))
            try:
                await self.sessions.update(session, lambda s: setattr(s, "log_level", level))
            except SessionGone as e:
                return _rejected(Rejection(404, req.id, e))
            return _ok(req, {})
        if method in ("resources/subscribe", "resources/unsubscribe"):
            uri = req.params.get("uri")
            if not isinstance(uri, str):
                return _error(req, errors.invalid_params(f"{method} needs params.uri"))
            if len(uri) > MAX_URI:  # before any lookup: every update rewrites the session's record
                return _error(req, errors.invalid_params(f"params.uri is longer than {MAX_URI} characters"))
            found = self.app.catalog.find_resource(uri) if method == "resources/subscribe" else None
            if found is not None and found[0].scopes and not found[0].scopes <= principal.scopes:
                # the session's update notifications would time the changes of a resource it may not read
                return _answer(Reply.error(req.id, InsufficientScope(f"resource {uri}", found[0].scopes)))
            change = _subscribe(uri) if method == "resources/subscribe" else _unsubscribe(uri)
            try:
                await self.sessions.update(session, change)
            except SessionGone as e:
                return _rejected(Rejection(404, req.id, e))
            except McpError as e:
                return _error(req, e)
            return _ok(req, {})
        if method not in bridge.BRIDGED_METHODS or method not in self.app.table.methods:
            return _error(req, errors.method_not_found(method))
        refused = self._admit(session)
        if refused is not None:
            return LegacyAnswer(429, error_response(req.id, McpError(errors.INVALID_REQUEST, refused[0], refused[1])),
                                headers=(("Retry-After", "1"),))
        released = False

        def release(_: object = None) -> None:
            nonlocal released
            if not released:
                released = True
                self._release(session)

        peer = self.peer
        if outbox is None and can_sse and method in MRTR_METHODS:
            # A call that may notify or ask the client answers on its own SSE stream. It may outlive this
            # exchange (it runs on after the client left), so its place is freed when its task ends.
            def start(outbox: _StreamOutbox) -> Awaitable[Reply]:
                return bridge.run(self.app, peer, session, state, req, principal, outbox, headers)

            try:
                answer = await self._call(start, session, req.id, release)
            except BaseException:  # e.g. the store failed before the call could start
                release()
                raise
            if answer.stream is None:
                release()  # answered as JSON: done (the task's own callback then finds it released)
            return answer
        try:
            return _answer(await bridge.run(self.app, peer, session, state, req, principal, outbox, headers))
        finally:
            release()

    def _admit(self, session: Session) -> tuple[str, dict[str, Any]] | None:
        """Take a place for one more call of `session` on this instance; or why not (message, data)."""
        if self._inflight_session[session.key] >= self.max_inflight_per_session:
            limit = self.max_inflight_per_session
            return (f"Too many requests: this session has {limit} calls running already; retry when one ends",
                    {"limit": limit, "scope": "session"})
        if self._inflight_principal[session.principal] >= self.max_inflight_per_principal:
            limit = self.max_inflight_per_principal
            return (f"Too many requests: {limit} calls of this principal are running already; retry when one ends",
                    {"limit": limit, "scope": "principal"})
        self._inflight_session[session.key] += 1
        self._inflight_principal[session.principal] += 1
        return None

    def _release(self, session: Session) -> None:
        for counter, key in ((self._inflight_session, session.key), (self._inflight_principal, session.principal)):
            counter[key] -= 1
            if counter[key] <= 0:
                del counter[key]

    async def _call(self, start: Callable[[_StreamOutbox], Awaitable[Reply]],
                    session: Session, request_id: Any, ended: Callable[[object], None]) -> LegacyAnswer:
        """Run a call that may notify or ask its client. One that finishes within `json_within_s` without
        sending anything is answered as plain JSON (nothing logged: most calls cost no store write); any
        other answers on a resumable SSE stream, logged from its first message on."""
        outbox = _StreamOutbox()
        await self._watch_cancellations()
        task = asyncio.ensure_future(start(outbox))
        task.add_done_callback(lambda _t: outbox.wake())
        task.add_done_callback(ended)  # the call's place is free once it ends, however it ends
        key = (session.key, request_id)
        self._calls[key] = task  # cancelling the handler ends the stream without a response
        task.add_done_callback(lambda t: self._calls.pop(key, None) if self._calls.get(key) is t else None)
        if not outbox.busy() and not task.done():
            await outbox.wait(self.json_within_s)
        if task.done() and not task.cancelled() and not outbox.busy():
            return _answer(task.result())
        streams = self.streams
        stream = await streams.open(session, request_id)
        producer = asyncio.ensure_future(_produce(task, outbox, streams, stream))
        self._running.add(producer)  # keep a reference until it is done
        producer.add_done_callback(self._running.discard)
        return LegacyAnswer(200, stream=self._live(streams, stream, outbox.closed))

    # ------------------------------------------------------------------ cancellation, on any instance
    async def _cancel(self, session: Session, request_id: Any) -> None:
        """`notifications/cancelled` may reach any instance: it is published to all of them."""
        rid = as_request_id(request_id)  # the one id rule: `true` or 1.0 cancel nothing
        if rid is None:
            return
        await self._state().bus.publish(CANCEL_TOPIC, encode_record([session.key, rid]))

    async def _watch_cancellations(self) -> None:
        """Start (once per process) the reader that cancels this instance's calls named on the bus."""
        if self._cancel_reader is not None and not self._cancel_reader.done():
            return
        sub = self._state().bus.subscribe(CANCEL_TOPIC)
        await sub.ready()

        async def read() -> None:
            try:
                while True:
                    payload = await sub.get(None)
                    if payload is None:
                        continue
                    try:
                        key, rid = decode_exact(payload)  # a 2**64 id stays exact
                    except (TypeError, ValueError):
                        continue
                    call = self._calls.pop((key, rid), None)
                    if call is not None:
                        call.cancel()  # the call stops; nothing more is sent for it
            finally:
                sub.close()

        self._cancel_reader = asyncio.ensure_future(read())

    async def _live(self, streams: StreamLog, stream: str, closed: asyncio.Event) -> AsyncGenerator[LegacyItem, None]:
        """The call's stream as it is logged, until its response or until the handler closes it
        (`close_stream`): the client then resumes with `Last-Event-ID`."""
        replay = streams.replay(stream, 0)
        try:
            await anext(replay)  # subscribed
            yield SseEvent(None, id=f"{stream}:0", retry=RETRY_MS)  # priming: resumable from here on
            closing = asyncio.ensure_future(closed.wait())
            try:
                while True:
                    step = asyncio.ensure_future(anext(replay))
                    await asyncio.wait((step, closing), return_when=asyncio.FIRST_COMPLETED)
                    if not step.done():
                        step.cancel()
                        await asyncio.wait((step,))  # let the replay unwind before it is closed below
                        return
                    try:
                        item = step.result()
                    except StopAsyncIteration:
                        return
                    yield item
            finally:
                closing.cancel()
        finally:
            await replay.aclose()

    async def _resume(self, session: Session, last_event_id: str) -> LegacyAnswer:
        """A GET with `Last-Event-ID`: the rest of that stream, on whichever instance."""
        parsed = parse_event_id(last_event_id)
        if parsed is None:
            return _rejected(Rejection(400, None, McpError(
                errors.INVALID_REQUEST, "Bad Request: Last-Event-ID must be an event id this server sent "
                "(<stream>:<number>)")))
        if parsed[0] == GET_STREAM:
            return LegacyAnswer(200, stream=self.events(session, after=parsed[1]))
        streams = self.streams
        owner = await streams.owner(parsed[0])
        if owner is None or owner.get("s") != session.key:
            return _rejected(Rejection(400, None, McpError(
                errors.INVALID_REQUEST, "Last-Event-ID names no stream of this session (it may have expired)")))
        return LegacyAnswer(200, stream=streams.replay(*parsed))

    # ------------------------------------------------------------------ the GET stream
    async def events(self, session: Session, after: int | None = None) -> AsyncGenerator[LegacyItem, None]:
        """The standalone GET stream: list changes and the session's resource updates, read from the shared
        change log (ids ``get:<n>``) from `after` on, or from now on when None."""
        sub = self.app.events.subscribe()  # its wake-ups come after the log entry was written
        keepalive = self.keepalive_s if self.keepalive_s is not None else self.app.listen_keepalive_s
        log = self.change_log
        try:
            await sub.ready()
            head = await log.head()
            position = head if after is None else min(after, head)  # an id beyond the head: the log was reset
            # priming: a client that sees no event before it reconnects still resumes from here
            yield SseEvent(None, id=f"{GET_STREAM}:{position}", retry=RETRY_MS)
            while True:
                while (entry := await log.next_after(position)) is not None:
                    position, change = entry
                    # Every event is checked against the session (one read): a stream opened before a
                    # DELETE - on whichever instance - delivers nothing after it.
                    state = await self.sessions.state(session)
                    if state is None:
                        return
                    message = _notification(state, change)
                    if message is not None:
                        yield SseEvent(message, id=f"{GET_STREAM}:{position}")
                woke = await sub.get(keepalive)
                if woke is None:
                    if await self.sessions.state(session) is None:
                        return  # ended while quiet: the stream ends within one keep-alive interval
                    yield KEEPALIVE
                elif woke.kind == "end":
                    return
        finally:
            sub.close()

    # ------------------------------------------------------------------ the 2024-11-05 HTTP+SSE transport
    async def sse_open(self, principal: Principal) -> tuple[str, AsyncGenerator[LegacyItem, None]]:
        opened = await SseChannels(self).open(principal)
        self.counters[("sse", 200)] += 1
        return opened

    async def sse_post(self, channel: str, message: Any, headers: Mapping[str, str],
                       principal: Principal) -> LegacyAnswer:
        try:
            return await SseChannels(self).post(channel, message, headers, principal)
        except McpError as e:  # e.g. the state store is unreachable
            return LegacyAnswer(500 if e.code == errors.INTERNAL_ERROR else 400, error_response(None, e))

    def counter_snapshot(self) -> LegacyCounters:
        """This era's exchanges so far, by kind and HTTP status (a copy: the caller may keep it)."""
        return LegacyCounters(tuple(sorted((kind, status, n) for (kind, status), n in self.counters.items())))

    def stdio_session(self, principal: Principal, write: Callable[[dict[str, Any]], None]) -> StdioSession:
        from .stdio import LegacyStdioSession

        return LegacyStdioSession(self, principal, write)


def _notification(state: SessionState, event: ChangeEvent) -> dict[str, Any] | None:
    """What `event` means to a live session: a notification, or None (not its concern)."""
    notify = _LIST_CHANGED.get(event.kind)
    if notify is not None:
        return {"jsonrpc": "2.0", "method": notify}
    if event.kind == "resource_updated" and event.uri is not None and event.uri in state.subscriptions:
        return {"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": event.uri}}
    return None


def close_stream(ctx: Context) -> bool:
    """From a handler (on the event loop): close the legacy client's SSE connection of this call, which
    then resumes with `Last-Event-ID` (SEP-1699). False where there is no such stream (the modern path,
    stdio, a JSON response)."""
    outbox = ctx.outbox
    if not isinstance(outbox, _StreamOutbox):
        return False
    outbox.close_stream()
    return True


def legacy_capabilities(modern: dict[str, Any]) -> dict[str, Any]:
    """The server capabilities a 2025 client understands (modern extensions stay on the modern path)."""
    return {k: v for k, v in modern.items() if k != "extensions"}


class _StreamOutbox(PendingMessages):
    """A call's messages for its SSE stream: bounded, never blocks the handler."""

    __slots__ = ("closed",)

    def __init__(self) -> None:
        super().__init__()
        self.closed = asyncio.Event()

    def close_stream(self) -> None:
        """End the client's connection now (SEP-1699 polling); the call goes on, and the client resumes
        with `Last-Event-ID`."""
        self.closed.set()
        self.wake()

    def busy(self) -> bool:
        """Whether the call has said anything yet (a message, or closing its stream)."""
        return bool(self.pending) or self.closed.is_set()


async def _produce(task: asyncio.Future[Reply], outbox: _StreamOutbox, log: StreamLog,
                   stream: str) -> None:
    """Append each message the running call `task` sends, and then its response, to the stream's log.
    Runs as a task of its own, so a dropped connection neither loses its messages nor cancels the call."""
    heart = asyncio.ensure_future(_heartbeat(log, stream))
    seq = 0
    try:
        while True:
            while outbox.pending:
                seq += 1
                await log.append(stream, seq, outbox.pending.popleft(), False)
            if task.done():
                break
            await outbox.wait()
        while outbox.pending:
            seq += 1
            await log.append(stream, seq, outbox.pending.popleft(), False)
        await log.append(stream, seq + 1, task.result().message, True)
    except asyncio.CancelledError:
        await log.end(stream, seq)  # cancelled: a client resuming this stream gets nothing more
        raise
    except Exception:
        log_.exception("a legacy call's stream failed")
    finally:
        heart.cancel()
        if not task.done():
            task.cancel()


async def _heartbeat(log: StreamLog, stream: str) -> None:
    """Renew the call's heartbeat while it runs (the first after one interval: a quick call writes none)."""
    while True:
        await asyncio.sleep(log.heartbeat_s)
        try:
            await log.beat(stream)
        except McpError as e:  # the store is briefly unreachable: the next beat tries again
            log_.warning("a legacy call's heartbeat failed: %s", e.message, extra={"era": "legacy"})


MAX_SUBSCRIPTIONS = 1000  # per session: the shared record stays small
MAX_URI = 4096  # characters of a subscribed URI
# the URIs of one session's subscriptions together: each subscribe rewrites the whole record (and every GET
# stream event reads it), so its size, not only its count, is bounded
MAX_SUBSCRIBED_CHARS = 64 * 1024


def _subscribe(uri: str) -> Callable[[SessionState], None]:
    def change(state: SessionState) -> None:
        if uri not in state.subscriptions:
            if len(state.subscriptions) >= MAX_SUBSCRIPTIONS:
                raise errors.invalid_params(f"a session may subscribe to at most {MAX_SUBSCRIPTIONS} resources")
            if sum(map(len, state.subscriptions)) + len(uri) > MAX_SUBSCRIBED_CHARS:
                raise errors.invalid_params(
                    f"a session's subscribed URIs may total at most {MAX_SUBSCRIBED_CHARS} characters")
            state.subscriptions.append(uri)

    return change


def _unsubscribe(uri: str) -> Callable[[SessionState], None]:
    def change(state: SessionState) -> None:
        if uri in state.subscriptions:
            state.subscriptions.remove(uri)

    return change


def _kind(http_method: str, message: Any) -> str:
    """What a legacy exchange was, for counters and logs: get, delete, initialize, response, notification,
    request (a method name would let clients grow the counter without bound)."""
    if http_method != "POST":
        return http_method.lower()
    if not isinstance(message, dict):
        return "invalid"
    if message.get("method") == "initialize":
        return "initialize"
    if "method" not in message:
        return "response"
    return "request" if "id" in message else "notification"


def _answer(reply: Reply) -> LegacyAnswer:
    # Unlike every other error of a call (see `_error`), a refusal for missing scopes is not sent with 200:
    # the authorization spec asks for 403 and a step-up challenge, which 2025-11-25 clients act on.
    if reply.scopes is not None:
        return LegacyAnswer(403, reply.message, scopes=reply.scopes)
    return LegacyAnswer(200, reply.message)


def _ok(req: LegacyRequest, result: dict[str, Any]) -> LegacyAnswer:
    return LegacyAnswer(200, {"jsonrpc": "2.0", "id": req.id, "result": result})


def _error(req: LegacyRequest, err: McpError) -> LegacyAnswer:
    # A JSON-RPC error of a live session travels with 200, as 2025 clients expect (a 4xx is a transport failure).
    return LegacyAnswer(200, error_response(req.id, err))


def _rejected(r: Rejection) -> LegacyAnswer:
    return LegacyAnswer(r.status, r.body())
