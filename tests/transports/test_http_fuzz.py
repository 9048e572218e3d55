"""Hypothesis feeds the HTTP endpoint (in-process ASGI) and the sans-IO core arbitrary bytes, JSON and headers:
every answer is a well-formed JSON-RPC error or result with the right status; nothing crashes or hangs."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import httpx
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers import PV, parse_sse, rpc, validate_message
from mcp_stateless import App, Context, HttpTransport
from mcp_stateless.protocol import errors
from mcp_stateless.protocol.envelope import Notification, Rejection, Request, classify

METHODS = [
    "server/discover",
    "tools/list",
    "tools/call",
    "prompts/list",
    "prompts/get",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "completion/complete",
    "subscriptions/listen",
    "initialize",
    "ping",
    "notifications/cancelled",
    "tasks/get",
    "",
]

fuzz_app = App("fuzz", listen_keepalive_s=0.05)


@fuzz_app.tool()
def echo(text: str, n: int = 1) -> str:
    return text * max(0, min(n, 3))


@fuzz_app.tool(input_schema={"type": "object", "properties": {"region": {"type": "string", "x-mcp-header": "Region"}}})
def regional(region: str = "") -> str:
    return region


@fuzz_app.tool()
async def ask(ctx: Context) -> str:
    got = ctx.elicit("name?", {"type": "object", "properties": {"name": {"type": "string"}}}, key="n")
    await ctx.report_progress(1)
    await ctx.log("info", "asked")
    return str(got.content)


@fuzz_app.prompt()
def hello(who: str) -> str:
    return f"hello {who}"


@fuzz_app.resource("mem://a", description="a")
def res_a() -> str:
    return "a"


@fuzz_app.completion(prompt="hello")
def complete(argument: str, value: str, context: dict[str, str]) -> list[str]:
    return [value + "!"]


# --------------------------------------------------------------------------- strategies
json_scalars = (
    st.none() | st.booleans() | st.integers(-(2**63), 2**63) | st.floats(allow_nan=False) | st.text(max_size=20)
)
json_values = st.recursive(
    json_scalars,
    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=10), kids, max_size=4),
    max_leaves=12,
)

meta = st.fixed_dictionaries(
    {},
    optional={
        "io.modelcontextprotocol/protocolVersion": st.sampled_from([PV, "2025-11-25", "v999", ""]) | json_scalars,
        "io.modelcontextprotocol/clientCapabilities": st.just({}) | st.just({"elicitation": {}}) | json_values,
        "io.modelcontextprotocol/logLevel": st.sampled_from(["debug", "error", "nope"]) | json_scalars,
        # integers the test can encode at all (orjson: 64 bits); hypothesis found one just below
        "progressToken": st.integers(-(2**63), 2**64 - 1) | st.text(max_size=5) | json_scalars,
        "io.modelcontextprotocol/clientInfo": st.just({"name": "f", "version": "1"}) | json_scalars,
    },
)
params = st.fixed_dictionaries(
    {},
    optional={
        "_meta": meta,
        "name": st.sampled_from(["echo", "regional", "ask", "hello", "nope"]) | json_scalars,
        "uri": st.sampled_from(["mem://a", "mem://b"]) | json_scalars,
        "arguments": st.dictionaries(st.sampled_from(["text", "n", "region", "who"]), json_values, max_size=3)
        | json_values,
        "cursor": st.text(max_size=12) | json_scalars,
        "requestState": st.text(max_size=30) | json_scalars,
        "inputResponses": st.just({"n": {"action": "accept", "content": {"name": "x"}}}) | json_values,
        "notifications": st.just({"toolsListChanged": True}) | json_values,
        "ref": st.just({"type": "ref/prompt", "name": "hello"}) | json_values,
        "argument": st.just({"name": "who", "value": "a"}) | json_values,
    },
)
messages = st.fixed_dictionaries(
    {"jsonrpc": st.just("2.0") | json_scalars},
    optional={
        "id": st.integers(-5, 10**12) | st.text(max_size=8) | json_scalars,
        "method": st.sampled_from(METHODS) | json_scalars,
        "params": params | json_values,
        "result": json_values,
    },
)
header_names = st.sampled_from(
    [
        "mcp-protocol-version",
        "mcp-method",
        "mcp-name",
        "mcp-param-region",
        "origin",
        "host",
        "accept",
        "content-type",
        "mcp-session-id",
        "x-other",
        "authorization",
    ]
)
header_values = st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=40) | st.sampled_from(
    [
        PV,
        "tools/call",
        "echo",
        "=?base64?ZWNobw==?=",
        "=?base64?@@?=",
        "application/json",
        "*/*",
        "text/event-stream",
        "http://evil.example",
        "127.0.0.1",
        "evil.example",
    ]
)
headers = st.dictionaries(header_names, header_values, max_size=6)

SPECIAL_STATUS = {403, 405, 406, 413, 415}


def mirrored(msg: Any) -> dict[str, str]:
    """Headers that mostly match the body, so the fuzz also reaches dispatch."""
    h = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
    if isinstance(msg, dict):
        p = msg.get("params")
        m = p.get("_meta") if isinstance(p, dict) else None
        v = m.get("io.modelcontextprotocol/protocolVersion") if isinstance(m, dict) else None
        if isinstance(v, str) and v.isascii() and v.isprintable():
            h["mcp-protocol-version"] = v
        if isinstance(msg.get("method"), str) and msg["method"].isascii() and msg["method"].isprintable():
            h["mcp-method"] = msg["method"]
        if isinstance(p, dict):
            for key in ("name", "uri"):
                if isinstance(p.get(key), str) and p[key].isascii() and p[key].isprintable():
                    h["mcp-name"] = p[key]
    return h


# --------------------------------------------------------------------------- the checks
@pytest.fixture(scope="module")
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    lp = asyncio.new_event_loop()
    yield lp
    lp.close()


fuzz_transport = HttpTransport(fuzz_app, max_body=4096)


@pytest.fixture(scope="module")
def client(loop: asyncio.AbstractEventLoop) -> Iterator[httpx.AsyncClient]:
    c = httpx.AsyncClient(transport=httpx.ASGITransport(fuzz_transport), base_url="http://127.0.0.1:8000", timeout=5)
    yield c
    loop.run_until_complete(c.aclose())


async def listen_until_first_event(content: bytes, hdrs: dict[str, str]) -> httpx.Response:
    """POST a listen straight to the ASGI app and hang up after the first complete SSE event (a listen that
    the server accepts never ends by itself; httpx's ASGI transport would wait for the whole body)."""
    hung_up = asyncio.Event()
    first_event = asyncio.Event()
    request_sent = False
    status = 0
    response_headers: list[tuple[bytes, bytes]] = []
    body = bytearray()

    async def receive() -> dict[str, Any]:
        nonlocal request_sent
        if not request_sent:
            request_sent = True
            return {"type": "http.request", "body": content, "more_body": False}
        await hung_up.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]
            response_headers.extend(message.get("headers", []))
        elif message["type"] == "http.response.body":
            body.extend(message.get("body", b""))
            if b"\n\n" in body or not message.get("more_body", False):
                first_event.set()

    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http",
        "path": "/mcp", "raw_path": b"/mcp", "root_path": "", "query_string": b"",
        "headers": [(b"host", b"127.0.0.1:8000"), *((k.lower().encode("latin-1"), v.encode("latin-1"))
                                                     for k, v in hdrs.items())],
        "client": ("127.0.0.1", 50000), "server": ("127.0.0.1", 8000),
    }
    app = asyncio.ensure_future(fuzz_transport(scope, receive, send))
    try:
        async with asyncio.timeout(5):
            await first_event.wait()
    finally:
        hung_up.set()
        async with asyncio.timeout(5):
            await app
    return httpx.Response(status, headers=response_headers, content=bytes(body))


