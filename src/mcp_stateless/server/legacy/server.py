"""`LegacyServer`: the 2025-era half of a dual-era endpoint (the `LegacyEndpoint` seam), a façade over
one module per job.

It answers `initialize` (`lifecycle`: 2025-11-25 negotiated down to 2025-03-26), every later exchange
once `gate` let it through: `ping`, `logging/setLevel`, `resources/subscribe`/`unsubscribe` and the
host's bridged methods (`methods`, `calls`, `bridge`), clients' responses to server->client requests
(`peer`), the standalone GET stream and resumption (`getstream`) and DELETE; the 2024-11-05 HTTP+SSE
transport (`sse`) and 2025 stdio (`stdio`). It serves any `LegacyHost` (`App` is one) and replies in the
era's terms (`LegacyReply`); transports choose how to say them. Nothing here is kept per process: any
instance sharing the key ring and the state store serves any session.
"""

from __future__ import annotations

import collections
from collections.abc import AsyncGenerator, Callable, Mapping
from typing import Any

from ...protocol.endpoint import (
    LegacyCounters,
    LegacyItem,
    LegacyOutcome,
    LegacyReply,
    Outbox,
    StdioSession,
)
from ...protocol.envelope import Rejection
from ...protocol.errors import McpError
from ...protocol.legacy import SERVED_VERSIONS, LegacyNotification, LegacyRequest, LegacyResponse, classify
from ...protocol.principal import Principal
from ...state import StateBundle
from . import replies
from .calls import CallRegistry
from .changelog import ChangeLog, LoggedEvents
from .gate import SessionGate
from .getstream import GetStreams
from .host import LegacyHost
from .lifecycle import Lifecycle
from .methods import Methods
from .parts import Parts
from .sessions import SessionGone, Sessions
from .sse import SseChannels


