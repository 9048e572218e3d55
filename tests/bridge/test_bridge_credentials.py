"""Resource updates over an HTTP upstream whose sessions are per caller: two `mcp-stateless bridge
--forward-authorization` processes sharing a real Redis, in front of a real 2025 Streamable HTTP server that
takes bearer tokens (tests/bridge/servers/boards_http.py, official Python SDK `mcp` 1.30.0, one board per
caller).

Each caller's listen streams are fed by an upstream session opened with that caller's own token on the
instance the stream is on; what such a session hears is published on the state bus addressed to that caller,
so a listener of another caller, on any instance, never hears it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
import pytest

from services import CLI, RedisServer, free_port, http_server, need, wait_port

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
MCP_1 = ROOT / ".cache" / "venv-mcp-1.30.0" / "bin" / "python"
BOARDS = Path(__file__).resolve().parent / "servers" / "boards_http.py"
KEYS = "k1:YnJpZGdlLWNyZWRlbnRpYWxzLWtleS0zMi1ieXRlcyEhIQ=="
PV = "2026-07-28"
MINE, SENTINEL = "board://mine", "board://sentinel"
P, Q = "Bearer token-p", "Bearer token-q"
META = {"io.modelcontextprotocol/protocolVersion": PV, "io.modelcontextprotocol/clientCapabilities": {}}
LISTEN = {"notifications": {"resourceSubscriptions": [MINE, SENTINEL]}, "_meta": META}


class Bridges:
    """CLI bridges over one Redis in front of the boards server, each forwarding callers' tokens: b1 and b2,
    and b3 with room for one caller's watch session (`--upstream-watches 1`)."""

    def __init__(self, workdir: Path, upstream: str) -> None:
        self.redis = RedisServer(workdir).start()
        self.procs: list[subprocess.Popen[bytes]] = []
        self.urls: list[str] = []
        env = {k: v for k, v in os.environ.items() if not k.startswith("MCP_STATELESS_")} | {"MCP_STATELESS_KEYS": KEYS}
        for n, extra in ((1, []), (2, []), (3, ["--upstream-watches", "1"])):
            port = free_port()
            log = workdir / f"b{n}.log"
            with log.open("ab") as out:
                proc = subprocess.Popen(
                    [CLI, "bridge", "--upstream-url", upstream, "--forward-authorization", "--http",
                     f"127.0.0.1:{port}", "--state", self.redis.url, "--instance-name", f"b{n}",
                     "--log-level", "warning", *extra], cwd=ROOT, env=env, stdout=out, stderr=out)
            self.procs.append(proc)
            wait_port(port, proc, f"bridge b{n} (log: {log.read_text()[-2000:]})")
            self.urls.append(f"http://127.0.0.1:{port}/mcp")
        self.http = httpx.Client(timeout=15)

    def close(self) -> None:
        self.http.close()
        for proc in self.procs:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
        self.redis.stop()

    def post(self, n: int, token: str | None, method: str, params: dict[str, Any]) -> dict[str, Any]:
        p = {**params, "_meta": META}
        r = self.http.post(self.urls[n], json={"jsonrpc": "2.0", "id": 1, "method": method, "params": p},
                           headers=_headers(token, method, params))
        assert r.headers["content-type"].startswith("application/json"), r.text
        body: dict[str, Any] = r.json()
        return body

    def listen(self, held: ExitStack, n: int, token: str, sid: str,
               notifications: dict[str, Any] | None = None) -> Iterator[dict[str, Any]]:
        """A listen stream on instance `n` for `token`'s caller (by default subscribed to both boards); its
        acknowledgement read."""
        params = LISTEN if notifications is None else {"notifications": notifications, "_meta": META}
        stream = held.enter_context(self.http.stream(
            "POST", self.urls[n], headers=_headers(token, "subscriptions/listen", params),
            json={"jsonrpc": "2.0", "id": sid, "method": "subscriptions/listen", "params": params}))
        assert stream.status_code == 200, stream.read()
        assert stream.headers["content-type"].startswith("text/event-stream"), stream.read()
        messages = (json.loads(line[5:]) for line in stream.iter_lines() if line.startswith("data:"))
        ack = next(messages)
        assert ack["method"] == "notifications/subscriptions/acknowledged", ack
        assert ack["params"]["notifications"] == params["notifications"]
        return messages