def check_reply(r: httpx.Response, method: Any) -> None:
    method = method if isinstance(method, str) else None
    ctype = r.headers.get("content-type", "")
    if r.status_code == 202:
        assert r.content == b""
        return
    if r.status_code == 404 and ctype.startswith("text/plain"):
        return  # wrong path only
    if ctype.startswith("text/event-stream"):
        assert r.status_code == 200
        text = r.text
        msgs = [orjson.loads(line[6:]) for line in text.split("\n") if line.startswith("data: ")]
        assert msgs, text
        for m in msgs:
            validate_message(m, method)
        return
    assert ctype.startswith("application/json"), (r.status_code, r.headers, r.content[:200])
    body = orjson.loads(r.content)
    validate_message(body, method)
    if "error" in body:
        code = body["error"]["code"]
        if r.status_code in SPECIAL_STATUS:
            assert code == errors.INVALID_REQUEST
        else:
            assert r.status_code == errors.http_status_for(code), (r.status_code, body)
    else:
        assert r.status_code == 200
        assert "resultType" in body["result"]


def post(
    loop: asyncio.AbstractEventLoop, client: httpx.AsyncClient, content: bytes, hdrs: dict[str, str], method: Any
) -> httpx.Response:
    async def go() -> httpx.Response:
        if method == "subscriptions/listen":
            r = await listen_until_first_event(content, hdrs)
        else:
            async with asyncio.timeout(5):
                r = await client.post("/mcp", content=content, headers=hdrs)
        check_reply(r, method)
        return r

    return loop.run_until_complete(go())


