"""A 2025 session ends for good: a GET stream opened before its DELETE delivers nothing after it (and ends),
and a session whose record the store lost - deleted or not - is refused, never served as if new."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from typing import Any

import httpx

from helpers import open_legacy_session
from mcp_stateless import App
from mcp_stateless.protocol.principal import ANONYMOUS
from mcp_stateless.server.legacy import LegacyServer
from mcp_stateless.server.legacy.sessions import SESSION_NS

PING = {"jsonrpc": "2.0", "id": 1, "method": "ping"}


def _app() -> App:
    app = App("session-end-tests")

    @app.tool()
    async def change_tools() -> str:
        await app.notify_tools_changed()
        return "changed"

    return app


class GetStream:
    """A session's GET stream read on a thread: its messages, and whether (when) the server ended it."""

    def __init__(self, url: str, headers: dict[str, str]) -> None:
        self.messages: list[dict[str, Any]] = []
        self.open = threading.Event()
        self.ended = threading.Event()
        self._client = httpx.Client(timeout=httpx.Timeout(20, read=None))
        self._thread = threading.Thread(target=self._read, args=(url, headers), daemon=True)
        self._thread.start()
        assert self.open.wait(20), "the GET stream did not open"

    def _read(self, url: str, headers: dict[str, str]) -> None:
        try:
            with self._client.stream("GET", url, headers={**headers, "accept": "text/event-stream"}) as r:
                assert r.status_code == 200
                self.open.set()
                for line in r.iter_lines():
                    if line.startswith("data:") and line[5:].strip():
                        self.messages.append(json.loads(line[5:]))
            self.ended.set()
        except httpx.HTTPError:
            pass
        finally:
            self.open.set()

    def close(self) -> None:
        self._client.close()
        self._thread.join(20)


def _change_tools(url: str, headers: dict[str, str], id_: int) -> None:
    r = httpx.post(url, headers=headers, json={"jsonrpc": "2.0", "id": id_, "method": "tools/call",
                                               "params": {"name": "change_tools", "arguments": {}}})
    assert r.json()["result"]["content"] == [{"type": "text", "text": "changed"}]


CHANGED = {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}


def test_a_get_stream_opened_before_delete_delivers_nothing_after_it(served: Callable[..., Any]) -> None:
    app = _app()
    s = served(app, legacy=LegacyServer(app, keepalive_s=30.0))  # no keep-alive tick ends it: the event must
    doomed, other = open_legacy_session(s.url), open_legacy_session(s.url)
    stream = GetStream(s.url, doomed)
    try:
        _change_tools(s.url, other, 1)
        deadline = time.monotonic() + 10
        while not stream.messages and time.monotonic() < deadline:
            time.sleep(0.05)
        assert stream.messages == [CHANGED]  # delivered while the session lives
        assert httpx.delete(s.url, headers=doomed).status_code == 200
        _change_tools(s.url, other, 2)
        assert stream.ended.wait(10), "the stream of a deleted session went on"
        assert stream.messages == [CHANGED]  # nothing after the DELETE
    finally:
        stream.close()


def test_a_quiet_get_stream_ends_within_a_keepalive_of_delete(served: Callable[..., Any]) -> None:
    app = _app()
    s = served(app, legacy=LegacyServer(app, keepalive_s=0.3))
    session = open_legacy_session(s.url)
    stream = GetStream(s.url, session)
    try:
        time.sleep(0.5)
        assert not stream.ended.is_set()  # keep-alives alone do not end a live session's stream
        assert httpx.delete(s.url, headers=session).status_code == 200
        assert stream.ended.wait(5), "a quiet stream of a deleted session stayed open"
    finally:
        stream.close()


def _lose_record(s: Any, server: LegacyServer, headers: dict[str, str]) -> None:
    """What a store that evicts, or was flushed, or restarted in memory does to the session's record."""
    session = server.sessions.open(headers["mcp-session-id"], ANONYMOUS.id)
    assert session is not None
    s.run(server.state().records.delete(SESSION_NS, session.key))


def _ping(url: str, headers: dict[str, str]) -> tuple[int, Any]:
    r = httpx.post(url, json=PING, headers=headers)
    body = r.json()
    return r.status_code, body.get("result", body.get("error", {}).get("code"))


def test_a_deleted_session_stays_deleted_when_the_store_loses_its_record(served: Callable[..., Any]) -> None:
    app = _app()
    server = LegacyServer(app)
    s = served(app, legacy=server)
    headers = open_legacy_session(s.url)
    assert httpx.delete(s.url, headers=headers).status_code == 200
    _lose_record(s, server, headers)
    assert _ping(s.url, headers) == (404, -32001)
    level = httpx.post(s.url, headers=headers, json={"jsonrpc": "2.0", "id": 2, "method": "logging/setLevel",
                                                     "params": {"level": "info"}})
    assert level.status_code == 404  # and no write brings it back
    assert _ping(s.url, headers) == (404, -32001)


def test_a_session_whose_record_was_lost_is_refused_not_started_afresh(served: Callable[..., Any]) -> None:
    app = _app()
    server = LegacyServer(app)
    s = served(app, legacy=server)
    headers = open_legacy_session(s.url)
    assert _ping(s.url, headers) == (200, {})
    _lose_record(s, server, headers)
    assert _ping(s.url, headers) == (404, -32001)  # the client re-initializes, as a 404 tells it to