def _headers(token: str | None, method: str, params: dict[str, Any]) -> dict[str, str]:
    headers = {"content-type": "application/json", "accept": "application/json, text/event-stream",
               "mcp-protocol-version": PV, "mcp-method": method}
    if method in ("tools/call", "resources/read"):
        headers["mcp-name"] = params["name" if method == "tools/call" else "uri"]
    if token is not None:
        headers["authorization"] = token
    return headers


def _updated(uri: str, sid: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": "notifications/resources/updated",
            "params": {"uri": uri, "_meta": {"io.modelcontextprotocol/subscriptionId": sid}}}


@pytest.fixture(scope="module")
def bridges(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Bridges]:
    need(MCP_1, "the mcp==1.30.0 venv (scripts/setup.sh)")
    with http_server([str(MCP_1), "-I", str(BOARDS), "{port}"], "the boards server") as upstream:
        b = Bridges(tmp_path_factory.mktemp("bridge-credentials"), upstream)
        try:
            yield b
        finally:
            b.close()


def test_each_caller_hears_only_its_own_resource_updates_on_either_instance(bridges: Bridges) -> None:
    with ExitStack() as held:
        p_on_1 = bridges.listen(held, 0, P, "p1")
        q_on_1 = bridges.listen(held, 0, Q, "q1")
        q_on_2 = bridges.listen(held, 1, Q, "q2")
        # P posts through the other instance; upstream, only P's session on b1 (opened with P's token,
        # subscribed for p1) is told; b1 publishes it on Redis addressed to P.
        done = bridges.post(1, P, "tools/call", {"name": "post", "arguments": {"uri": MINE, "text": "hello"}})
        assert done["result"]["content"] == [{"type": "text", "text": "posted for p to 1 sessions"}]
        assert next(p_on_1) == _updated(MINE, "p1")
        # Q's sentinel: each of Q's streams hears it first (from Q's sessions on b1 and b2: one each), so
        # P's update, published earlier on the same Redis channel, never reached either.
        done = bridges.post(0, Q, "tools/call", {"name": "post", "arguments": {"uri": SENTINEL, "text": "q"}})
        assert done["result"]["content"] == [{"type": "text", "text": "posted for q to 2 sessions"}]
        assert next(q_on_1) == _updated(SENTINEL, "q1")
        assert next(q_on_2) == _updated(SENTINEL, "q2")
        # And P's stream did not hear Q's sentinel: its next event is P's own next update.
        done = bridges.post(1, P, "tools/call", {"name": "post", "arguments": {"uri": MINE, "text": "again"}})
        assert done["result"]["content"] == [{"type": "text", "text": "posted for p to 1 sessions"}]
        assert next(p_on_1) == _updated(MINE, "p1")


def test_each_callers_call_reaches_the_upstream_with_its_own_token(bridges: Bridges) -> None:
    bridges.post(0, P, "tools/call", {"name": "post", "arguments": {"uri": MINE, "text": "from p"}})
    bridges.post(1, Q, "tools/call", {"name": "post", "arguments": {"uri": MINE, "text": "from q"}})
    for n in (0, 1):
        for token, text in ((P, "from p"), (Q, "from q")):
            read = bridges.post(n, token, "resources/read", {"uri": MINE})
            assert "result" in read, read
            assert read["result"]["contents"] == [{"uri": MINE, "mimeType": "text/plain", "text": text}]


def test_a_caller_without_a_token_is_refused_by_the_upstream(bridges: Bridges) -> None:
    body = bridges.post(0, None, "tools/call", {"name": "post", "arguments": {"uri": MINE, "text": "x"}})
    assert body["error"] == {"code": -32603, "message": "the upstream server refused the caller's credentials "
                                                       "(HTTP 401)", "data": {"status": 401}}


def test_a_listener_without_a_token_is_refused_before_its_acknowledgement(bridges: Bridges) -> None:
    """Its watch session cannot be opened: the upstream refuses it, and so the stream is refused."""
    params = {"notifications": {"resourceSubscriptions": [MINE]}, "_meta": META}
    r = bridges.http.post(bridges.urls[1], headers=_headers(None, "subscriptions/listen", params),
                          json={"jsonrpc": "2.0", "id": "l", "method": "subscriptions/listen", "params": params})
    assert r.status_code == 200 and r.headers["content-type"] == "application/json"
    assert r.json() == {"jsonrpc": "2.0", "id": "l", "error": {
        "code": -32603, "message": "the upstream server refused the caller's credentials (HTTP 401)",
        "data": {"status": 401}}}


