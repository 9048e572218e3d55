"""The legacy (2025) branch over real HTTP against `mcp-stateless serve` subprocesses.

Two instances share one state store (SQLite, then Redis) and one key ring, as replicas behind a balancer
would: a session opened on one is served by the other, a server->client request sent on one instance's stream is
answered by a POST to the other, and a list change made through one reaches the GET stream on the other.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from services import CLI, http_server

ROOT = Path(__file__).resolve().parents[2]
APP = "tests/legacy/legacy_app.py:app"
KEYS = "k1:bGVnYWN5LXRlc3RzLXNoYXJlZC1rZXktMzItYnl0ZXMh"
V = "2025-11-25"
SSE_JSON = "application/json, text/event-stream"


@contextlib.contextmanager
def serve(*extra: str, state: str | None = None) -> Iterator[str]:
    env = {**os.environ, "MCP_STATELESS_KEYS": KEYS}
    argv = [CLI, "serve", APP, "--http", "127.0.0.1:{port}", "--log-level", "warning", *extra]
    if state is not None:
        argv += ["--state", state]
    with http_server(argv, "mcp-stateless serve", cwd=ROOT, env=env) as url:
        yield url


@pytest.fixture(scope="module", params=["sqlite", "redis"])
def pair(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """Two instances sharing one state store: a SQLite file (one machine) or a real Redis (any machine)."""
    if request.param == "sqlite":
        state = f"sqlite:///{tmp_path_factory.mktemp('legacy') / 'state.db'}"
    else:
        state = request.getfixturevalue("redis_server").isolated_url()
    with serve(state=state) as a, serve(state=state) as b:
        yield a, b


def msg(method: str, params: dict[str, Any] | None = None, id_: int | str = 1) -> dict[str, Any]:
    m: dict[str, Any] = {"jsonrpc": "2.0", "id": id_, "method": method}
    if params is not None:
        m["params"] = params
    return m


def init_msg(version: str = V, caps: dict[str, Any] | None = None) -> dict[str, Any]:
    return msg("initialize", {"protocolVersion": version, "capabilities": caps or {},
                              "clientInfo": {"name": "raw-test", "version": "0"}}, id_=0)


def initialize(url: str, caps: dict[str, Any] | None = None) -> str:
    r = httpx.post(url, json=init_msg(caps=caps), headers={"accept": SSE_JSON})
    assert r.status_code == 200, r.text
    sid = r.headers["mcp-session-id"]
    assert all(0x21 <= ord(c) <= 0x7E for c in sid)
    note = httpx.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"},
                      headers={"accept": SSE_JSON, "mcp-session-id": sid, "mcp-protocol-version": V})
    assert note.status_code == 202
    return sid


def headers(sid: str) -> dict[str, str]:
    return {"accept": SSE_JSON, "mcp-session-id": sid, "mcp-protocol-version": V}


def sse_messages(text: str) -> list[dict[str, Any]]:
    """The messages of an SSE body (a priming event's empty data is no message)."""
    return [json.loads(line[5:]) for line in text.splitlines() if line.startswith("data:") and line[5:].strip()]


def data_of(line: str) -> dict[str, Any] | None:
    if not line.startswith("data:") or not line[5:].strip():
        return None
    got: dict[str, Any] = json.loads(line[5:])
    return got


@pytest.mark.slow
def test_initialize_negotiates_and_lists_on_the_other_instance(pair: tuple[str, str]) -> None:
    a, b = pair
    r = httpx.post(a, json=init_msg(), headers={"accept": SSE_JSON})
    body = r.json()
    assert body["result"]["protocolVersion"] == V
    assert body["result"]["serverInfo"] == {"name": "legacy-tests", "version": "1.0.0"}
    caps = body["result"]["capabilities"]
    assert caps["tools"] == {"listChanged": True} and caps["resources"]["subscribe"] is True
    assert "logging" in caps and "completions" in caps and "extensions" not in caps
    sid = r.headers["mcp-session-id"]
    listed = httpx.post(b, json=msg("tools/list", {}, 2), headers=headers(sid))
    assert listed.status_code == 200
    result = listed.json()["result"]
    assert "greet" in [t["name"] for t in result["tools"]]
    assert not {"resultType", "ttlMs", "cacheScope", "_meta"} & set(result)
    called = httpx.post(b, json=msg("tools/call", {"name": "greet", "arguments": {"name": "Ann"}}, 3),
                        headers=headers(sid))
    # A quick call that sends nothing before its result is answered as JSON (nothing to resume).
    assert called.headers["content-type"] == "application/json"
    greeting = {"content": [{"type": "text", "text": "Hello, Ann!"}]}
    assert called.json() == {"jsonrpc": "2.0", "id": 3, "result": greeting}


@pytest.mark.slow
@pytest.mark.parametrize(("asked", "settled"), [("2025-06-18", "2025-06-18"), ("2025-03-26", "2025-03-26"),
                                                 ("1999-01-01", V)])
def test_version_negotiation(pair: tuple[str, str], asked: str, settled: str) -> None:
    r = httpx.post(pair[0], json=init_msg(asked), headers={"accept": SSE_JSON})
    assert r.json()["result"]["protocolVersion"] == settled


@pytest.mark.slow
def test_elicitation_answered_through_the_other_instance(pair: tuple[str, str]) -> None:
    a, b = pair
    sid = initialize(a, {"elicitation": {}})
    answers: list[httpx.Response] = []
    seen: list[dict[str, Any]] = []
    with httpx.stream("POST", a, json=msg("tools/call", {"name": "ask_name", "arguments": {}}, 7),
                      headers=headers(sid), timeout=20) as stream:
        assert stream.status_code == 200
        assert stream.headers["content-type"] == "text/event-stream"
        for line in stream.iter_lines():
            m = data_of(line)
            if m is None:
                continue
            seen.append(m)
            if m.get("method") == "elicitation/create":
                assert m["params"]["message"] == "What is your name?"
                assert m["params"]["requestedSchema"]["required"] == ["name"]
                reply = {"jsonrpc": "2.0", "id": m["id"], "result": {"action": "accept", "content": {"name": "Bo"}}}
                answers.append(httpx.post(b, json=reply, headers=headers(sid)))
            elif m.get("id") == 7:
                break
    assert [r.status_code for r in answers] == [202]
    assert seen[-1]["result"]["content"][0]["text"] == "Hello, Bo (accept)"
    # The same response again: nobody waits for it any more.
    again = httpx.post(b, json=reply, headers=headers(sid))
    assert again.status_code == 400
    assert again.json()["error"]["code"] == -32600


@pytest.mark.slow
def test_two_rounds_and_a_client_error(pair: tuple[str, str]) -> None:
    a, b = pair
    sid = initialize(a, {"elicitation": {}, "sampling": {}})
    with httpx.stream("POST", a, json=msg("tools/call", {"name": "ask_twice", "arguments": {}}, 8),
                      headers=headers(sid), timeout=20) as stream:
        final = None
        for line in stream.iter_lines():
            m = data_of(line)
            if m is None:
                continue
            if m.get("method") == "elicitation/create":
                httpx.post(b, json={"jsonrpc": "2.0", "id": m["id"],
                                    "result": {"action": "accept", "content": {"name": "Cy"}}}, headers=headers(sid))
            elif m.get("method") == "sampling/createMessage":
                httpx.post(a, json={"jsonrpc": "2.0", "id": m["id"], "result": {
                    "role": "assistant", "content": {"type": "text", "text": "hi"}, "model": "m"}},
                    headers=headers(sid))
            elif m.get("id") == 8:
                final = m
                break
    assert final is not None and final["result"]["content"][0]["text"] == "Cy then hi"
    # A client that answers with an error fails the call with that error.
    with httpx.stream("POST", b, json=msg("tools/call", {"name": "ask_name", "arguments": {}}, 9),
                      headers=headers(sid), timeout=20) as stream:
        for line in stream.iter_lines():
            m = data_of(line)
            if m is None:
                continue
            if m.get("method") == "elicitation/create":
                httpx.post(a, json={"jsonrpc": "2.0", "id": m["id"], "error": {"code": -1, "message": "no"}},
                           headers=headers(sid))
            elif m.get("id") == 9:
                final = m
                break
    assert final["error"]["code"] == -1


@pytest.mark.slow
def test_missing_capability_is_a_tool_error(pair: tuple[str, str]) -> None:
    sid = initialize(pair[0])  # no elicitation capability declared at initialize
    r = httpx.post(pair[1], json=msg("tools/call", {"name": "ask_name", "arguments": {}}, 4), headers=headers(sid))
    assert r.headers["content-type"] == "application/json" and r.json()["result"]["isError"] is True


@pytest.mark.slow
def test_logging_level_and_progress_follow_the_session(pair: tuple[str, str]) -> None:
    a, b = pair
    sid = initialize(a)
    set_level = httpx.post(a, json=msg("logging/setLevel", {"level": "info"}, 5), headers=headers(sid))
    assert set_level.json() == {"jsonrpc": "2.0", "id": 5, "result": {}}
    r = httpx.post(b, json=msg("tools/call", {"name": "chatty", "arguments": {}, "_meta": {"progressToken": "p"}}, 6),
                   headers=headers(sid))
    got = sse_messages(r.text)
    logs = [m["params"]["data"] for m in got if m.get("method") == "notifications/message"]
    assert logs == ["info line", "error line"]  # debug is below the session's level
    progress = [m["params"]["progress"] for m in got if m.get("method") == "notifications/progress"]
    assert progress == [1, 2]
    bad = httpx.post(a, json=msg("logging/setLevel", {"level": "loud"}, 7), headers=headers(sid))
    assert bad.json()["error"]["code"] == -32602


def _read_get_stream(url: str, sid: str, out: list[dict[str, Any]], ready: threading.Event, want: int) -> None:
    with httpx.stream("GET", url, headers={"accept": "text/event-stream", "mcp-session-id": sid,
                                           "mcp-protocol-version": V}, timeout=20) as stream:
        assert stream.status_code == 200
        ready.set()
        for line in stream.iter_lines():
            m = data_of(line)
            if m is not None:
                out.append(m)
                if len(out) >= want:
                    return


@pytest.mark.slow
def test_get_stream_hears_changes_made_on_the_other_instance(pair: tuple[str, str]) -> None:
    a, b = pair
    sid = initialize(a)
    sub = httpx.post(b, json=msg("resources/subscribe", {"uri": "test://watched"}, 2), headers=headers(sid))
    assert sub.json()["result"] == {}
    got: list[dict[str, Any]] = []
    ready = threading.Event()
    reader = threading.Thread(target=_read_get_stream, args=(a, sid, got, ready, 2), daemon=True)
    reader.start()
    assert ready.wait(10)
    for i, (tool, args) in enumerate([("touch", {"uri": "test://other"}), ("touch", {"uri": "test://watched"}),
                                      ("change_tools", {})]):
        httpx.post(b, json=msg("tools/call", {"name": tool, "arguments": args}, 3 + i), headers=headers(sid))
    reader.join(15)
    assert got == [
        {"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": "test://watched"}},
        {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"},
    ]


@pytest.mark.slow
def test_forged_unknown_and_deleted_sessions(pair: tuple[str, str]) -> None:
    a, b = pair
    sid = initialize(a)
    head, _, tag = sid.rpartition(".")
    forged = f"{head}.{'A' if tag[0] != 'A' else 'B'}{tag[1:]}"
    for bad in (forged, "not-a-session", sid + "x"):
        r = httpx.post(b, json=msg("ping", None, 1), headers=headers(bad))
        assert r.status_code == 404
        assert r.json()["error"]["code"] == -32001
    assert httpx.post(b, json=msg("ping", None, 1), headers=headers(sid)).json()["result"] == {}
    assert httpx.delete(b, headers=headers(sid)).status_code == 200
    gone = httpx.post(a, json=msg("ping", None, 2), headers=headers(sid))
    assert gone.status_code == 404 and gone.json()["error"]["code"] == -32001
    assert httpx.get(a, headers={**headers(sid), "accept": "text/event-stream"}).status_code == 404


@pytest.mark.slow
def test_requests_without_a_session_and_contradictions(pair: tuple[str, str]) -> None:
    a, _ = pair
    sid = initialize(a)
    # A claim-less request without a session is modern, and gets the modern ladder's error.
    r = httpx.post(a, json=msg("tools/list", {}, 1), headers={"accept": SSE_JSON})
    assert r.status_code == 400 and r.json()["error"]["code"] == -32602
    # A session's request with another version in its header is refused.
    r = httpx.post(a, json=msg("ping", None, 2), headers={**headers(sid), "mcp-protocol-version": "2025-06-18"})
    assert r.status_code == 400 and r.json()["error"]["code"] == -32600
    # The modern envelope wins over a session id: the request is answered as modern.
    modern = {"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": {"_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}}}
    r = httpx.post(a, json=modern, headers={**headers(sid), "mcp-protocol-version": "2026-07-28",
                                            "mcp-method": "tools/list"})
    assert r.status_code == 200 and r.json()["result"]["resultType"] == "complete"
    # A legacy client may not use modern-only methods.
    r = httpx.post(a, json=msg("server/discover", {}, 4), headers=headers(sid))
    assert r.json()["error"]["code"] == -32601
    r = httpx.post(a, json=msg("initialize", {"capabilities": {}}, 5), headers={"accept": SSE_JSON})
    assert r.json()["error"]["code"] == -32602


@pytest.mark.slow
def test_session_survives_a_restart_of_every_instance(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'state.db'}"
    with serve(state=db) as url:
        sid = initialize(url)
        httpx.post(url, json=msg("logging/setLevel", {"level": "error"}, 1), headers=headers(sid))
    with serve(state=db) as url2:
        r = httpx.post(url2, json=msg("tools/call", {"name": "chatty", "arguments": {}}, 2), headers=headers(sid))
        logs = [m["params"]["data"] for m in sse_messages(r.text) if m.get("method") == "notifications/message"]
        assert logs == ["error line"]  # the level set before the restart still holds


@pytest.mark.slow
def test_legacy_reject_is_modern_only() -> None:
    with serve("--legacy", "reject") as url:
        r = httpx.post(url, json=init_msg(), headers={"accept": SSE_JSON})
        assert r.status_code == 404  # the modern mapping of -32601, as before the legacy branch existed
        assert r.json()["error"]["code"] == -32601
        assert "mcp-session-id" not in r.headers
        g = httpx.get(url, headers={"accept": "text/event-stream", "mcp-session-id": "x"})
        assert g.status_code == 405


@pytest.mark.slow
def test_a_dropped_call_stream_resumes_on_the_other_instance(pair: tuple[str, str]) -> None:
    """The client drops the POST stream after the elicitation arrives; the call keeps waiting, the answer
    goes to the other instance, and a GET with Last-Event-ID there replays the rest: the final result."""
    a, b = pair
    sid = initialize(a, {"elicitation": {}})
    ids: list[str] = []
    ask = None
    with httpx.stream("POST", a, json=msg("tools/call", {"name": "ask_name", "arguments": {}}, 11),
                      headers=headers(sid), timeout=20) as stream:
        for line in stream.iter_lines():
            if line.startswith("id:"):
                ids.append(line[3:].strip())
            elif line.startswith("retry:"):
                assert int(line[6:]) > 0
            m = data_of(line)
            if m is not None and m.get("method") == "elicitation/create":
                ask = m
                break  # the connection drops here
    assert ask is not None and len(ids) == 2 and ids[0].endswith(":0")  # the priming event, then the request
    answered = httpx.post(b, json={"jsonrpc": "2.0", "id": ask["id"],
                                   "result": {"action": "accept", "content": {"name": "Re"}}}, headers=headers(sid))
    assert answered.status_code == 202
    got: list[dict[str, Any]] = []
    with httpx.stream("GET", b, headers={**headers(sid), "accept": "text/event-stream", "last-event-id": ids[-1]},
                      timeout=20) as resumed:
        assert resumed.status_code == 200
        for line in resumed.iter_lines():
            m = data_of(line)
            if m is not None:
                got.append(m)
    done = {"content": [{"type": "text", "text": "Hello, Re (accept)"}]}
    assert got == [{"jsonrpc": "2.0", "id": 11, "result": done}]
    # Resuming after the final event ends at once; another session cannot read the stream.
    final_id = ids[-1].rsplit(":", 1)[0] + ":2"
    again = httpx.get(b, headers={**headers(sid), "accept": "text/event-stream", "last-event-id": final_id}, timeout=5)
    assert again.status_code == 200 and sse_messages(again.text) == []
    other = initialize(b)
    stolen = httpx.get(a, headers={**headers(other), "accept": "text/event-stream", "last-event-id": ids[-1]})
    assert stolen.status_code == 400


@pytest.mark.slow
def test_a_handler_may_close_its_stream_and_the_client_polls(pair: tuple[str, str]) -> None:
    a, b = pair
    sid = initialize(a)
    r = httpx.post(a, json=msg("tools/call", {"name": "poll_me", "arguments": {}}, 12), headers=headers(sid))
    assert r.status_code == 200 and sse_messages(r.text) == []  # closed after the priming event only
    primed = [line[3:].strip() for line in r.text.splitlines() if line.startswith("id:")]
    assert len(primed) == 1
    resumed = httpx.get(b, headers={**headers(sid), "accept": "text/event-stream", "last-event-id": primed[0]},
                        timeout=10)
    finished = {"content": [{"type": "text", "text": "finished (stream closed: True)"}]}
    assert sse_messages(resumed.text) == [{"jsonrpc": "2.0", "id": 12, "result": finished}]


@pytest.mark.slow
def test_cancelled_on_the_other_instance_stops_the_call(pair: tuple[str, str]) -> None:
    import time

    a, b = pair
    sid = initialize(a)
    seen: list[dict[str, Any]] = []
    started = time.monotonic()
    with httpx.stream("POST", a, json=msg("tools/call", {"name": "slow", "arguments": {},
                                                         "_meta": {"progressToken": "s"}}, 13),
                      headers=headers(sid), timeout=20) as stream:
        for line in stream.iter_lines():
            m = data_of(line)
            if m is None:
                continue
            seen.append(m)
            if m.get("method") == "notifications/progress":
                note = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 13}}
                assert httpx.post(b, json=note, headers=headers(sid)).status_code == 202
    assert [m.get("method") for m in seen] == ["notifications/progress"]  # and no response
    assert time.monotonic() - started < 8


def _get_events(url: str, sid: str, want: int, last_event_id: str | None = None,
                on_open: Any = None) -> list[tuple[str | None, dict[str, Any] | None]]:
    """(id, message) of a GET stream's events until `want` messages arrived (the priming event is
    (id, None)); `on_open` runs once the stream answered 200."""
    h = {**headers(sid), "accept": "text/event-stream"}
    if last_event_id is not None:
        h["last-event-id"] = last_event_id
    out: list[tuple[str | None, dict[str, Any] | None]] = []
    event_id: str | None = None
    with httpx.stream("GET", url, headers=h, timeout=20) as stream:
        assert stream.status_code == 200
        if on_open is not None:
            on_open()
        for line in stream.iter_lines():
            if line.startswith("id:"):
                event_id = line[3:].strip()
            elif line.startswith("data:"):
                out.append((event_id, data_of(line)))
                event_id = None
                if sum(1 for _, m in out if m is not None) >= want:
                    break
    return out


@pytest.mark.slow
def test_a_dropped_get_stream_resumes_on_the_other_instance_with_last_event_id(pair: tuple[str, str]) -> None:
    """The GET stream's events carry ids; changes made while the client is away are replayed on another
    instance from its Last-Event-ID, in order, and nothing it already saw comes again."""
    a, b = pair
    sid = initialize(a)
    assert httpx.post(b, json=msg("resources/subscribe", {"uri": "test://watched"}, 2),
                      headers=headers(sid)).json()["result"] == {}

    def call(tool: str, args: dict[str, Any], rid: int) -> None:
        r = httpx.post(b, json=msg("tools/call", {"name": tool, "arguments": args}, rid), headers=headers(sid))
        assert r.status_code == 200, r.text

    first = _get_events(a, sid, 1, on_open=lambda: call("change_tools", {}, 3))
    (primed, none), (seen_id, seen) = first
    assert none is None and primed is not None and primed.startswith("get:")  # the priming event
    assert seen == {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}
    assert seen_id is not None and int(seen_id[4:]) > int(primed[4:])
    # The client is away: three changes happen, one of them not its concern.
    call("touch", {"uri": "test://other"}, 4)
    call("touch", {"uri": "test://watched"}, 5)
    call("change_tools", {}, 6)
    resumed = _get_events(b, sid, 2, last_event_id=seen_id)
    messages = [m for _, m in resumed if m is not None]
    assert messages == [
        {"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": "test://watched"}},
        {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"},
    ]
    ids = [i for i, m in resumed if m is not None]
    assert all(i is not None and int(i[4:]) > int(seen_id[4:]) for i in ids) and ids == sorted(ids)
    # From the priming id, the first stream's event is replayed too (it came after the priming event).
    again = _get_events(a, sid, 3, last_event_id=primed)
    assert [m for _, m in again if m is not None] == [seen, *messages]
    # An id naming no event of any stream is refused, as for POST streams.
    bad = httpx.get(a, headers={**headers(sid), "accept": "text/event-stream", "last-event-id": "get:x"}, timeout=5)
    assert bad.status_code == 400
