"""How long a 2025 session lives, and that a DELETE ends it for as long as its id is valid: set short on
purpose, so a lifetime read in the wrong unit (ms for s, or s for ms) or a DELETE that wears off fails here."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import httpx

from helpers import open_legacy_session
from mcp_stateless import App
from mcp_stateless.server.legacy import LegacyServer

PING = {"jsonrpc": "2.0", "id": 1, "method": "ping"}


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
