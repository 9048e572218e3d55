"""`--legacy-until DATE`: the retirement policy (pure, a function of now) and what the transports do with it.

Before the date every legacy response carries `Deprecation` (RFC 9745, `@<epoch>`) and `Sunset` (RFC 8594,
an HTTP-date) and modern responses carry neither; after it, legacy exchanges get HTTP 410 with `-32022` naming
the modern versions (stdio: the same JSON-RPC error) while modern traffic is served as before.
"""

from __future__ import annotations

import json
import os
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest
from test_legacy_http import KEYS, init_msg, msg, serve

from mcp_stateless.protocol import retirement
from mcp_stateless.protocol.meta import META_CLIENT_CAPABILITIES, META_PROTOCOL_VERSION
from services import CLI
from sse_stream import SseStream

ROOT = Path(__file__).resolve().parents[2]
APP = "tests/legacy/legacy_app.py:app"
FUTURE, PAST = "2099-01-31", "2020-06-01T12:00:00Z"
SSE_JSON = "application/json, text/event-stream"
MODERN = "2026-07-28"


# ---------------------------------------------------------------------- the pure policy
def test_parse_accepts_a_date_or_a_date_time() -> None:
    assert retirement.parse("2027-01-31").sunset == datetime(2027, 1, 31, tzinfo=UTC)
    assert retirement.parse("2027-01-31T12:30:00Z").sunset == datetime(2027, 1, 31, 12, 30, tzinfo=UTC)
    assert retirement.parse("2027-01-31T12:30:00+02:00").sunset == datetime(2027, 1, 31, 10, 30, tzinfo=UTC)
    assert retirement.parse("2027-01-31T12:30:00").sunset == datetime(2027, 1, 31, 12, 30, tzinfo=UTC)
    for bad in ("", "tomorrow", "2027-13-01", "31/01/2027"):
        with pytest.raises(ValueError, match="expected a date"):
            retirement.parse(bad)


def test_headers_are_the_rfc_forms() -> None:
    r = retirement.parse("2027-01-31")
    # Deprecated since the modern revision (2026-07-28 00:00 UTC), sunset at the configured date.
    assert r.headers() == (("deprecation", "@1785196800"), ("sunset", "Sun, 31 Jan 2027 00:00:00 GMT"))
    early = retirement.parse("2026-03-01")  # a sunset before the modern revision: deprecation never later
    assert early.headers() == (("deprecation", "@1772323200"), ("sunset", "Sun, 01 Mar 2026 00:00:00 GMT"))


def test_retired_is_a_function_of_now() -> None:
    r = retirement.parse("2027-01-31")
    edge = datetime(2027, 1, 31, tzinfo=UTC).timestamp()
    assert not r.retired(edge - 0.001)
    assert r.retired(edge)
    assert r.retired(edge + 86400)


def test_the_refusal_names_the_modern_versions() -> None:
    refusal = retirement.parse("2027-01-31").refusal(7, (MODERN,), "2025-06-18")
    assert refusal.status == 410
    assert refusal.body() == {"jsonrpc": "2.0", "id": 7, "error": {
        "code": -32022,
        "message": "Unsupported protocol version: this server stopped serving the 2025 revisions on 2027-01-31; "
                   "use 2026-07-28",
        "data": {"supported": [MODERN], "requested": "2025-06-18", "retiredAt": "2027-01-31T00:00:00Z"}}}


# ---------------------------------------------------------------------- at the HTTP boundary
def discover() -> dict[str, object]:
    return msg("server/discover", {"_meta": {META_PROTOCOL_VERSION: MODERN, META_CLIENT_CAPABILITIES: {}}}, 9)


def modern_headers() -> dict[str, str]:
    return {"accept": SSE_JSON, "mcp-protocol-version": MODERN, "mcp-method": "server/discover"}


