"""Legacy sessions that any instance can serve.

The session id is self-validating: the negotiated version, the client's capabilities and info, the
principal and a random key are sealed with the app's key ring (the same HMAC seal as MRTR
`requestState`), so every instance sharing the ring accepts an id it never saw, after a restart too.
What changes during a session lives in one small record of the shared record store, under the session's
random key, made at `initialize` and kept as long as the id is valid: the log level and the resource
subscriptions. The record *is* the session's liveness: a DELETE removes it, and an id whose record is
missing is refused (an unknown session) everywhere - so a store that loses records (a restarted memory store, a Redis
that evicts or was flushed) ends sessions, and never brings a deleted one back. Nothing re-creates a
missing record (`update` refuses), so a write racing a DELETE cannot resurrect the session either.
"""

from __future__ import annotations

import base64
import os
import time
from dataclasses import dataclass, field
from typing import Any

import orjson

from ...protocol import errors
from ...protocol.errors import McpError
from ...protocol.legacy import SESSION_NOT_FOUND
from ...protocol.mrtr import KeyRing, StateContext, seal, unseal
from ...state import RecordStore

SESSION_NS = "legacy-session"
PRINCIPAL_NS = "legacy-principal-sessions"  # per principal: its open sessions (when they are bounded)
_SEAL_METHOD = "mcp-session"  # what the seal is bound to besides the principal: never a request method
_SEAL_DIGEST = "legacy"
# clientInfo fields kept in the id (the rest, e.g. icons, would only make every request's header longer)
_INFO_KEYS = ("name", "version", "title")
RECORD_GRACE_S = 60.0


@dataclass(frozen=True, slots=True)
class SealedSession:
    """A 2025 session as its sealed id describes it (immutable for the session's life; what changes is
    its `SessionState`, in the shared record). Not the client's `client.session.Session`."""

    key: str  # random, names the session's mutable record
    version: str
    capabilities: dict[str, Any]
    client_info: dict[str, Any] | None
    principal: str
    expires_at: float


@dataclass(slots=True)
class SessionState:
    """The mutable part, shared by every instance."""

    log_level: str | None = None
    subscriptions: list[str] = field(default_factory=list)
    deleted: bool = False

    def encode(self) -> bytes:
        return orjson.dumps({"l": self.log_level, "s": self.subscriptions, "d": self.deleted})

    @classmethod
    def decode(cls, data: bytes) -> SessionState:
        try:
            raw = orjson.loads(data)
            level, subs, deleted = raw.get("l"), raw.get("s"), raw.get("d")
        except (orjson.JSONDecodeError, AttributeError):
            return cls()
        return cls(level if isinstance(level, str) else None,
                   [s for s in subs if isinstance(s, str)] if isinstance(subs, list) else [], deleted is True)


