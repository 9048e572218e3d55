"""`Last-Event-ID` is client input: a value this server never sent gets a clear 400, never a 500."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest

from mcp_stateless import App
from mcp_stateless.server.legacy import LegacyServer
from mcp_stateless.server.legacy.streams import parse_event_id

V = "2025-11-25"
ACCEPT = "application/json, text/event-stream"


def _open(url: str) -> dict[str, str]:
    r = httpx.post(url, headers={"accept": ACCEPT}, json={
        "jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": V, "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}})
    assert r.status_code == 200, r.text
    return {"mcp-session-id": r.headers["mcp-session-id"], "mcp-protocol-version": V}


@pytest.mark.parametrize("value", [
    b"get:" + b"9" * 5000,            # int() refuses more than 4,300 digits
    b"AAAAAAAAAAAAAAAA:" + b"1" * 5000,
    b"get:\xb2",                      # superscript two: str.isdigit() says yes, int() says no
    b"AAAAAAAAAAAAAAAA:\xb9\xb2",
    b"get:\xd9\xa3",                  # U+0663 ARABIC-INDIC DIGIT THREE, as UTF-8 bytes read as latin-1
    b"get:",
    b"no-colon",
])
def test_a_last_event_id_this_server_never_sent_is_a_400(served: Callable[..., Any], value: bytes) -> None:
    app = App("event-id-tests")
    s = served(app, legacy=LegacyServer(app))
    session = _open(s.url)
    r = httpx.get(s.url, headers={**session, "accept": "text/event-stream", "last-event-id": value})
    assert r.status_code == 400, r.text
    assert r.headers["content-type"] == "application/json"
    error = r.json()["error"]
    assert error["code"] == -32600 and "Last-Event-ID" in error["message"]
    # and the process keeps serving the same session
    ping = httpx.post(s.url, headers={**session, "accept": ACCEPT}, json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
    assert ping.json() == {"jsonrpc": "2.0", "id": 1, "result": {}}


def test_event_ids_are_ascii_digits_of_bounded_length() -> None:
    assert parse_event_id("get:12") == ("get", 12)
    assert parse_event_id(" abc:def:7 ") == ("abc:def", 7)
    assert parse_event_id("get:" + "9" * 18) == ("get", 10**18 - 1)
    for bad in ("get:" + "9" * 19, "get:\xb2", "get:\u0663", "get:-1", "get:+1", "get: 1", ":1", "get"):
        assert parse_event_id(bad) is None, bad