@pytest.mark.slow
def test_before_the_date_legacy_responses_say_so_and_modern_ones_do_not() -> None:
    with serve("--legacy-until", FUTURE, "--legacy-sse", state="memory://") as url:
        init = httpx.post(url, json=init_msg(), headers={"accept": SSE_JSON})
        assert init.status_code == 200
        assert init.headers["deprecation"] == "@1785196800"
        assert init.headers["sunset"] == "Sat, 31 Jan 2099 00:00:00 GMT"
        sid = init.headers["mcp-session-id"]
        session = {"accept": SSE_JSON, "mcp-session-id": sid, "mcp-protocol-version": "2025-11-25"}
        listed = httpx.post(url, json=msg("tools/list", {}, 2), headers=session)
        assert listed.status_code == 200 and listed.headers["sunset"] == "Sat, 31 Jan 2099 00:00:00 GMT"
        called = httpx.post(url, json=msg("tools/call", {"name": "greet", "arguments": {"name": "A"}}, 3),
                            headers=session)
        assert called.headers["content-type"] == "application/json" and "deprecation" in called.headers
        # A call that sends notifications is answered as a stream: its headers say so as well.
        streamed = httpx.post(url, json=msg("tools/call", {"name": "chatty", "arguments": {},
                                                           "_meta": {"progressToken": "p"}}, 5), headers=session)
        assert streamed.headers["content-type"] == "text/event-stream" and "deprecation" in streamed.headers
        gone = httpx.delete(url, headers=session)
        assert gone.status_code == 200 and "sunset" in gone.headers
        stream = SseStream(url)
        try:
            assert stream.response is not None and stream.response.headers["deprecation"] == "@1785196800"
            post = httpx.post(stream.post_url(), json=msg("ping", {}, 4))  # before initialize: answered on the stream
            assert post.status_code == 202 and post.headers["sunset"] == "Sat, 31 Jan 2099 00:00:00 GMT"
        finally:
            stream.close()
        modern = httpx.post(url, json=discover(), headers=modern_headers())
        assert modern.status_code == 200 and "result" in modern.json()
        assert "deprecation" not in modern.headers and "sunset" not in modern.headers


@pytest.mark.slow
def test_after_the_date_legacy_is_refused_and_modern_is_served() -> None:
    with serve("--legacy-until", PAST, "--legacy-sse", state="memory://") as url:
        init = httpx.post(url, json=init_msg("2025-06-18"), headers={"accept": SSE_JSON})
        assert init.status_code == 410
        body = init.json()
        assert body["id"] == 0 and body["error"]["code"] == -32022
        assert body["error"]["data"] == {"supported": [MODERN], "requested": "2025-06-18",
                                         "retiredAt": "2020-06-01T12:00:00Z"}
        assert "mcp-session-id" not in init.headers
        # A session id issued before the date (any well-formed one) is refused the same way.
        for method in ("GET", "DELETE"):
            r = httpx.request(method, url, headers={"accept": "text/event-stream", "mcp-session-id": "s1.k1.x",
                                                    "mcp-protocol-version": "2025-11-25"})
            assert r.status_code == 410 and r.json()["error"]["code"] == -32022
            assert r.json()["error"]["data"]["requested"] == "2025-11-25"
        sse = httpx.get(url, headers={"accept": "text/event-stream"})
        assert sse.status_code == 410 and sse.json()["error"]["code"] == -32022
        modern = httpx.post(url, json=discover(), headers=modern_headers())
        assert modern.status_code == 200 and modern.json()["result"]["supportedVersions"] == [MODERN]


@pytest.mark.slow
def test_stdio_after_the_date_refuses_every_legacy_request() -> None:
    lines = [init_msg(), {"jsonrpc": "2.0", "method": "notifications/initialized"}, msg("tools/list", {}, 1)]
    done = subprocess.run([CLI, "serve", APP, "--stdio", "--state", "memory://"],
                          input="".join(json.dumps(m) + "\n" for m in lines), capture_output=True, text=True,
                          timeout=60, cwd=ROOT, env={**os.environ, "MCP_STATELESS_LEGACY_UNTIL": PAST})
    assert done.returncode == 0, done.stderr
    out = [json.loads(line) for line in done.stdout.splitlines()]
    assert [(m["id"], m["error"]["code"]) for m in out] == [(0, -32022), (1, -32022)]
    assert out[0]["error"]["data"]["supported"] == [MODERN]


@pytest.mark.slow
def test_stdio_before_the_date_serves_legacy() -> None:
    done = subprocess.run([CLI, "serve", APP, "--stdio", "--state", "memory://", "--legacy-until", FUTURE],
                          input=json.dumps(init_msg()) + "\n", capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert json.loads(done.stdout.splitlines()[0])["result"]["protocolVersion"] == "2025-11-25"


@pytest.mark.slow
def test_a_bad_date_is_a_usage_error() -> None:
    for argv, env in (([ "--legacy-until", "soon"], {}), ([], {"MCP_STATELESS_LEGACY_UNTIL": "31.01.2027"})):
        done = subprocess.run([CLI, "serve", APP, "--http", "127.0.0.1:1", *argv], capture_output=True, text=True,
                              timeout=30, cwd=ROOT, env={**os.environ, **env, "MCP_STATELESS_KEYS": KEYS})
        assert done.returncode == 2
        assert "--legacy-until: expected a date (2027-01-31) or an ISO 8601 date-time" in done.stderr