def test_an_accepted_listen_is_checked_too(loop: asyncio.AbstractEventLoop, client: httpx.AsyncClient) -> None:
    msg = rpc("subscriptions/listen", {"notifications": {"toolsListChanged": True}}, id="L")
    r = post(loop, client, orjson.dumps(msg), mirrored(msg), "subscriptions/listen")
    assert (r.status_code, r.headers["content-type"].split(";")[0]) == (200, "text/event-stream")
    messages, _ = parse_sse(r.text)
    assert [m["method"] for m in messages] == ["notifications/subscriptions/acknowledged"]


FUZZ = settings(
    max_examples=120,
    deadline=timedelta(seconds=3),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


@FUZZ
@given(body=st.binary(max_size=300), hdrs=headers)
def test_http_arbitrary_bytes(
    loop: asyncio.AbstractEventLoop, client: httpx.AsyncClient, body: bytes, hdrs: dict[str, str]
) -> None:
    post(loop, client, body, hdrs, None)


@FUZZ
@given(msg=messages, extra=headers, use_mirror=st.booleans())
def test_http_arbitrary_json(
    loop: asyncio.AbstractEventLoop,
    client: httpx.AsyncClient,
    msg: dict[str, Any],
    extra: dict[str, str],
    use_mirror: bool,
) -> None:
    hdrs = {**mirrored(msg), **extra} if use_mirror else extra
    post(loop, client, orjson.dumps(msg), hdrs, msg.get("method"))


@FUZZ
@given(value=json_values, hdrs=headers)
def test_http_arbitrary_json_values(
    loop: asyncio.AbstractEventLoop, client: httpx.AsyncClient, value: Any, hdrs: dict[str, str]
) -> None:
    post(loop, client, orjson.dumps(value), {"content-type": "application/json", **hdrs}, None)


@settings(max_examples=400, deadline=timedelta(milliseconds=500))
@given(msg=messages | json_values, hdrs=st.none() | headers)
def test_core_classify_never_raises(msg: Any, hdrs: dict[str, str] | None) -> None:
    d = classify(msg, hdrs, fuzz_app.table)
    assert isinstance(d, Request | Notification | Rejection)
    if isinstance(d, Rejection):
        assert d.error is not None
        assert d.status == errors.http_status_for(d.error.code)
        body = d.body()
        assert body is not None
        validate_message(body)
    elif isinstance(d, Request):
        assert isinstance(d.id, str | int) and not isinstance(d.id, bool)
        assert d.version == PV and isinstance(d.capabilities, dict)
