"""What outlives one request is bound to the principal, and every request is authorized again: an MRTR
round, a task and a legacy (2025) session survive a renewed token of the same principal, refuse an
expired one with the 401 of any other request, and are unknown to another principal.

Short-lived tokens carry the real token's claims, signed with the authorization server's own published
key (oidc-provider mints none that expire within seconds); `serve` allows 30 s of clock skew, so a token
whose `exp` is 24 s past is accepted for about six more seconds and then refused.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
import orjson
import pytest
from as_harness import AuthServer
from test_resource_server import _claims_of, _mint, prm_url, protected

PV = "2026-07-28"
LEGACY = "2025-11-25"
ACCEPT = "application/json, text/event-stream"
APP = "tests/auth/session_app.py:app"
LEEWAY = 30  # what `serve` allows for clock skew
TASKS = {"extensions": {"io.modelcontextprotocol/tasks": {}}}


@pytest.fixture(scope="module")
def server(auth_server: AuthServer) -> Iterator[str]:
    with protected([auth_server.issuer], app=APP) as url:
        yield url


def short_lived(auth_server: AuthServer, url: str, client: str, seconds: int = 6) -> tuple[str, float]:
    """A token of `client` that expires (leeway included) within `seconds`, and when it is refused."""
    key = auth_server.keys[0]
    claims = _claims_of(auth_server.token(client, url, "tools:read"))
    exp = int(time.time()) - LEEWAY + seconds
    return _mint(key, {**claims, "exp": exp}, kid=key["kid"]), exp + LEEWAY + 1.0


def wait_until(moment: float) -> None:
    time.sleep(max(0.0, moment - time.time()) + 0.2)


def expired_refusal(r: httpx.Response, url: str) -> None:
    assert r.status_code == 401, r.text
    assert r.headers["www-authenticate"] == f'Bearer error="invalid_token", resource_metadata="{prm_url(url)}"'
    assert r.json() == {"jsonrpc": "2.0", "error": {"code": -32600, "message": "Invalid access token: expired"}}


def modern(url: str, method: str, params: dict[str, Any], token: str, caps: dict[str, Any] | None = None,
           rid: int = 1) -> httpx.Response:
    meta = {"io.modelcontextprotocol/protocolVersion": PV, "io.modelcontextprotocol/clientCapabilities": caps or {}}
    headers = {"content-type": "application/json", "accept": ACCEPT, "mcp-protocol-version": PV,
               "mcp-method": method, "authorization": f"Bearer {token}"}
    named = params.get("name", params.get("taskId"))  # what Mcp-Name mirrors for this method
    if named is not None:
        headers["mcp-name"] = named
    body = {"jsonrpc": "2.0", "id": rid, "method": method, "params": {**params, "_meta": meta}}
    return httpx.post(url, content=orjson.dumps(body), headers=headers, timeout=15)


# ------------------------------------------------------------------------------ MRTR
def test_expiry_between_two_mrtr_rounds(server: str, auth_server: AuthServer) -> None:
    token, refused_from = short_lived(auth_server, server, "full")
    caps = {"elicitation": {}}
    first = modern(server, "tools/call", {"name": "ask_name", "arguments": {}}, token, caps)
    assert time.time() < refused_from - 1, "the first round took the whole validity window"
    assert first.status_code == 200, first.text
    result = first.json()["result"]
    assert result["resultType"] == "input_required" and set(result["inputRequests"]) == {"name"}
    retry = {"name": "ask_name", "arguments": {}, "requestState": result["requestState"],
             "inputResponses": {"name": {"action": "accept", "content": {"name": "Ada"}}}}

    wait_until(refused_from)
    expired_refusal(modern(server, "tools/call", retry, token, caps, rid=2), server)

    # another principal cannot resume it, even with a valid token of its own, and is answered byte for byte
    # as for a requestState that was never issued (nothing says it exists for someone else)
    reader = auth_server.token("reader", server, "tools:read")
    other = modern(server, "tools/call", retry, reader, caps, rid=3)
    never = modern(server, "tools/call", {**retry, "requestState": "v1.k1.e30.x"}, reader, caps, rid=3)
    assert other.status_code == never.status_code == 400, other.text
    assert other.content == never.content
    assert other.json() == {"jsonrpc": "2.0", "id": 3,
                            "error": {"code": -32602, "message": "requestState is not valid"}}

    # the same principal with a renewed token finishes the round: the state is bound to who, not to a token
    renewed = modern(server, "tools/call", retry, auth_server.token("full", server, "tools:read"), caps, rid=4)
    assert renewed.status_code == 200, renewed.text
    assert renewed.json()["result"]["content"] == [{"type": "text", "text": "Hello, Ada"}]


# ------------------------------------------------------------------------------ tasks
def test_another_principals_task_is_unknown_and_an_expired_token_is_refused(server: str,
                                                                             auth_server: AuthServer) -> None:
    owner = auth_server.token("full", server, "tools:read")
    created = modern(server, "tools/call", {"name": "slow", "arguments": {"seconds": 0.2}}, owner, TASKS)
    assert created.status_code == 200, created.text
    tid = created.json()["result"]["taskId"]

    reader = auth_server.token("reader", server, "tools:read")
    made_up = tid[:-4] + ("AAAA" if not tid.endswith("AAAA") else "BBBB")
    for method in ("tasks/get", "tasks/cancel"):
        theirs = modern(server, method, {"taskId": tid}, reader, TASKS, rid=5)
        never = modern(server, method, {"taskId": made_up}, reader, TASKS, rid=5)
        assert theirs.status_code == never.status_code == 400
        assert theirs.json() == {"jsonrpc": "2.0", "id": 5, "error": {
            "code": -32602, "message": f"Unknown or expired task: {tid}", "data": {"taskId": tid}}}
        assert theirs.text.replace(tid, made_up) == never.text  # nothing tells them it exists

    # the owner still sees it (the other principal's cancel did nothing)
    deadline = time.monotonic() + 10
    while True:
        got = modern(server, "tasks/get", {"taskId": tid}, owner, TASKS).json()["result"]
        if got["status"] == "completed":
            break
        assert got["status"] == "working" and time.monotonic() < deadline, got
        time.sleep(0.05)
    assert got["result"]["content"] == [{"type": "text", "text": "slept 0.2"}]

    short, refused_from = short_lived(auth_server, server, "full")
    assert modern(server, "tasks/get", {"taskId": tid}, short, TASKS).status_code == 200
    wait_until(refused_from)
    expired_refusal(modern(server, "tasks/get", {"taskId": tid}, short, TASKS), server)


# ------------------------------------------------------------------------------ legacy sessions
def legacy(url: str, body: dict[str, Any], token: str, sid: str | None = None) -> httpx.Response:
    headers = {"accept": ACCEPT, "authorization": f"Bearer {token}"}
    if sid is not None:
        headers |= {"mcp-session-id": sid, "mcp-protocol-version": LEGACY}
    return httpx.post(url, json=body, headers=headers, timeout=15)


def open_session(url: str, token: str, caps: dict[str, Any] | None = None) -> str:
    r = legacy(url, {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": LEGACY, "capabilities": caps or {}, "clientInfo": {"name": "t", "version": "0"}}}, token)
    assert r.status_code == 200, r.text
    sid = r.headers["mcp-session-id"]
    assert legacy(url, {"jsonrpc": "2.0", "method": "notifications/initialized"}, token, sid).status_code == 202
    return sid


PING = {"jsonrpc": "2.0", "id": 1, "method": "ping"}


def test_a_token_expiring_during_a_legacy_session(server: str, auth_server: AuthServer) -> None:
    token, refused_from = short_lived(auth_server, server, "full")
    sid = open_session(server, token)
    assert legacy(server, PING, token, sid).json() == {"jsonrpc": "2.0", "id": 1, "result": {}}
    assert time.time() < refused_from - 1, "opening the session took the whole validity window"

    wait_until(refused_from)
    expired_refusal(legacy(server, PING, token, sid), server)
    r = httpx.get(server, headers={"accept": "text/event-stream", "mcp-session-id": sid,
                                   "mcp-protocol-version": LEGACY, "authorization": f"Bearer {token}"})
    expired_refusal(r, server)  # the GET stream is authorized too
    r = httpx.delete(server, headers={"mcp-session-id": sid, "mcp-protocol-version": LEGACY,
                                      "authorization": f"Bearer {token}"})
    expired_refusal(r, server)

    # the session is bound to the principal, not to one token: a renewed token carries on with it
    renewed = auth_server.token("full", server, "tools:read")
    r = legacy(server, {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                        "params": {"name": "whoami", "arguments": {}}}, renewed, sid)
    assert r.status_code == 200, r.text
    assert _last_message(r)["result"]["structuredContent"] == {"id": f"{auth_server.issuer}#full"}


def test_another_principals_legacy_session_is_unknown(server: str, auth_server: AuthServer) -> None:
    owner = auth_server.token("full", server, "tools:read")
    sid = open_session(server, owner)
    thief = auth_server.token("reader", server, "tools:read")
    stolen = legacy(server, PING, thief, sid)
    forged = legacy(server, PING, thief, sid[:-4] + ("AAAA" if not sid.endswith("AAAA") else "BBBB"))
    assert stolen.status_code == forged.status_code == 404
    assert stolen.json()["error"]["code"] == forged.json()["error"]["code"] == -32001
    assert stolen.json() == forged.json()  # answered exactly like a session that never existed
    gone = {"mcp-session-id": sid, "mcp-protocol-version": LEGACY, "authorization": f"Bearer {thief}"}
    assert httpx.get(server, headers={**gone, "accept": "text/event-stream"}).status_code == 404
    assert httpx.delete(server, headers=gone).status_code == 404
    # ... and the owner's session is untouched by all of that
    assert legacy(server, PING, owner, sid).json() == {"jsonrpc": "2.0", "id": 1, "result": {}}


def test_a_legacy_elicitation_answer_is_authorized_too(server: str, auth_server: AuthServer) -> None:
    """The server->client request of a legacy call is answered by another POST: an expired token cannot
    deliver the answer, another principal cannot, a renewed token of the owner can."""
    token, refused_from = short_lived(auth_server, server, "full", seconds=8)
    sid = open_session(server, token, {"elicitation": {}})
    call = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "ask_name", "arguments": {}}}
    headers = {"accept": ACCEPT, "authorization": f"Bearer {token}", "mcp-session-id": sid,
               "mcp-protocol-version": LEGACY}
    statuses: list[int] = []
    final: dict[str, Any] | None = None
    with httpx.stream("POST", server, json=call, headers=headers, timeout=30) as stream:
        assert stream.status_code == 200
        for line in stream.iter_lines():
            if not line.startswith("data:") or not line[5:].strip():
                continue
            m = json.loads(line[5:])
            if m.get("method") == "elicitation/create":
                answer = {"jsonrpc": "2.0", "id": m["id"], "result": {"action": "accept", "content": {"name": "Bo"}}}
                wait_until(refused_from)
                late = legacy(server, answer, token, sid)
                expired_refusal(late, server)
                statuses.append(late.status_code)
                other = legacy(server, answer, auth_server.token("reader", server, "tools:read"), sid)
                statuses.append(other.status_code)
                ok = legacy(server, answer, auth_server.token("full", server, "tools:read"), sid)
                statuses.append(ok.status_code)
            elif m.get("id") == 7:
                final = m
                break
    assert statuses == [401, 404, 202]
    assert final is not None and final["result"]["content"] == [{"type": "text", "text": "Hello, Bo"}]


def _last_message(r: httpx.Response) -> dict[str, Any]:
    if r.headers["content-type"].startswith("application/json"):
        got: dict[str, Any] = r.json()
        return got
    messages = [json.loads(line[5:]) for line in r.text.splitlines() if line.startswith("data:") and line[5:].strip()]
    return dict(messages[-1])


# ------------------------------------------------------------------------------ long-lived streams
def _open_until_end(method: str, url: str, headers: dict[str, str], body: dict[str, Any] | None,
                    refused_from: float) -> tuple[list[dict[str, Any]], float]:
    """Read a stream until the server ends it; its messages and when it ended. A stream still silent 4 s
    after its token is refused fails with a read timeout (keep-alives come every 15 s)."""
    seen: list[dict[str, Any]] = []
    wait = refused_from - time.time() + 4
    kw: dict[str, Any] = {"headers": headers, "timeout": httpx.Timeout(5, read=wait)}
    if body is not None:
        kw["content"] = orjson.dumps(body)
    with httpx.stream(method, url, **kw) as stream:
        assert stream.status_code == 200, stream.read()
        for line in stream.iter_lines():
            if line.startswith("data:") and line[5:].strip():
                seen.append(json.loads(line[5:]))
    return seen, time.time()


def test_a_listen_stream_ends_when_its_token_expires(server: str, auth_server: AuthServer) -> None:
    """A stream is one request: it would otherwise outlive the token that opened it for hours."""
    token, refused_from = short_lived(auth_server, server, "full")
    meta = {"io.modelcontextprotocol/protocolVersion": PV, "io.modelcontextprotocol/clientCapabilities": {}}
    listen = {"jsonrpc": "2.0", "id": "L", "method": "subscriptions/listen",
              "params": {"notifications": {"toolsListChanged": True}, "_meta": meta}}
    headers = {"content-type": "application/json", "accept": ACCEPT, "mcp-protocol-version": PV,
               "mcp-method": "subscriptions/listen", "authorization": f"Bearer {token}"}
    seen, ended = _open_until_end("POST", server, headers, listen, refused_from)
    assert [m["method"] for m in seen] == ["notifications/subscriptions/acknowledged"]
    # ended by the expiry (the token is refused from `refused_from - 1`), not before it, nor long after
    assert refused_from - 1.5 <= ended <= refused_from + 3, (ended, refused_from)
    expired_refusal(modern(server, "tools/list", {}, token), server)  # and it cannot be reopened


def test_a_legacy_get_stream_ends_when_its_token_expires(server: str, auth_server: AuthServer) -> None:
    token, refused_from = short_lived(auth_server, server, "full")
    sid = open_session(server, token)
    headers = {"accept": "text/event-stream", "mcp-session-id": sid, "mcp-protocol-version": LEGACY,
               "authorization": f"Bearer {token}"}
    _, ended = _open_until_end("GET", server, headers, None, refused_from)
    assert refused_from - 1.5 <= ended <= refused_from + 3, (ended, refused_from)
    # the session itself lives on for the same principal with a renewed token
    renewed = auth_server.token("full", server, "tools:read")
    assert legacy(server, PING, renewed, sid).json() == {"jsonrpc": "2.0", "id": 1, "result": {}}


def test_an_http_sse_stream_ends_when_its_token_expires(auth_server: AuthServer) -> None:
    """The 2024-11-05 transport's GET stream carries every answer of its channel: it ends with its token."""
    with protected([auth_server.issuer], "--legacy-sse", app=APP) as url:
        token, refused_from = short_lived(auth_server, url, "full")
        headers = {"accept": "text/event-stream", "authorization": f"Bearer {token}"}
        lines: list[str] = []
        with httpx.stream("GET", url, headers=headers,
                          timeout=httpx.Timeout(5, read=refused_from - time.time() + 4)) as stream:
            assert stream.status_code == 200
            for line in stream.iter_lines():
                lines.append(line)
        ended = time.time()
        assert lines[0] == "event: endpoint" and lines[1].startswith("data: /mcp?")
        assert refused_from - 1.5 <= ended <= refused_from + 3, (ended, refused_from)
