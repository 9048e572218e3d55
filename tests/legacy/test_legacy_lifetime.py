"""How long a 2025 session lives, and that a DELETE ends it for as long as its id is valid: set short on
purpose, so a lifetime read in the wrong unit (ms for s, or s for ms) or a DELETE that wears off fails here;
and, read from the store's writes instead of waited for, that the session's record (its liveness) lasts as long
as its id on every write, and that nothing written after an end brings the session back."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from helpers import open_legacy_session
from mcp_stateless import App
from mcp_stateless.protocol.mrtr import KeyRing
from mcp_stateless.server.legacy import LegacyServer
from mcp_stateless.server.legacy.sessions import (
    RECORD_GRACE_S,
    SESSION_NS,
    SessionGone,
    Sessions,
    SessionState,
)
from mcp_stateless.state.memory import MemoryRecords

PING = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
V = "2025-11-25"


def _app() -> App:
    app = App("lifetime-tests")

    @app.tool()
    def noop() -> str:
        return "ok"

    return app


def _ping(url: str, headers: dict[str, str]) -> tuple[int, Any]:
    r = httpx.post(url, json=PING, headers=headers)
    body = r.json()
    return r.status_code, body.get("result", body.get("error", {}).get("code"))


def test_a_session_lives_exactly_its_configured_lifetime(served: Callable[..., Any]) -> None:
    app = _app()
    short = served(app, legacy=LegacyServer(app, session_ttl_s=1.0))
    headers = open_legacy_session(short.url)
    assert _ping(short.url, headers) == (200, {})  # alive at once: the lifetime is not read as milliseconds
    time.sleep(1.6)
    assert _ping(short.url, headers) == (404, -32001)  # and gone after it: not read as 1,000 s either


def test_the_default_lifetime_outlasts_a_short_pause(served: Callable[..., Any]) -> None:
    app = _app()
    s = served(app, legacy=LegacyServer(app))
    headers = open_legacy_session(s.url)
    time.sleep(1.6)
    assert _ping(s.url, headers) == (200, {})


def test_a_deleted_session_stays_deleted_for_as_long_as_its_id_is_valid(served: Callable[..., Any]) -> None:
    """The DELETE must hold as long as the sealed id does: a tombstone that expired first would bring the
    deleted session back while its id still unseals (now the session's record is removed, and an id without
    one is refused)."""
    app = _app()
    s = served(app, legacy=LegacyServer(app, session_ttl_s=3.0))
    headers = open_legacy_session(s.url)
    assert httpx.delete(s.url, headers=headers).status_code in (200, 204)
    assert _ping(s.url, headers) == (404, -32001)
    time.sleep(1.5)  # half the lifetime: the id still unseals, so only the missing record refuses it
    assert _ping(s.url, headers) == (404, -32001)


def test_a_2024_http_sse_session_lives_exactly_its_configured_lifetime(served: Callable[..., Any]) -> None:
    """The 2024-11-05 transport keeps a channel record of its own beside the session's, with the same lifetime:
    a channel timed in the wrong unit (1000 times shorter) refuses the calls at once, and the session still
    ends on time."""
    from sse_stream import sse

    app = _app()
    s = served(app, legacy=LegacyServer(app, session_ttl_s=2.0), legacy_sse=True)
    with sse(s.url) as stream:
        post = stream.post_url()
        init = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2024-11-05", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}
        assert httpx.post(post, json=init).status_code == 202
        assert stream.message(lambda m: m.get("id") == 0)["result"]["protocolVersion"] == "2024-11-05"
        assert httpx.post(post, json={**PING, "id": 1}).status_code == 202
        assert stream.message(lambda m: m.get("id") == 1) == {"jsonrpc": "2.0", "id": 1, "result": {}}
        time.sleep(2.6)
        late = httpx.post(post, json={**PING, "id": 2})
        assert (late.status_code, late.json()["error"]["code"]) == (404, -32001)


class _ExpiryRecords(MemoryRecords):
    """Memory records that note the expiry of every write, so a record's lifetime is read, not waited for."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[tuple[str, str, float | None]] = []

    async def create(self, ns: str, key: str, data: bytes, *, expires_at: float | None = None,
                     due: float | None = None) -> bool:
        self.writes.append(("create", ns, expires_at))
        return await super().create(ns, key, data, expires_at=expires_at, due=due)

    async def swap(self, ns: str, key: str, expected_version: int, data: bytes, *,
                   expires_at: float | None = None, due: float | None = None) -> bool:
        self.writes.append(("swap", ns, expires_at))
        return await super().swap(ns, key, expected_version, data, expires_at=expires_at, due=due)


async def test_a_sessions_record_lives_as_long_as_its_id_plus_the_grace_on_every_write() -> None:
    """A two-hour session: its record (its liveness) must last two hours and a minute, when made and after
    each change; a record timed from the write instead (a minute) would end a long session early, which
    the short-lifetime tests above cannot see (their ids expire first)."""
    records = _ExpiryRecords()
    sessions = Sessions(KeyRing.generate(), records, ttl_s=7200.0)
    before = time.time()
    _, session = sessions.issue("bob", V, {}, None)
    assert before + 7200.0 <= session.expires_at <= time.time() + 7200.0
    await sessions.create(session)
    await sessions.update(session, lambda s: setattr(s, "log_level", "debug"))
    assert records.writes == [("create", SESSION_NS, session.expires_at + RECORD_GRACE_S),
                              ("swap", SESSION_NS, session.expires_at + RECORD_GRACE_S)]


async def test_an_ended_session_stays_ended_whatever_writes_after_it() -> None:
    """After `end` (DELETE) the state is gone and a write refuses instead of re-creating the record; a
    tombstone record (`deleted`, as an earlier version wrote on DELETE) ends the session the same way."""
    records = MemoryRecords()
    sessions = Sessions(KeyRing.generate(), records, ttl_s=3600.0)
    _, ended = sessions.issue("bob", V, {}, None)
    await sessions.create(ended)
    assert await sessions.state(ended) == SessionState()
    await sessions.end(ended)
    assert await sessions.state(ended) is None
    with pytest.raises(SessionGone):
        await sessions.update(ended, lambda s: setattr(s, "log_level", "debug"))
    assert await records.get(SESSION_NS, ended.key) is None

    _, buried = sessions.issue("bob", V, {}, None)
    await records.create(SESSION_NS, buried.key, SessionState(deleted=True).encode(),
                         expires_at=buried.expires_at + RECORD_GRACE_S)
    assert await sessions.state(buried) is None
    with pytest.raises(SessionGone):
        await sessions.update(buried, lambda s: setattr(s, "log_level", "debug"))