class LegacyServer:
    """Serves 2025-era clients from `host`'s handlers. `session_ttl_s`: how long a session id stays
    valid; `request_timeout_s`: how long a call waits for a client's answer to a server->client request;
    `stream_ttl_s`: how long a call's stream, or an event of the GET streams, can be resumed
    (`Last-Event-ID`) after it was sent; `get_log_max`: how many GET-stream events are kept at most;
    `heartbeat_s`: how often a running call says it is alive (a call silent for 5 beats is taken for
    dead, its instance gone: a client resuming its stream gets an error response instead of waiting);
    `json_within_s`: a call that finishes this quickly without sending anything is answered as JSON;
    `max_inflight_per_session` / `max_inflight_per_principal`: calls (tools/call, prompts/get, ...) one
    session / one principal may have running on this instance at once - a 2025 call runs to its end after
    its client left (a disconnect is not a cancel), so without a bound one client could start thousands
    and hold the tool threads; beyond it a call is refused as too many (HTTP 429, -32600, `Retry-After`).
    Anonymous callers share one principal; keep the principal bound below the tool threads (64 under
    `serve`) so one principal never holds them all; `max_stream_bytes`: what a 2024-11-05 HTTP+SSE stream
    may have waiting for a client that does not read it before it is closed; `max_sessions_per_principal`:
    open sessions one authenticated principal may hold (None: unbounded; anonymous callers are not
    counted, as they share one principal), beyond which `initialize` is refused as too many (HTTP 429)."""

    def __init__(self, host: LegacyHost, *, session_ttl_s: float = 24 * 3600.0, request_timeout_s: float = 300.0,
                 keepalive_s: float | None = None, versions: tuple[str, ...] = SERVED_VERSIONS,
                 stream_ttl_s: float = 600.0, get_log_max: int = 10_000, heartbeat_s: float = 2.0,
                 json_within_s: float = 0.25, max_inflight_per_session: int = 16,
                 max_inflight_per_principal: int = 32, max_stream_bytes: int = 16 * 1024 * 1024,
                 max_sessions_per_principal: int | None = 1000) -> None:
        self.host = host
        self.versions = versions
        self.parts = parts = Parts(host, session_ttl_s=session_ttl_s, request_timeout_s=request_timeout_s,
                                   keepalive_s=keepalive_s, stream_ttl_s=stream_ttl_s, get_log_max=get_log_max,
                                   heartbeat_s=heartbeat_s)
        self.gate = SessionGate(parts)
        self.lifecycle = Lifecycle(host, parts, versions=versions,
                                   max_sessions_per_principal=max_sessions_per_principal)
        self.calls = CallRegistry(host, parts, json_within_s=json_within_s,
                                  max_inflight_per_session=max_inflight_per_session,
                                  max_inflight_per_principal=max_inflight_per_principal)
        self.methods = Methods(host, parts, self.calls)
        self.get_streams = GetStreams(host, parts)
        self.sse = SseChannels(parts, self.lifecycle, self.calls, self.get_streams, self.exchange,
                               max_stream_bytes=max_stream_bytes)
        # Exchanges by (kind, HTTP status), as the transports that answered them count them (`count`).
        self.counters: collections.Counter[tuple[str, int]] = collections.Counter()
        # Every change event published through the host, on this instance, is logged once for the GET
        # streams of every instance (publishers log; readers only read).
        host.tap_events("legacy-get-log", lambda bus: LoggedEvents(bus, parts.change_log))

    # ------------------------------------------------------------------ shared parts, for operators and tests
    def state(self) -> StateBundle:
        """The host's state (shared by instances), or this process's memory when it has none."""
        return self.parts.state()

    @property
    def sessions(self) -> Sessions:
        return self.parts.sessions()

    @property
    def change_log(self) -> ChangeLog:
        return self.parts.change_log()

    # ------------------------------------------------------------------ the seam
    async def exchange(self, http_method: str, message: Any, headers: Mapping[str, str],
                       principal: Principal, can_sse: bool, outbox: Outbox | None = None) -> LegacyReply:
        """`outbox`: where a request's messages go when the transport has a channel of its own (the
        2024-11-05 SSE stream); None answers on the exchange itself."""
        try:
            return await self._exchange(http_method, message, headers, principal, can_sse, outbox)
        except SessionGone as e:  # ended (DELETE) while this exchange was being served
            return replies.refused(LegacyOutcome.UNKNOWN_SESSION, None, e)
        except McpError as e:  # e.g. the state store is unreachable
            return replies.failed(None, e)

    async def _exchange(self, http_method: str, message: Any, headers: Mapping[str, str],
                        principal: Principal, can_sse: bool, outbox: Outbox | None) -> LegacyReply:
        decision = None
        if http_method == "POST":
            decision = classify(message)
            if isinstance(decision, Rejection):
                return replies.malformed(decision)
            if isinstance(decision, LegacyRequest) and decision.method == "initialize":
                return await self.lifecycle.open(decision, principal)
        live = await self.gate.enter(headers, principal, decision.id if isinstance(decision, LegacyRequest) else None)
        if isinstance(live, LegacyReply):
            return live
        session, state = live
        if http_method == "GET":
            return await self.get_streams.open(session, headers, can_sse)
        if http_method == "DELETE":
            await self.lifecycle.end(session)
            return replies.OK
        if isinstance(decision, LegacyNotification):
            if decision.method == "notifications/cancelled":
                await self.calls.cancel(session, decision.params.get("requestId"))
            return replies.ACCEPTED
        if isinstance(decision, LegacyResponse):
            if await self.parts.peer().answer(session, decision):
                return replies.ACCEPTED
            return replies.bad_request(None, f"no request with id {decision.id!r} is waiting for a response")
        assert isinstance(decision, LegacyRequest)
        return await self.methods.request(decision, session, state, principal, headers=headers, can_sse=can_sse,
                                          outbox=outbox)

    # ------------------------------------------------------------------ the 2024-11-05 HTTP+SSE transport
    async def sse_open(self, principal: Principal) -> tuple[str, AsyncGenerator[LegacyItem, None]]:
        return await self.sse.open(principal)

    async def sse_post(self, channel: str, message: Any, headers: Mapping[str, str],
                       principal: Principal) -> LegacyReply:
        try:
            return await self.sse.post(channel, message, headers, principal)
        except McpError as e:  # e.g. the state store is unreachable
            return replies.failed(None, e)

    # ------------------------------------------------------------------ counters and stdio
    def count(self, kind: str, status: int) -> None:
        self.counters[(kind, status)] += 1

    def counter_snapshot(self) -> LegacyCounters:
        """This era's exchanges so far, by kind and HTTP status (a copy: the caller may keep it)."""
        return LegacyCounters(tuple(sorted((kind, status, n) for (kind, status), n in self.counters.items())))

    def stdio_session(self, principal: Principal, write: Callable[[dict[str, Any]], None]) -> StdioSession:
        from .stdio import LegacyStdioSession  # only a stdio server loads it

        return LegacyStdioSession(self.parts, self.lifecycle, self.methods, self.get_streams, principal, write)
