"""The upstream session pool: 2025-era sessions opened on demand, reused, bounded, expired when idle.

A session is keyed by what the upstream may depend on: the client capabilities a request declares (an
upstream may register tools only when sampling or roots are present, and may only send a server->client
request the session declared) and, for an HTTP upstream, the principal (a session opened for one caller
is never used for another). A session keyed with capabilities that allow server->client requests is
lent to one call at a time: a 2025 stdio upstream does not say which call its `elicitation/create`
belongs to, so exclusivity is what attributes it. Sessions without such capabilities are shared.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from ..client.channels import Channel
from ..client.handlers import Handlers
from ..client.legacy import LegacySession
from ..protocol import errors
from ..protocol.errors import McpError

log = logging.getLogger("mcp_stateless.bridge")

# The capabilities that let an upstream ask the client something mid-call.
ASKING = ("elicitation", "sampling", "roots")
# The requests whose server->client questions become MRTR rounds.
ASKABLE_CALLS = ("tools/call", "prompts/get", "resources/read")

Asker = Callable[[str, dict[str, Any]], Any]
# An upstream session's notification and the principal its session was opened for (None: shared by all).
Notified = Callable[[dict[str, Any], str | None], None]


def unprompted(method: str) -> McpError:
    """The answer to a server->client request no modern call can be asked: a 2026-07-28 client is asked
    only inside one of its requests (MRTR), and it leaves nothing (roots included) for the bridge to answer
    from later. An upstream that asks in reaction to `initialized`, or after the call that held the session
    ended, is told so at once instead of waiting for an answer that cannot come."""
    return McpError(errors.INVALID_REQUEST,
                    f"{method} cannot be answered here: the 2026-07-28 client behind this bridge is asked only "
                    "during its own tools/call, prompts/get or resources/read, and none is in flight on this "
                    "session")


def pool_key(capabilities: Mapping[str, Any], principal: str | None) -> str:
    """The part of a request an upstream session depends on, as one string."""
    caps = {k: capabilities[k] for k in sorted(capabilities) if k in ASKING}
    return orjson.dumps({"c": caps, "p": principal}, option=orjson.OPT_SORT_KEYS).decode()


@dataclass(eq=False)
class Lease:
    """One pooled session; `ask` is set while an exclusive call holds it (its server->client requests
    go there)."""

    key: str
    session: LegacySession
    exclusive: bool
    last_used: float = field(default_factory=time.monotonic)
    busy: int = 0
    ask: Asker | None = None
    broken: bool = False


class UpstreamPool:
    """At most `max_sessions` sessions; one idle longer than `idle_s` is closed. `credentialed` makes the
    channel of a session opened with one caller's credentials (the `Authorization` value it forwards)."""

    def __init__(self, channel_factory: Callable[[], Channel], client_info: Mapping[str, Any], *,
                 max_sessions: int = 16, idle_s: float = 300.0, timeout: float = 60.0,
                 acquire_timeout: float = 30.0, on_notification: Notified | None = None,
                 credentialed: Callable[[str], Channel] | None = None) -> None:
        self.channel_factory = channel_factory
        self.credentialed = credentialed
        self.on_notification = on_notification  # every session's list changes and resource updates
        self.client_info = dict(client_info)
        self.max_sessions = max_sessions
        self.idle_s = idle_s
        self.timeout = timeout
        self.acquire_timeout = acquire_timeout
        self.leases: list[Lease] = []
        self.opened = 0  # sessions opened so far (tests and metrics read it)
        self._changed = asyncio.Condition()

    def _handlers(self, capabilities: Mapping[str, Any], lease_ref: list[Lease]) -> Handlers:
        """Handlers that declare exactly the capabilities of the key, and hand each question to the call
        that holds the session."""

        def asker(method: str) -> Callable[[dict[str, Any]], Any]:
            async def ask(params: dict[str, Any]) -> Any:
                lease = lease_ref[0] if lease_ref else None
                if lease is None or lease.ask is None:
                    log.info("the upstream sent %s outside a call: refused", method)
                    raise unprompted(method)
                return await lease.ask(method, params)
            return ask

        el = capabilities.get("elicitation")
        return Handlers(
            elicitation=asker("elicitation/create") if isinstance(el, dict) and (not el or "form" in el) else None,
            url_elicitation=asker("elicitation/create") if isinstance(el, dict) and "url" in el else None,
            sampling=asker("sampling/createMessage") if "sampling" in capabilities else None,
            roots=asker("roots/list") if "roots" in capabilities else None,
        )

    async def acquire(self, capabilities: Mapping[str, Any], principal: str | None, *,
                      ask: Asker | None = None, authorization: str | None = None) -> Lease:
        """A session for one call; `ask` (an exclusive call's) takes its server->client requests once the
        session is settled: one the upstream sends in reaction to `initialized` belongs to no call (it would
        make one caller's roots, say, the state of a process later callers share) and is refused.
        `authorization` is the caller's credential a new session is opened with; `principal` must be
        derived from it (the key holds the principal, never the credential)."""
        key = pool_key(capabilities, principal)
        exclusive = any(k in capabilities for k in ASKING)
        deadline = time.monotonic() + self.acquire_timeout
        async with self._changed:
            while True:
                self._expire()
                for lease in self.leases:
                    if lease.key == key and not lease.broken and (not exclusive or lease.busy == 0):
                        lease.busy += 1
                        lease.last_used = time.monotonic()
                        if exclusive:
                            lease.ask = ask
                        return lease
                if len(self.leases) >= self.max_sessions:
                    idle = [le for le in self.leases if le.busy == 0]
                    if idle:
                        victim = min(idle, key=lambda le: le.last_used)
                        self._drop(victim)
                if len(self.leases) < self.max_sessions:
                    break
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"all {self.max_sessions} upstream sessions are busy")
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._changed.wait(), left)
            ref: list[Lease] = []
            channel = (self.credentialed(authorization) if authorization is not None and self.credentialed
                       else self.channel_factory())
            heard = None if self.on_notification is None else _heard_by(self.on_notification, principal)
            session = LegacySession(channel, self._handlers(capabilities, ref), self.client_info,
                                    timeout=self.timeout, on_notification=heard)
            lease = Lease(key, session, exclusive, busy=1)
            ref.append(lease)
            self.leases.append(lease)
        try:
            await session.start()
            if exclusive:
                await _settle(session)
                lease.ask = ask
        except BaseException:
            async with self._changed:
                self._drop(lease)
                self._changed.notify_all()
            raise
        self.opened += 1
        return lease

    async def release(self, lease: Lease, *, broken: bool = False) -> None:
        async with self._changed:
            lease.busy -= 1
            lease.ask = None
            lease.last_used = time.monotonic()
            if broken:
                lease.broken = True
            if lease.broken and lease.busy == 0:
                self._drop(lease)
            self._changed.notify_all()

    def _expire(self) -> None:
        now = time.monotonic()
        for lease in [le for le in self.leases if le.busy == 0 and now - le.last_used > self.idle_s]:
            self._drop(lease)

    def _drop(self, lease: Lease) -> None:
        if lease in self.leases:
            self.leases.remove(lease)
        task = asyncio.get_running_loop().create_task(_close(lease.session))
        _closing.add(task)
        task.add_done_callback(_closing.discard)

    async def aclose(self) -> None:
        leases, self.leases = self.leases, []
        # At once, not one after another: a stdio front's own client allows a short grace before SIGTERM.
        await asyncio.gather(*(_close(lease.session) for lease in leases))
        if _closing:
            await asyncio.gather(*_closing, return_exceptions=True)


_closing: set[asyncio.Task[None]] = set()


def _heard_by(notified: Notified, principal: str | None) -> Callable[[dict[str, Any]], None]:
    """A session's notifications, told with the principal the session was opened for."""
    def heard(message: dict[str, Any]) -> None:
        notified(message, principal)
    return heard


async def _settle(session: LegacySession) -> None:
    """One round trip before a session that may ask the client is lent to a call. An upstream may ask in
    reaction to `notifications/initialized` (the reference filesystem server sends `roots/list`); that
    question belongs to no call. A stdio upstream sends it before it answers the ping, so it arrives while
    no call holds the session and is refused every time, never handed to whichever call opened the session
    (whose client's roots would then become the state of a process other callers share)."""
    with contextlib.suppress(McpError):  # an upstream without ping answers an error: settled all the same
        await session.request("ping", {})


async def _close(session: LegacySession) -> None:
    try:
        await session.aclose()
        await session.base.aclose()
    except Exception as e:  # a dead upstream cannot be closed more; nothing to keep
        log.debug("closing an upstream session: %s", e)
