"""The 2024-11-05 HTTP+SSE transport (`serve --legacy-sse`) against real `mcp-stateless serve` processes.

The stream is held by one instance; every POST below goes to another one sharing the state store (SQLite,
then a real Redis), and its answers must still arrive on the stream: the initialize result, a call's
response, a server->client elicitation whose answer is POSTed to a third place (the stream's own
instance), and a list change made through the other instance. The official TS SDK 1.x
`SSEClientTransport` runs a whole session, and the mistakes a client can make get their errors.
"""

from __future__ import annotations

import queue
import threading
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from test_legacy_http import msg, serve
from test_legacy_sdk_clients import run_ts

from services import CLI, http_server
from sse_stream import SseStream, sse

# Every test here starts a process (a server, a client, a tool): the fast lane leaves them out.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
APP = "tests/legacy/legacy_app.py:app"
@pytest.fixture(scope="module", params=["sqlite", "redis"])
def pair(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    if request.param == "sqlite":
        state = f"sqlite:///{tmp_path_factory.mktemp('legacy-sse') / 'state.db'}"
    else:
        state = request.getfixturevalue("redis_server").isolated_url()
    with serve("--legacy-sse", state=state) as a, serve("--legacy-sse", state=state) as b:
        yield a, b


def on(other: str, post_url: str) -> str:
    """The POST URL of a stream, on the other instance (same path and channel, another port)."""
    parts = urllib.parse.urlsplit(post_url)
    return urllib.parse.urlunsplit(parts._replace(netloc=urllib.parse.urlsplit(other).netloc))


def initialize(stream: SseStream, post: str, caps: dict[str, Any] | None = None) -> dict[str, Any]:
    r = httpx.post(post, json=msg("initialize", {"protocolVersion": "2024-11-05", "capabilities": caps or {},
                                                  "clientInfo": {"name": "sse-test", "version": "0"}}, 0))
    assert r.status_code == 202 and r.content == b""
    result = stream.message(lambda m: m.get("id") == 0)
    note = httpx.post(post, json={"jsonrpc": "2.0", "method": "notifications/initialized"})
    assert note.status_code == 202
    return result


def test_a_session_whose_posts_all_land_on_the_other_instance(pair: tuple[str, str]) -> None:
    a, b = pair
    with sse(a) as stream:
        assert stream.response is not None and stream.response.status_code == 200
        assert stream.response.headers["content-type"] == "text/event-stream"
        post = on(b, stream.post_url())
        init = initialize(stream, post, {"elicitation": {}})
        assert init["result"]["protocolVersion"] == "2024-11-05"
        assert init["result"]["serverInfo"] == {"name": "legacy-tests", "version": "1.0.0"}
        listed = httpx.post(post, json=msg("tools/list", {}, 1))
        assert listed.status_code == 202
        assert "greet" in [t["name"] for t in stream.message(lambda m: m.get("id") == 1)["result"]["tools"]]
        r = httpx.post(post, json=msg("tools/call", {"name": "greet", "arguments": {"name": "Ann"}}, 2))
        assert r.status_code == 202
        assert stream.message(lambda m: m.get("id") == 2)["result"]["content"] == [
            {"type": "text", "text": "Hello, Ann!"}]
        # A server->client request goes out on the stream; its answer is POSTed to the stream's own instance.
        httpx.post(post, json=msg("tools/call", {"name": "ask_name", "arguments": {}}, 3))
        ask = stream.message(lambda m: m.get("method") == "elicitation/create")
        assert ask["params"]["message"] == "What is your name?"
        answer = httpx.post(on(a, post), json={"jsonrpc": "2.0", "id": ask["id"],
                                               "result": {"action": "accept", "content": {"name": "Bo"}}})
        assert answer.status_code == 202
        assert stream.message(lambda m: m.get("id") == 3)["result"]["content"][0]["text"] == "Hello, Bo (accept)"
        # A list change made through the other instance reaches this stream.
        httpx.post(post, json=msg("tools/call", {"name": "change_tools", "arguments": {}}, 4))
        got = stream.message(lambda m: m.get("method") == "notifications/tools/list_changed" or m.get("id") == 4)
        if got.get("id") == 4:
            got = stream.message(lambda m: m.get("method") == "notifications/tools/list_changed")
        assert got == {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}


def test_cancellation_posted_to_the_other_instance_stops_the_call(pair: tuple[str, str]) -> None:
    a, b = pair
    with sse(a) as stream:
        post = on(b, stream.post_url())
        initialize(stream, post)
        httpx.post(post, json=msg("tools/call", {"name": "slow", "arguments": {}}, 5))
        cancel = httpx.post(on(a, post), json={"jsonrpc": "2.0", "method": "notifications/cancelled",
                                               "params": {"requestId": 5}})
        assert cancel.status_code == 202
        httpx.post(post, json=msg("ping", {}, 6))
        assert stream.message(lambda m: m.get("id") in (5, 6)) == {"jsonrpc": "2.0", "id": 6, "result": {}}
        # The call would answer after 10 s; cancelled, it never does.
        with pytest.raises(queue.Empty):
            stream.events.get(timeout=12)


def test_mistakes_get_clear_errors(pair: tuple[str, str]) -> None:
    a, b = pair
    with sse(a) as stream:
        post = stream.post_url()
        early = httpx.post(post, json=msg("tools/list", {}, 1))  # a request: answered on the stream
        assert early.status_code == 202
        refused = stream.message(lambda m: m.get("id") == 1)["error"]
        assert refused["code"] == -32600 and "initialize" in refused["message"]
        initialize(stream, post)
        twice = httpx.post(on(b, post), json=msg("initialize", {"protocolVersion": "2025-11-25",
                                                                "capabilities": {}}, 2))
        assert twice.status_code == 400 and twice.json()["error"]["code"] == -32600
        junk = httpx.post(post, content=b'{"jsonrpc": "2.0", "id": 3}', headers={"content-type": "application/json"})
        assert junk.status_code == 400 and junk.json()["error"]["code"] == -32600
    forged = post.rsplit("=", 1)[0] + "=s1.k1.forged"
    r = httpx.post(forged, json=msg("ping", {}, 7))
    assert r.status_code == 404 and r.json() == {"jsonrpc": "2.0", "id": 7, "error": {
        "code": -32001, "message": "Session not found"}}
    # The stream is gone, and so is the channel (on every instance).
    for target in (post, on(b, post)):
        for _ in range(50):
            gone = httpx.post(target, json=msg("ping", {}, 8))
            if gone.status_code == 404:
                break
            threading.Event().wait(0.1)
        assert gone.status_code == 404 and gone.json()["error"]["code"] == -32001


def test_off_by_default_and_only_for_event_streams() -> None:
    argv = [CLI, "serve", APP, "--http", "127.0.0.1:{port}", "--log-level", "warning", "--state", "memory://"]
    with http_server(argv, "mcp-stateless serve", cwd=ROOT) as url:
        r = httpx.get(url, headers={"accept": "text/event-stream"})
        assert r.status_code == 405 and r.json()["error"]["code"] == -32600
        assert httpx.get(url + "/sse", headers={"accept": "text/event-stream"}).status_code == 404
    with http_server([*argv, "--legacy-sse"], "mcp-stateless serve", cwd=ROOT) as url:
        r = httpx.get(url, headers={"accept": "application/json"})
        assert r.status_code == 406 and r.json()["error"]["code"] == -32600
        with sse(url + "/sse") as stream:  # the conventional path works too
            assert urllib.parse.urlsplit(stream.post_url()).path == "/mcp"
        assert httpx.get(url.replace("/mcp", "/other/sse"), headers={"accept": "text/event-stream"}).status_code == 404
        assert httpx.get(url + "x/sse", headers={"accept": "text/event-stream"}).status_code == 404
    refused = [CLI, "serve", APP, "--http", "127.0.0.1:1", "--legacy", "reject", "--legacy-sse"]
    import subprocess

    done = subprocess.run(refused, capture_output=True, text=True, timeout=30, cwd=ROOT)
    assert done.returncode == 2 and "--legacy-sse needs --legacy serve" in done.stderr


def test_ts_sdk1_sse_client_transport_full_session() -> None:
    with serve("--legacy-sse", state="memory://") as url:
        out = run_ts(["sse", url])
    assert out["server"] == {"name": "legacy-tests", "version": "1.0.0"}
    assert out["version"] == "2025-11-25"
    assert out["greet"] == "Hello, Ann!"
    assert out["askName"] == "Hello, Alice (accept)"
    assert out["askTwice"] == "Alice then sampled"
    assert out["elicitations"] == ["What is your name?", "First?"]
    assert out["samplings"] == ["Say something"]
    assert out["roots"] == "2 roots"
    assert out["logs"] == ["info line", "error line"]
    assert out["progress"][0] == 1
    assert out["prompt"] == "Hello Zed"
    assert out["completion"] == ["alice", "alan"]
    assert out["read"] == "watched content"
    assert out["updated"] == ["test://watched"]
    assert out["toolsChanged"] >= 1
    assert out["ping"] == {}
