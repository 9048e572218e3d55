"""The HTTP status table (spec plus official SDK rows), row by row, through the ASGI transport:
HTTP status, JSON-RPC code, echoed id."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from helpers import PV, Driver, headers_for, rpc
from mcp_stateless import App, Context

app = App("table", "1.0.0")


@app.tool()
def echo(text: str) -> str:
    return text


@app.tool(
    input_schema={
        "type": "object",
        "properties": {"region": {"type": "string", "x-mcp-header": "Region"}},
        "required": ["region"],
    }
)
def regional(region: str) -> str:
    return f"Region: {region}"


@app.tool()
def needs_sampling(ctx: Context) -> str:
    ctx.require_capability({"sampling": {}})
    return "sampled"


@app.tool()
def crash() -> str:
    raise RuntimeError("boom")


@pytest.fixture
async def d() -> Any:
    async with Driver(app) as drv:
        yield drv


def check(reply: Any, status: int, code: int, id_: Any) -> dict[str, Any]:
    assert reply.status == status, (reply.status, reply.response.text)
    assert reply.headers["content-type"] == "application/json"
    body = reply.body
    assert body["jsonrpc"] == "2.0"
    assert body["error"]["code"] == code, body
    if id_ is None:
        assert "id" not in body or body["id"] is None
    else:
        assert body["id"] == id_ and type(body["id"]) is type(id_)
    e: dict[str, Any] = body["error"]
    return e


@pytest.mark.parametrize(
    ("host", "origin"),
    [
        ("evil.example.com", "http://evil.example.com"),
        ("127.0.0.1:8000", "http://evil.example.com"),
        ("evil.example.com", None),
    ],
)
async def test_origin_or_host_not_allowed_is_403(d: Driver, host: str, origin: str | None) -> None:
    msg = rpc("server/discover", id=1)
    h = headers_for(msg, host=host, origin=origin)
    r = await d.send(msg, h)
    assert r.status == 403
    assert "id" not in r.body or r.body["id"] is None  # no id: validation happens before the body is read


async def test_allowed_origin_passes(d: Driver) -> None:
    msg = rpc("server/discover", id=1)
    r = await d.send(msg, headers_for(msg, origin="http://localhost:5173"))
    assert r.status == 200 and r.result["resultType"] == "complete"


async def test_missing_meta_is_400_invalid_params(d: Driver) -> None:
    msg = {"jsonrpc": "2.0", "id": 42, "method": "tools/list", "params": {}}
    e = check(await d.send(msg, headers_for(msg, mcp_protocol_version=PV)), 400, -32602, 42)
    assert e["message"] == "params._meta is missing"
    msg = {
        "jsonrpc": "2.0",
        "id": "s42",
        "method": "tools/list",
        "params": {"_meta": {"io.modelcontextprotocol/protocolVersion": PV}},
    }
    e = check(await d.send(msg, headers_for(msg)), 400, -32602, "s42")
    assert e["message"] == "params._meta is missing io.modelcontextprotocol/clientCapabilities"


@pytest.mark.parametrize(
    ("method", "params", "overrides"),
    [
        ("tools/list", {}, {"mcp_protocol_version": None}),
        ("tools/list", {}, {"mcp_protocol_version": "2025-06-18"}),
        ("tools/list", {}, {"mcp_method": None}),
        ("tools/list", {}, {"mcp_method": "TOOLS/LIST"}),
        ("tools/list", {}, {"mcp_method": "tools/call"}),
        ("tools/call", {"name": "echo", "arguments": {"text": "a"}}, {"mcp_name": None}),
        ("tools/call", {"name": "echo", "arguments": {"text": "a"}}, {"mcp_name": "ECHO"}),
        ("tools/call", {"name": "echo", "arguments": {"text": "a"}}, {"mcp_name": "=?base64?ZWNobw?="}),
        ("tools/call", {"name": "regional", "arguments": {"region": "eu"}}, {}),
        ("tools/call", {"name": "regional", "arguments": {"region": "eu"}}, {"mcp_param_region": "us"}),
        (
            "tools/call",
            {"name": "regional", "arguments": {"region": "eu"}},
            {"mcp_param_region": "=?base64?ZXU?="},
        ),
        (
            "tools/call",
            {"name": "regional", "arguments": {"region": "eu"}},
            {"mcp_param_region": "=?base64?ZX*=?="},
        ),
        ("resources/read", {"uri": "x://a"}, {"mcp_name": "x://b"}),
        ("prompts/get", {"name": "p"}, {"mcp_name": None}),
    ],
)
async def test_header_problems_are_400_header_mismatch(
    d: Driver, method: str, params: dict[str, Any], overrides: dict[str, str | None]
) -> None:
    msg = rpc(method, params, id=5)
    check(await d.send(msg, headers_for(msg, **overrides)), 400, -32020, 5)


async def test_param_header_accepted_plain_and_base64(d: Driver) -> None:
    for value, header in (("eu", "eu"), ("Grüße", "=?base64?R3LDvMOfZQ==?="), (" x ", "=?base64?IHgg?=")):
        r = await d.call(
            "tools/call",
            {"name": "regional", "arguments": {"region": value}},
            headers={"mcp_param_region": header},
        )
        assert r.status == 200
        assert r.result["content"] == [{"type": "text", "text": f"Region: {value}"}]


async def test_header_body_version_disagreement_is_a_mismatch(d: Driver) -> None:
    msg = rpc("tools/list", id=9, version="v999.0.0")
    check(await d.send(msg, headers_for(msg, mcp_protocol_version=PV)), 400, -32020, 9)


async def test_unsupported_version_is_400_with_data(d: Driver) -> None:
    msg = rpc("tools/list", id=9, version="v999.0.0")
    e = check(await d.send(msg, headers_for(msg)), 400, -32022, 9)
    assert e["data"] == {"supported": [PV], "requested": "v999.0.0"}


@pytest.mark.parametrize(
    "method",
    [
        "prompts/list",
        "prompts/get",
        "resources/list",
        "completion/complete",
        "ping",
        "logging/setLevel",
        "resources/subscribe",
        "nope",
    ],
)
async def test_unknown_or_unadvertised_method_is_404(d: Driver, method: str) -> None:
    params = {"name": "p"} if method == "prompts/get" else {}
    e = check(await d.call(method, params, id="m"), 404, -32601, "m")
    assert e["message"] == f"Method not found: {method}"


async def test_undeclared_client_capability_is_400(d: Driver) -> None:
    e = check(await d.call("tools/call", {"name": "needs_sampling"}, id=8), 400, -32021, 8)
    assert e["data"] == {"requiredCapabilities": {"sampling": {}}}
    ok = await d.call("tools/call", {"name": "needs_sampling"}, id=8, caps={"sampling": {}})
    assert ok.status == 200 and ok.result["content"][0]["text"] == "sampled"


async def test_notification_is_202_empty(d: Driver) -> None:
    for msg in (
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}},
        {"jsonrpc": "2.0", "method": "notifications/whatever"},
    ):
        r = await d.send(
            msg, {"content-type": "application/json", "accept": "application/json, text/event-stream"}
        )
        assert r.status == 202 and r.response.content == b""


async def test_notification_not_accepted_is_4xx_without_id(d: Driver) -> None:
    msg = {"jsonrpc": "1.0", "method": "notifications/cancelled"}
    r = await d.send(msg, headers_for(msg))
    assert r.status == 400
    assert "id" not in r.body or r.body["id"] is None


async def test_parse_error_batch_and_response_bodies(d: Driver) -> None:
    h = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
    check(await d.send(None, h, raw=b"{nope"), 400, -32700, None)
    check(await d.send(None, h, raw=b"\xff\xfe"), 400, -32700, None)
    check(await d.send(None, h, raw=orjson.dumps([rpc("tools/list")])), 400, -32600, None)
    check(await d.send(None, h, raw=b'{"jsonrpc":"2.0","id":3,"result":{}}'), 400, -32600, 3)


async def test_other_errors_follow_the_sdk_table(d: Driver) -> None:
    e = check(await d.call("tools/call", {"name": "nope"}, id=11), 400, -32602, 11)
    assert e["message"] == "Unknown tool: nope"
    r = await d.call("tools/call", {"name": "crash"}, id=12)
    assert r.status == 200 and r.result["isError"] is True
    assert r.result["content"] == [{"type": "text", "text": "Tool crash failed: RuntimeError: boom"}]


@pytest.mark.parametrize("http_method", ["GET", "DELETE", "PUT", "PATCH"])
async def test_non_post_is_405_with_allow(d: Driver, http_method: str) -> None:
    r = await d.client.request(
        http_method, "/mcp", headers={"accept": "text/event-stream", "mcp-session-id": "abc"}
    )
    assert r.status_code == 405
    assert r.headers["allow"] == "POST"
    assert "mcp-session-id" not in r.headers


async def test_wrong_path_is_404(d: Driver) -> None:
    msg = rpc("server/discover")
    r = await d.client.post("/other", content=orjson.dumps(msg), headers=headers_for(msg))
    assert r.status_code == 404


async def test_session_id_ignored_and_never_minted(d: Driver) -> None:
    msg = rpc("tools/call", {"name": "echo", "arguments": {"text": "hi"}})
    plain = await d.send(msg, headers_for(msg))
    with_sid = await d.send(msg, headers_for(msg, mcp_session_id="made-up-session"))
    assert plain.status == with_sid.status == 200
    assert plain.body == with_sid.body
    for r in (plain, with_sid):
        assert "mcp-session-id" not in r.headers
    disc = await d.call("server/discover")
    assert "mcp-session-id" not in disc.headers


async def test_body_limit_is_413() -> None:
    async with Driver(__import__("mcp_stateless").HttpTransport(app, max_body=1024)) as small:
        big = rpc("tools/call", {"name": "echo", "arguments": {"text": "x" * 2000}})
        r = await small.send(big, headers_for(big))
        assert r.status == 413
        assert r.body["error"]["code"] == -32600
        fits = rpc("tools/call", {"name": "echo", "arguments": {"text": "x" * 100}})
        assert (await small.send(fits, headers_for(fits))).status == 200


async def test_unsupported_content_type_and_accept(d: Driver) -> None:
    msg = rpc("server/discover")
    r = await d.send(msg, headers_for(msg, content_type="text/plain"))
    assert r.status == 415
    r = await d.send(msg, headers_for(msg, accept="text/html"))
    assert r.status == 406
