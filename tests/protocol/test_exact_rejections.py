"""Exact answers of the envelope ladder, the Mcp-* header rules and the Host/Origin policy at their edges:
the message each rejection carries, the OWS that is trimmed (and nothing else), and boundary characters."""

from __future__ import annotations

from typing import Any

import pytest

from mcp_stateless import App
from mcp_stateless.protocol.envelope import Notification, Rejection, Request, classify, parse
from mcp_stateless.protocol.errors import McpError
from mcp_stateless.protocol.headers import (
    check_param_headers,
    decode_header_value,
    encode_header_value,
    param_headers,
    value_at,
)
from mcp_stateless.protocol.security import OriginPolicy

PV = "2026-07-28"
META = {"io.modelcontextprotocol/protocolVersion": PV, "io.modelcontextprotocol/clientCapabilities": {}}

app = App("exact")


@app.tool(input_schema={"type": "object", "properties": {"region": {"type": "string", "x-mcp-header": "Region"}}})
def t(region: str = "") -> str:
    return region


def msg(method: str = "tools/list", meta: dict[str, Any] | None = None, **params: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, "_meta": {**META, **(meta or {})}}}


def rejection(message: Any, headers: dict[str, str] | None = None, **kw: Any) -> tuple[int, int, str, Any]:
    d = classify(message, headers, app.table, **kw)
    assert isinstance(d, Rejection) and d.error is not None, d
    return d.status, d.error.code, d.error.message, d.error.data


LEVELS = "debug, info, notice, warning, error, critical, alert, emergency"


@pytest.mark.parametrize(("message", "expected"), [
    ("text", (400, -32600, "A JSON-RPC message must be an object", None)),
    ({**msg(), "jsonrpc": "1.0"}, (400, -32600, 'jsonrpc must be "2.0"', None)),
    ({"jsonrpc": "2.0", "id": 1, "result": {}}, (400, -32600, "Clients must not send responses", None)),
    ({"jsonrpc": "2.0", "id": 1, "error": {}}, (400, -32600, "Clients must not send responses", None)),
    ({"jsonrpc": "2.0", "id": 1}, (400, -32600, "method must be a string", None)),
    ({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": None},
     (400, -32600, "params must be an object", None)),
    ({**msg(), "id": 1.5}, (400, -32600, "id must be a string or an integer", None)),
    (msg(meta={"io.modelcontextprotocol/clientInfo": 3}),
     (400, -32602, "io.modelcontextprotocol/clientInfo must be an object", None)),
    (msg(meta={"io.modelcontextprotocol/logLevel": "loud"}),
     (400, -32602, f"io.modelcontextprotocol/logLevel must be one of {LEVELS}", None)),
    (msg(meta={"progressToken": 1.5}), (400, -32602, "progressToken must be a string or an integer", None)),
    (msg(meta={"io.modelcontextprotocol/protocolVersion": "2099-01-01"}),
     (400, -32022, "Unsupported protocol version", {"supported": [PV], "requested": "2099-01-01"})),
], ids=["not-object", "jsonrpc", "result", "error", "no-method", "null-params", "float-id", "client-info", "log-level",
        "progress-token", "version"])
def test_each_rejection_says_exactly_what_is_wrong(message: Any, expected: tuple[int, int, str, Any]) -> None:
    assert rejection(message) == expected


@pytest.mark.parametrize(("requested", "era"), [("2025-06-18", "a legacy"), ("1999", "an"), (7, "an")])
def test_initialize_is_refused_naming_the_era_and_every_supported_version(requested: Any, era: str) -> None:
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": requested}}
    assert rejection(init, supported_versions=(PV, "2027-01-01")) == (
        404, -32601,
        f"initialize is not supported: {era} initialize handshake reached a server that speaks MCP "
        f"{PV}, 2027-01-01 only (send per-request _meta instead)",
        {"supported": [PV, "2027-01-01"], "requested": requested if isinstance(requested, str) else None})


def test_invalid_json_is_a_parse_error() -> None:
    with pytest.raises(McpError) as e:
        parse(b"{")
    assert (e.value.code, e.value.message) == (-32700, "Parse error: the body is not valid JSON")


def test_a_notification_keeps_its_params() -> None:
    d = classify({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 4}}, None, app.table)
    assert d == Notification("notifications/cancelled", {"requestId": 4})


