"""The stores and settings every job of the 2025 branch reads: `Parts`, made once per `LegacyServer`.

Each store is built from the host's state when it is used, not when the branch is made: a host may
adopt shared state later (`App.use_state`), and every instance then reads the same records and bus.
"""

from __future__ import annotations

import asyncio

from ...state import StateBundle
from .changelog import ChangeLog
from .host import LegacyHost
from .peer import Inbox, Peer
from .sessions import Sessions
from .streams import StreamLog


class Parts:
    """`session_ttl_s`, `request_timeout_s`, `keepalive_s`, `stream_ttl_s`, `get_log_max` and
    `heartbeat_s` as `LegacyServer` documents them."""

    __slots__ = ("_inbox", "_own_state", "get_log_max", "heartbeat_s", "host", "keepalive_s", "request_timeout_s",
                 "session_ttl_s", "stream_ttl_s")

    def __init__(self, host: LegacyHost, *, session_ttl_s: float, request_timeout_s: float,
                 keepalive_s: float | None, stream_ttl_s: float, get_log_max: int, heartbeat_s: float) -> None:
        self.host = host
        self.session_ttl_s = session_ttl_s
        self.request_timeout_s = request_timeout_s
        self.keepalive_s = keepalive_s
        self.stream_ttl_s = stream_ttl_s
        self.get_log_max = get_log_max
        self.heartbeat_s = heartbeat_s
        self._own_state: StateBundle | None = None
        self._inbox: Inbox | None = None

    def state(self) -> StateBundle:
        """The host's state (shared by instances), or this process's memory when it has none."""
        shared = self.host.state
        if shared is not None:
            return shared
        if self._own_state is None:
            from ...state.memory import open_bundle

            self._own_state = open_bundle()
        return self._own_state

    def keepalive(self) -> float:
        """Seconds a quiet stream waits before a keep-alive: the branch's own, else the host's."""
        return self.keepalive_s if self.keepalive_s is not None else self.host.listen_keepalive_s

    def sessions(self) -> Sessions:
        return Sessions(self.host.ensure_key_ring(), self.state().records, self.session_ttl_s)

    def streams(self) -> StreamLog:
        state = self.state()
        return StreamLog(state.records, state.bus, self.stream_ttl_s, self.keepalive(), self.heartbeat_s)

    def change_log(self) -> ChangeLog:
        return ChangeLog(self.state().records, self.stream_ttl_s, self.get_log_max)

    def peer(self) -> Peer:
        state = self.state()
        inbox = self._inbox
        # One inbox per bus and event loop: a host may adopt shared state later, and a test may run the
        # branch on several loops in turn (the old inbox's reader ended with its loop).
        if inbox is None or inbox.bus is not state.bus or inbox.loop is not asyncio.get_running_loop():
            inbox = self._inbox = Inbox(state.bus)
        return Peer(state.records, state.bus, self.request_timeout_s, inbox)
