"""The sans-IO validation ladder: each rung, its code, its HTTP status, the echoed id."""

from __future__ import annotations

from typing import Any

import pytest

from helpers import PV, headers_for, rpc
from mcp_stateless.protocol import envelope, errors
from mcp_stateless.protocol.envelope import MethodTable, Notification, Rejection, Request, classify
from mcp_stateless.protocol.errors import McpError
from mcp_stateless.protocol.headers import ParamHeader

TABLE = MethodTable(
    {"server/discover", "tools/call", "tools/list", "resources/read", "prompts/get"},
    lambda name: (ParamHeader("Region", ("region",), "string"),) if name == "regional" else None,
)


def rejected(decision: Any, status: int, code: int, id_: Any) -> Rejection:
    assert isinstance(decision, Rejection), decision
    assert decision.status == status
    assert decision.error is not None and decision.error.code == code, decision.error
    assert decision.id == id_
    body = decision.body()
    assert body is not None and body["error"]["code"] == code
    if id_ is None:
        assert body.get("id") is None
    else:
        assert body["id"] == id_
    return decision


def test_valid_request_carries_everything() -> None:
    msg = rpc(
        "tools/call",
        {"name": "x"},
        id="a1",
        caps={"sampling": {}},
        **{
            "io.modelcontextprotocol/logLevel": "warning",
            "progressToken": 7,
            "io.modelcontextprotocol/clientInfo": {"name": "c", "version": "1"},
        },
    )
    d = classify(msg, headers_for(msg), TABLE)
    assert isinstance(d, Request)
    assert (d.id, d.method, d.version) == ("a1", "tools/call", PV)
    assert d.capabilities == {"sampling": {}}
    assert d.log_level == "warning" and d.progress_token == 7
    assert d.client_info == {"name": "c", "version": "1"}


def test_stdio_has_no_header_rung() -> None:
    msg = rpc("tools/list", id=3)
    assert isinstance(classify(msg, None, TABLE), Request)


@pytest.mark.parametrize("message", [[{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}], [], "x", 3, None])
def test_not_an_object_is_invalid_request(message: Any) -> None:
    rejected(classify(message, None, TABLE), 400, errors.INVALID_REQUEST, None)


def test_batch_message_text() -> None:
    d = classify([rpc("tools/list")], None, TABLE)
    assert isinstance(d, Rejection) and d.error is not None
    assert d.error.message == "Batches are not supported"


@pytest.mark.parametrize(
    ("message", "id_"),
    [
        ({"jsonrpc": "1.0", "id": 5, "method": "tools/list", "params": {}}, 5),
        ({"id": 5, "method": "tools/list"}, 5),
        ({"jsonrpc": "2.0", "id": 6, "result": {}}, 6),
        ({"jsonrpc": "2.0", "id": 6, "error": {"code": 1, "message": "m"}}, 6),
        ({"jsonrpc": "2.0", "id": "s", "method": 12}, "s"),
        ({"jsonrpc": "2.0", "id": 7, "method": "tools/list", "params": [1, 2]}, 7),
        ({"jsonrpc": "2.0", "id": None, "method": "tools/list", "params": {}}, None),
        ({"jsonrpc": "2.0", "id": True, "method": "tools/list", "params": {}}, None),
        ({"jsonrpc": "2.0", "id": 1.5, "method": "tools/list", "params": {}}, None),
        ({"jsonrpc": "2.0", "id": {"a": 1}, "method": "tools/list", "params": {}}, None),
    ],
)
def test_shape_errors_are_invalid_request(message: dict[str, Any], id_: Any) -> None:
    rejected(classify(message, None, TABLE), 400, errors.INVALID_REQUEST, id_)


def test_parse_error() -> None:
    with pytest.raises(McpError) as e:
        envelope.parse(b"{not json")
    assert e.value.code == errors.PARSE_ERROR
    with pytest.raises(McpError) as e:
        envelope.parse(b'"\xff\xfe"')
    assert e.value.code == errors.PARSE_ERROR


def test_notification_is_not_validated_further() -> None:
    d = classify(
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}, {}, TABLE
    )
    assert isinstance(d, Notification) and d.method == "notifications/cancelled"


@pytest.mark.parametrize(
    ("meta", "message"),
    [
        (None, "params._meta is missing"),
        (
            {"io.modelcontextprotocol/clientCapabilities": {}},
            "params._meta is missing io.modelcontextprotocol/protocolVersion",
        ),
        (
            {"io.modelcontextprotocol/protocolVersion": PV},
            "params._meta is missing io.modelcontextprotocol/clientCapabilities",
        ),
        (
            {"io.modelcontextprotocol/protocolVersion": PV, "io.modelcontextprotocol/clientCapabilities": []},
            "params._meta is missing io.modelcontextprotocol/clientCapabilities",
        ),
        (
            {
                "io.modelcontextprotocol/protocolVersion": 20260728,
                "io.modelcontextprotocol/clientCapabilities": {},
            },
            "params._meta is missing io.modelcontextprotocol/protocolVersion",
        ),
    ],
)
def test_missing_meta_is_invalid_params_even_with_full_headers(meta: Any, message: str) -> None:
    msg: dict[str, Any] = {"jsonrpc": "2.0", "id": 42, "method": "tools/list", "params": {}}
    if meta is not None:
        msg["params"]["_meta"] = meta
    hdrs = {"mcp-protocol-version": PV, "mcp-method": "tools/list"}
    d = rejected(classify(msg, hdrs, TABLE), 400, errors.INVALID_PARAMS, 42)
    assert d.error is not None and d.error.message == message