def test_headers_trim_spaces_and_tabs_only() -> None:
    base = {"mcp-protocol-version": f" {PV}\t", "mcp-method": "\ttools/list "}
    assert isinstance(classify(msg(), base, app.table), Request)
    # a vertical tab is not OWS: refused (the message shows the value with all whitespace stripped)
    assert rejection(msg(), {**base, "mcp-protocol-version": f"{PV}\x0b"})[1:3] == (
        -32020, f"MCP-Protocol-Version header '{PV}' does not match params._meta protocolVersion '{PV}'")
    assert rejection(msg(), {**base, "mcp-protocol-version": f"{PV}X"})[1] == -32020
    assert rejection(msg(), {**base, "mcp-method": "tools/list\x0b"})[1] == -32020
    assert rejection(msg(), {**base, "mcp-method": "tools/listX"})[1:3] == (
        -32020, "Mcp-Method header 'tools/listX' does not match method 'tools/list'")
    assert rejection(msg(), {"mcp-method": "tools/list"})[1:3] == (-32020, "MCP-Protocol-Version header is missing")
    assert rejection(msg(), {"mcp-protocol-version": PV})[1:3] == (-32020, "Mcp-Method header is missing")


def test_mcp_name_errors_name_the_header() -> None:
    call = msg("tools/call", name="t")
    h = {"mcp-protocol-version": PV, "mcp-method": "tools/call"}
    assert rejection(call, h)[1:3] == (-32020, "Mcp-Name header is missing")
    assert rejection(call, {**h, "mcp-name": "t\x01"})[1:3] == (-32020, "Mcp-Name header contains invalid characters")


def test_param_headers_are_checked_for_tools_call_only() -> None:
    # a prompt that shares the tool's name is not held to the tool's x-mcp-header annotations
    get = msg("prompts/get", name="t", arguments={"region": "eu"})
    h = {"mcp-protocol-version": PV, "mcp-method": "prompts/get", "mcp-name": "t"}
    assert rejection(get, h) == (404, -32601, "Method not found: prompts/get", None)  # past the header checks
    call = msg("tools/call", name="t", arguments={"region": "eu"})
    assert rejection(call, {**h, "mcp-method": "tools/call"})[1:3] == (
        -32020, "Mcp-Param-Region header is missing for argument region")


# --------------------------------------------------------------------------- header values
@pytest.mark.parametrize("plain", ["", "Xenon", "fooX", "a b", "~tilde~", "=?base64?no-suffix", "no-prefix?="])
def test_safe_values_travel_plain(plain: str) -> None:
    assert encode_header_value(plain) == plain
    assert decode_header_value(plain, "H") == plain


@pytest.mark.parametrize("value", [" lead", "trail\t", "del\x7f", "caf\u00e9", "=?base64?YQ==?="])
def test_other_values_travel_as_base64(value: str) -> None:
    encoded = encode_header_value(value)
    assert encoded.startswith("=?base64?") and encoded.endswith("?=")
    assert decode_header_value(encoded, "H") == value


def test_header_values_of_other_types() -> None:
    assert [encode_header_value(v) for v in (True, False, 0, -7)] == ["true", "false", "0", "-7"]


@pytest.mark.parametrize("raw", ["abc\x0b", "\x1fabc", "a\x7f"])
def test_a_control_character_is_refused_not_trimmed(raw: str) -> None:
    with pytest.raises(McpError) as e:
        decode_header_value(raw, "Mcp-Param-X")
    assert (e.value.code, e.value.message) == (-32020, "Mcp-Param-X header contains invalid characters")