class Sessions:
    """Issues and opens session ids; reads and updates their shared state."""

    def __init__(self, ring: KeyRing, records: RecordStore, ttl_s: float) -> None:
        self.ring = ring
        self.records = records
        self.ttl_s = ttl_s

    def issue(self, principal: str, version: str, capabilities: dict[str, Any],
              client_info: dict[str, Any] | None) -> tuple[str, SealedSession]:
        key = base64.urlsafe_b64encode(os.urandom(15)).decode("ascii")
        info = {k: client_info[k] for k in _INFO_KEYS if k in client_info} if client_info else None
        payload = {"k": key, "v": version, "c": capabilities, "i": info}
        sid = seal(self.ring, StateContext(principal, _SEAL_METHOD, _SEAL_DIGEST), payload, self.ttl_s)
        return sid, SealedSession(key, version, capabilities, info, principal, time.time() + self.ttl_s)

    def open(self, sid: str, principal: str) -> SealedSession | None:
        """The session an id names for this principal; None when forged, expired or another's."""
        try:
            payload = unseal(self.ring, StateContext(principal, _SEAL_METHOD, _SEAL_DIGEST), sid)
        except McpError:
            return None
        if not isinstance(payload, dict):
            return None
        key, version, caps, info = payload.get("k"), payload.get("v"), payload.get("c"), payload.get("i")
        if not isinstance(key, str) or not isinstance(version, str) or not isinstance(caps, dict):
            return None
        # The seal's expiry was checked by unseal; the record's TTL follows it.
        return SealedSession(key, version, caps, info if isinstance(info, dict) else None, principal,
                       time.time() + self.ttl_s)

    async def create(self, session: SealedSession) -> None:
        """Make the record of a session just issued (its id is valid only while the record exists)."""
        # The record outlives the sealed id by a little, so that near the end an id that still unseals
        # is not refused for a record that expired a moment earlier (clocks of two instances differ).
        expires = session.expires_at + RECORD_GRACE_S
        await self.records.create(SESSION_NS, session.key, SessionState().encode(), expires_at=expires)

    async def state(self, session: SealedSession) -> SessionState | None:
        """The session's state; None when it has ended (DELETE, its stream closed, or its record lost)."""
        got = await self.records.get(SESSION_NS, session.key)
        if got is None:
            return None
        state = SessionState.decode(got.data)
        return None if state.deleted else state  # `deleted`: a tombstone written by an earlier version

    async def end(self, session: SealedSession) -> None:
        await self.records.delete(SESSION_NS, session.key)

    async def update(self, session: SealedSession, change: Any) -> SessionState:
        """Apply `change(state)` with compare-and-swap, so two instances never lose each other's update.
        Raises `SessionGone` when the session ended meanwhile (its record is never re-created)."""
        for _ in range(16):
            got = await self.records.get(SESSION_NS, session.key)
            current = None if got is None else SessionState.decode(got.data)
            if got is None or current is None or current.deleted:
                raise SessionGone
            change(current)
            data = current.encode()
            expires = session.expires_at + RECORD_GRACE_S
            if await self.records.swap(SESSION_NS, session.key, got.version, data, expires_at=expires):
                return current
        raise McpError(errors.INTERNAL_ERROR, "the session's state is changing too fast; retry")


    async def admit(self, session: SealedSession, limit: int) -> bool:
        """Count `session` among its principal's open sessions; False (nothing stored) when the principal
        has `limit` open already. The count is one shared record per principal: the keys and expiries of
        its sessions, the expired ones pruned at each admission (so it never holds more than `limit`)."""
        now = time.time()
        for _ in range(16):
            got = await self.records.get(PRINCIPAL_NS, session.principal)
            live = [e for e in _entries(got.data if got is not None else b"[]") if e[1] > now]
            if len(live) >= limit:
                return False
            live.append((session.key, session.expires_at))  # counted while its id is valid
            data = orjson.dumps(live)
            expires = max(e[1] for e in live) + RECORD_GRACE_S
            if got is None:
                if await self.records.create(PRINCIPAL_NS, session.principal, data, expires_at=expires):
                    return True
            elif await self.records.swap(PRINCIPAL_NS, session.principal, got.version, data, expires_at=expires):
                return True
        raise McpError(errors.INTERNAL_ERROR, "this principal's sessions are changing too fast; retry")

    async def forget(self, session: SealedSession) -> None:
        """Take an ended session out of its principal's count (best effort: expiry prunes it anyway)."""
        for _ in range(16):
            got = await self.records.get(PRINCIPAL_NS, session.principal)
            if got is None:
                return
            entries = _entries(got.data)
            kept = [e for e in entries if e[0] != session.key and e[1] > time.time()]
            if len(kept) == len(entries):
                return
            if not kept:
                await self.records.delete(PRINCIPAL_NS, session.principal)
                return
            if await self.records.swap(PRINCIPAL_NS, session.principal, got.version, orjson.dumps(kept),
                                       expires_at=max(e[1] for e in kept) + RECORD_GRACE_S):
                return


def _entries(data: bytes) -> list[tuple[str, float]]:
    try:
        raw = orjson.loads(data)
    except orjson.JSONDecodeError:
        return []
    if not isinstance(raw, list):
        return []
    return [(e[0], float(e[1])) for e in raw
            if isinstance(e, list) and len(e) == 2 and isinstance(e[0], str) and isinstance(e[1], int | float)]


class SessionGone(McpError):
    """The session ended (DELETE, or its record is gone) while a request of it was being served."""

    def __init__(self) -> None:
        super().__init__(SESSION_NOT_FOUND, "Session not found: it was terminated")