def test_watch_sessions_are_bounded_per_instance_and_let_go_with_the_callers_last_stream(bridges: Bridges) -> None:
    """b3 holds a watch session for one caller at a time: Q is refused while P listens, and once P's last
    stream ends P's session is unsubscribed upstream (P's post tells no session) and Q's listen is served."""
    with ExitStack() as held:
        p = bridges.listen(held, 2, P, "p")  # kept: a dropped line iterator closes its response
        with bridges.http.stream("POST", bridges.urls[2], headers=_headers(Q, "subscriptions/listen", LISTEN),
                                 json={"jsonrpc": "2.0", "id": "q", "method": "subscriptions/listen",
                                       "params": LISTEN}) as refused:
            assert refused.headers["content-type"] == "application/json"  # not a stream: read at once
            refused.read()
        assert refused.json() == {"jsonrpc": "2.0", "id": "q", "error": {
            "code": -32603, "message": "this bridge instance already holds upstream watch sessions for 1 callers' "
            "listen streams (--upstream-watches): each caller's events come from a session opened with its own "
            "credentials; try again later", "data": {"limit": 1}}}
        done = bridges.post(0, P, "tools/call", {"name": "post", "arguments": {"uri": SENTINEL, "text": "p"}})
        assert done["result"]["content"] == [{"type": "text", "text": "posted for p to 1 sessions"}]
        assert next(p) == _updated(SENTINEL, "p")
    deadline = time.monotonic() + 10
    while True:  # P's stream has ended: its watch settles (unsubscribes upstream, gives the session back)
        done = bridges.post(0, P, "tools/call", {"name": "post", "arguments": {"uri": SENTINEL, "text": "p"}})
        if done["result"]["content"] == [{"type": "text", "text": "posted for p to 0 sessions"}]:
            break
        assert time.monotonic() < deadline, done
        time.sleep(0.05)
    with ExitStack() as held:
        # Served once P's watch has given its session back (a moment after its unsubscribe): until then it
        # still counts, so that a new watch never races the old one's unsubscribes on the same session.
        while True:
            stream = held.enter_context(bridges.http.stream(
                "POST", bridges.urls[2], headers=_headers(Q, "subscriptions/listen", LISTEN),
                json={"jsonrpc": "2.0", "id": "q", "method": "subscriptions/listen", "params": LISTEN}))
            if stream.headers["content-type"].startswith("text/event-stream"):
                break
            assert json.loads(stream.read())["error"]["data"] == {"limit": 1}
            assert time.monotonic() < deadline, "P's watch session was never let go"
            time.sleep(0.05)
        q = (json.loads(line[5:]) for line in stream.iter_lines() if line.startswith("data:"))
        assert next(q)["method"] == "notifications/subscriptions/acknowledged"
        done = bridges.post(1, Q, "tools/call", {"name": "post", "arguments": {"uri": MINE, "text": "q"}})
        assert done["result"]["content"] == [{"type": "text", "text": "posted for q to 1 sessions"}]
        assert next(q) == _updated(MINE, "q")


def test_a_list_change_one_callers_session_heard_reaches_that_caller_only(bridges: Bridges) -> None:
    """A list change is addressed like a resource update: heard by P's session, it is P's view."""
    both = {"toolsListChanged": True, "resourceSubscriptions": [SENTINEL]}
    with ExitStack() as held:
        p = bridges.listen(held, 0, P, "pl", both)
        q = bridges.listen(held, 1, Q, "ql", both)
        done = bridges.post(1, P, "tools/call", {"name": "announce", "arguments": {}})
        assert done["result"]["content"][0]["text"].startswith("announced for p to ")
        assert next(p) == {"jsonrpc": "2.0", "method": "notifications/tools/list_changed",
                           "params": {"_meta": {"io.modelcontextprotocol/subscriptionId": "pl"}}}
        done = bridges.post(0, Q, "tools/call", {"name": "post", "arguments": {"uri": SENTINEL, "text": "q"}})
        assert done["result"]["content"] == [{"type": "text", "text": "posted for q to 1 sessions"}]
        assert next(q) == _updated(SENTINEL, "ql")  # not P's list change, published before it