# --------------------------------------------------------------------------- x-mcp-header annotations
def nested(leaf: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": {"a": {"type": "object", "properties": {"b": leaf}}}}


@pytest.mark.parametrize(("schema", "message"), [
    (nested({"type": "string", "x-mcp-header": "bad name"}), "x-mcp-header at a.b must be a non-empty RFC 9110 token"),
    (nested({"type": "array", "x-mcp-header": "B"}), "x-mcp-header at a.b must annotate a string, integer or boolean"),
    ({"type": "object", "properties": {"x": {"type": "string", "x-mcp-header": "Dup"},
                                       "y": {"type": "string", "x-mcp-header": "dup"}}},
     "x-mcp-header 'dup' is used twice (names are case-insensitive)"),
    ({"type": "object", "properties": {"x": {"type": "array", "items": {"type": "string", "x-mcp-header": "I"}}}},
     "x-mcp-header may only annotate properties reachable through `properties`"),
])
def test_invalid_annotations_are_refused_with_their_path(schema: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError) as e:
        param_headers(schema)
    assert str(e.value) == message


def mismatch(schema: dict[str, Any], arguments: Any, headers: dict[str, str]) -> str | None:
    err = check_param_headers(param_headers(schema), arguments, headers)
    return None if err is None else f"{err.code} {err.message}"


def test_param_header_mismatches_name_the_argument_path() -> None:
    s = nested({"type": "string", "x-mcp-header": "B"})
    args = {"a": {"b": "v"}}
    assert mismatch(s, args, {"mcp-param-b": "v"}) is None
    assert mismatch(s, args, {}) == "-32020 Mcp-Param-B header is missing for argument a.b"
    assert mismatch(s, args, {"mcp-param-b": "w"}) == "-32020 Mcp-Param-B header does not match the argument a.b"
    assert mismatch(s, args, {"mcp-param-b": "v\x01"}) == "-32020 Mcp-Param-B header contains invalid characters"
    assert mismatch(s, {"a": {"b": {"x": 1}}}, {"mcp-param-b": "x"}) == (
        "-32020 Mcp-Param-B header does not match the argument a.b")  # not a scalar: never matches


@pytest.mark.parametrize(("value", "header", "matches"), [
    (False, "false", True), (True, "true", True), (False, "true", False), (True, "false", False),
])
def test_boolean_param_headers(value: bool, header: str, matches: bool) -> None:
    s = {"type": "object", "properties": {"f": {"type": "boolean", "x-mcp-header": "F"}}}
    assert (mismatch(s, {"f": value}, {"mcp-param-f": header}) is None) is matches


@pytest.mark.parametrize(("value", "header", "matches"), [
    (3, "3", True), (2.0, "2", True), (2.0, "abc", False), (2.5, "2", False), ([1], "1", False), ("5", "5", True),
])
def test_integer_param_headers(value: Any, header: str, matches: bool) -> None:
    s = {"type": "object", "properties": {"n": {"type": "integer", "x-mcp-header": "N"}}}
    assert (mismatch(s, {"n": value}, {"mcp-param-n": header}) is None) is matches


def test_value_at_reads_a_nested_argument_or_none() -> None:
    args = {"a": {"b": 0, "c": None}}
    assert value_at(args, ("a", "b")) == 0
    assert value_at(args, ("a", "c")) is None
    assert value_at(args, ("a", "missing")) is None
    assert value_at({"a": 5}, ("a", "b")) is None
    assert value_at(args, ("a",)) == {"b": 0, "c": None}


# --------------------------------------------------------------------------- Host and Origin
@pytest.mark.parametrize(("host", "allowed"), [
    ("[fe80::1]:8443", True), ("[FE80::1]:8443", True), ("[fe80::1]:9", False), ("[fe80::1]", False),
    ("[fe80::1", False), ("example.com", True), ("example.com:1", True), ("example.com:abc", False),
    ("other.com", False), (":80", False),
])
def test_host_policy(host: str, allowed: bool) -> None:
    policy = OriginPolicy(frozenset({"[fe80::1]:8443", "example.com"}))
    assert policy.host_allowed(host) is allowed


def test_origin_policy() -> None:
    loop = OriginPolicy.loopback()
    assert loop.origin_allowed("https://localhost:3000") and loop.origin_allowed("http://127.0.0.1")
    assert not loop.origin_allowed("ftp://localhost")
    assert not loop.origin_allowed("https://evil.example")
    assert OriginPolicy.loopback(extra_origins=["*"]).origin_allowed("https://evil.example")
    off = OriginPolicy.disabled()
    assert off.enabled is False and off.origin_allowed("https://evil.example") and off.host_allowed("x")


def test_mirrored_param_headers_are_for_tools_call_only() -> None:
    from mcp_stateless.protocol.headers import mirror_headers

    specs = param_headers({"type": "object", "properties": {"region": {"type": "string", "x-mcp-header": "Region"}}})
    params = {"name": "t", "arguments": {"region": "eu"}, "_meta": META}
    assert mirror_headers("tools/call", params, specs) == {
        "MCP-Protocol-Version": PV, "Mcp-Method": "tools/call", "Mcp-Name": "t", "Mcp-Param-Region": "eu"}
    assert mirror_headers("prompts/get", params, specs) == {
        "MCP-Protocol-Version": PV, "Mcp-Method": "prompts/get", "Mcp-Name": "t"}
    assert mirror_headers("tools/list", params, specs) == {"MCP-Protocol-Version": PV, "Mcp-Method": "tools/list"}