def test_no_params_at_all_is_invalid_params() -> None:
    rejected(classify({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, None, TABLE), 400, -32602, 1)


@pytest.mark.parametrize(
    "extra",
    [
        {"io.modelcontextprotocol/logLevel": "verbose"},
        {"io.modelcontextprotocol/logLevel": 3},
        {"progressToken": 1.5},
        {"progressToken": True},
        {"progressToken": {"a": 1}},
        {"io.modelcontextprotocol/clientInfo": "me"},
    ],
)
def test_bad_optional_meta_is_invalid_params(extra: dict[str, Any]) -> None:
    msg = rpc("tools/list", id="q", **extra)
    rejected(classify(msg, headers_for(msg), TABLE), 400, errors.INVALID_PARAMS, "q")


@pytest.mark.parametrize(
    ("overrides", "fragment"),
    [
        ({"mcp_protocol_version": None}, "MCP-Protocol-Version header is missing"),
        ({"mcp_protocol_version": "2025-11-25"}, "does not match"),
        ({"mcp_method": None}, "Mcp-Method header is missing"),
        ({"mcp_method": "TOOLS/CALL"}, "does not match method"),
        ({"mcp_method": "tools/list"}, "does not match method"),
        ({"mcp_name": None}, "Mcp-Name header is missing"),
        ({"mcp_name": "other"}, "does not match params.name"),
        ({"mcp_name": "ok\x01"}, "invalid characters"),
        ({"mcp_name": "=?base64?b2s=?="}, "does not match"),  # "ok" != "x"
        ({"mcp_name": "=?base64?!!!!?="}, "invalid base64"),
    ],
)
def test_header_rung_is_header_mismatch(overrides: dict[str, str | None], fragment: str) -> None:
    msg = rpc("tools/call", {"name": "x"}, id=5)
    d = rejected(classify(msg, headers_for(msg, **overrides), TABLE), 400, errors.HEADER_MISMATCH, 5)
    assert d.error is not None and fragment in d.error.message


def test_header_ows_is_trimmed_and_names_decode() -> None:
    msg = rpc("tools/call", {"name": "Grüße"}, id=5)
    hdrs = headers_for(msg, mcp_method="  tools/call\t", mcp_protocol_version=f" {PV} ")
    assert hdrs["mcp-name"] == "=?base64?R3LDvMOfZQ==?="
    assert isinstance(classify(msg, hdrs, TABLE), Request)


def test_resources_read_name_is_the_uri() -> None:
    msg = rpc("resources/read", {"uri": "test://a"}, id=1)
    assert isinstance(classify(msg, headers_for(msg), TABLE), Request)
    rejected(classify(msg, headers_for(msg, mcp_name="test://b"), TABLE), 400, errors.HEADER_MISMATCH, 1)


def test_header_mismatch_is_checked_before_version_support() -> None:
    msg = rpc("tools/list", id=9, version="v999.0.0")
    d = classify(msg, headers_for(msg, mcp_protocol_version=PV), TABLE)
    rejected(d, 400, errors.HEADER_MISMATCH, 9)


def test_unsupported_version() -> None:
    msg = rpc("tools/list", id=9, version="v999.0.0")
    d = rejected(classify(msg, headers_for(msg), TABLE), 400, errors.UNSUPPORTED_PROTOCOL_VERSION, 9)
    assert d.error is not None and d.error.data == {"supported": [PV], "requested": "v999.0.0"}


def test_unknown_method_is_404() -> None:
    msg = rpc("prompts/list", id="p")
    d = rejected(classify(msg, headers_for(msg), TABLE), 404, errors.METHOD_NOT_FOUND, "p")
    assert d.error is not None and d.error.message == "Method not found: prompts/list"


def test_legacy_initialize_is_method_not_found_with_versions() -> None:
    msg = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "c", "version": "1"},
        },
    }
    d = rejected(classify(msg, None, TABLE), 404, errors.METHOD_NOT_FOUND, 0)
    assert d.error is not None and d.error.data == {"supported": [PV], "requested": "2025-11-25"}


def test_param_headers_rung() -> None:
    msg = rpc("tools/call", {"name": "regional", "arguments": {"region": "eu"}}, id=2)
    assert isinstance(classify(msg, headers_for(msg, mcp_param_region="eu"), TABLE), Request)
    for bad in ({}, {"mcp_param_region": "us"}, {"mcp_param_region": "=?base64?ZXU?="}):
        rejected(classify(msg, headers_for(msg, **bad), TABLE), 400, errors.HEADER_MISMATCH, 2)


def test_http_status_table() -> None:
    assert {
        c: errors.http_status_for(c)
        for c in (-32700, -32600, -32602, -32020, -32021, -32022, -32601, -32603, -1)
    } == {
        -32700: 400,
        -32600: 400,
        -32602: 400,
        -32020: 400,
        -32021: 400,
        -32022: 400,
        -32601: 404,
        -32603: 200,
        -1: 200,
    }
