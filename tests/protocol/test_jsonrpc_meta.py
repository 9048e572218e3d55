"""The role-neutral builders: JSON-RPC messages, decoding an error off the wire, the per-request `_meta`,
and the headers that mirror a body, checked against the server's own ladder (`classify`)."""

from __future__ import annotations

import pytest

from mcp_stateless.protocol import jsonrpc
from mcp_stateless.protocol.envelope import MethodTable, Rejection, Request, classify
from mcp_stateless.protocol.errors import McpError
from mcp_stateless.protocol.headers import NAME_PARAM, ParamHeader, mirror_headers, param_headers
from mcp_stateless.protocol.meta import (
    META_CLIENT_CAPABILITIES,
    META_CLIENT_INFO,
    META_PROTOCOL_VERSION,
    request_meta,
)

TABLE = MethodTable({"tools/call", "tools/list", "resources/read", "tasks/get"})


def test_builders() -> None:
    assert jsonrpc.request(3, "tools/list", {"cursor": "c"}) == {
        "jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": {"cursor": "c"}}
    assert jsonrpc.request("a", "ping") == {"jsonrpc": "2.0", "id": "a", "method": "ping"}
    assert jsonrpc.notification("notifications/initialized") == {
        "jsonrpc": "2.0", "method": "notifications/initialized"}
    assert jsonrpc.result_response(1, {"x": 1}) == {"jsonrpc": "2.0", "id": 1, "result": {"x": 1}}
    assert jsonrpc.cancelled(9, "bye") == {"jsonrpc": "2.0", "method": "notifications/cancelled",
                                           "params": {"requestId": 9, "reason": "bye"}}


def test_shape_tests() -> None:
    req, note = jsonrpc.request(1, "m"), jsonrpc.notification("n")
    ok, err = jsonrpc.result_response(1, {}), jsonrpc.error_response(1, McpError(-1, "x"))
    assert [jsonrpc.is_request(m) for m in (req, note, ok, err)] == [True, False, False, False]
    assert [jsonrpc.is_notification(m) for m in (req, note, ok, err)] == [False, True, False, False]
    assert [jsonrpc.is_response(m) for m in (req, note, ok, err)] == [False, False, True, True]
    assert jsonrpc.params_of({"params": [1]}) == {} and jsonrpc.params_of({"params": {"a": 1}}) == {"a": 1}


def test_error_from_wire_round_trips_and_tolerates_junk() -> None:
    sent = McpError(-32022, "Unsupported protocol version", {"supported": ["2026-07-28"]})
    got = jsonrpc.error_from_wire(jsonrpc.error_response(1, sent)["error"])
    assert (got.code, got.message, got.data) == (-32022, "Unsupported protocol version", {"supported": ["2026-07-28"]})
    for junk in ("boom", None, {"code": "x", "message": 5}, {"code": True}):
        e = jsonrpc.error_from_wire(junk)
        assert e.code == -32603
    assert jsonrpc.error_from_wire({"code": "x", "message": 5}).message == "5"


def test_request_meta_sets_the_three_keys_over_whatever_was_there() -> None:
    meta = request_meta("2026-07-28", {"sampling": {}}, {"name": "c", "version": "1"},
                        base={"progressToken": "p1", META_PROTOCOL_VERSION: "lie"})
    assert meta == {"progressToken": "p1", META_PROTOCOL_VERSION: "2026-07-28",
                    META_CLIENT_CAPABILITIES: {"sampling": {}}, META_CLIENT_INFO: {"name": "c", "version": "1"}}
    assert META_CLIENT_INFO not in request_meta("2026-07-28", {})


def _lower(h: dict[str, str]) -> dict[str, str]:
    return {k.lower(): v for k, v in h.items()}


SCHEMA = {"type": "object", "properties": {
    "region": {"type": "string", "x-mcp-header": "Region"},
    "n": {"type": "integer", "x-mcp-header": "N"},
    "deep": {"type": "object", "properties": {"flag": {"type": "boolean", "x-mcp-header": "Flag"}}}}}


def test_mirror_headers_for_tools_call() -> None:
    specs = param_headers(SCHEMA)
    params = {"name": "t ✓", "arguments": {"region": " Grüße", "n": 7.0, "deep": {"flag": False}},
              "_meta": request_meta("2026-07-28", {})}
    assert mirror_headers("tools/call", params, specs) == {
        "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "=?base64?dCDinJM=?=",
        "Mcp-Param-Region": "=?base64?IEdyw7zDn2U=?=", "Mcp-Param-N": "7", "Mcp-Param-Flag": "false"}
    params["arguments"] = {"region": None}
    assert not any(k.startswith("Mcp-Param-") for k in mirror_headers("tools/call", params, specs))


def test_mirror_headers_name_for_every_named_method_and_none_elsewhere() -> None:
    values = {"name": "x", "uri": "file:///a b", "taskId": "tsk_1"}
    for method, key in NAME_PARAM.items():
        h = mirror_headers(method, {key: values[key]})
        assert h == {"Mcp-Method": method, "Mcp-Name": values[key]}
    assert mirror_headers("tools/list", {"name": "ignored"}) == {"Mcp-Method": "tools/list"}


@pytest.mark.parametrize("method,params,specs", [
    ("tools/call", {"name": "t", "arguments": {"region": "eu", "n": 2, "deep": {"flag": True}}}, SCHEMA),
    ("tools/call", {"name": "Grüße", "arguments": {}}, SCHEMA),
    ("resources/read", {"uri": "test://ü"}, None),
    ("tasks/get", {"taskId": "tsk_1"}, None),
    ("tools/list", {}, None),
])
def test_the_server_ladder_accepts_what_mirror_headers_builds(
    method: str, params: dict[str, object], specs: dict[str, object] | None
) -> None:
    found: tuple[ParamHeader, ...] = param_headers(specs) if specs else ()
    table = MethodTable(TABLE.methods, lambda _name: found)
    p = {**params, "_meta": request_meta("2026-07-28", {})}
    headers = _lower(mirror_headers(method, p, found))
    decision = classify(jsonrpc.request(1, method, p), headers, table)
    assert isinstance(decision, Request), decision
    bare = {k: v for k, v in headers.items() if not k.startswith("mcp-param-")}
    if bare != headers:  # and without its parameter headers the same request is refused
        refused = classify(jsonrpc.request(1, method, p), bare, table)
        assert isinstance(refused, Rejection) and refused.error is not None and refused.error.code == -32020
