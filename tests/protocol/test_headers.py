"""Mcp-Name / Mcp-Param-* value encoding and x-mcp-header annotations."""

from __future__ import annotations

from typing import Any

import pytest

from mcp_stateless.protocol import errors
from mcp_stateless.protocol.errors import McpError
from mcp_stateless.protocol.headers import (
    ParamHeader,
    check_param_headers,
    decode_header_value,
    encode_header_value,
    param_headers,
)


@pytest.mark.parametrize(
    ("value", "wire"),
    [
        ("us-west1", "us-west1"),
        ("", ""),
        (42, "42"),
        (-7, "-7"),
        (True, "true"),
        (False, "false"),
        ("Grüße", "=?base64?R3LDvMOfZQ==?="),
        (" lead", "=?base64?IGxlYWQ=?="),
        ("trail ", "=?base64?dHJhaWwg?="),
        ("\tTab", "=?base64?CVRhYg==?="),
        ("a\r\nb", "=?base64?YQ0KYg==?="),
        # a literal value that looks like the sentinel must itself be encoded
        ("=?base64?abc?=", "=?base64?PT9iYXNlNjQ/YWJjPz0=?="),
    ],
)
def test_encode(value: Any, wire: str) -> None:
    assert encode_header_value(value) == wire


@pytest.mark.parametrize(
    "value", ["us-west1", "Grüße", " lead", "trail ", "a\r\nb", "=?base64?abc?=", "日本", "x" * 300]
)
def test_round_trip(value: str) -> None:
    assert decode_header_value(encode_header_value(value), "Mcp-Param-X") == value


@pytest.mark.parametrize(
    ("raw", "decoded"),
    [
        ("plain", "plain"),
        ("  padded\t", "padded"),
        ("=?base64?R3LDvMOfZQ==?=", "Grüße"),
        ("=?BASE64?R3LDvMOfZQ==?=", "=?BASE64?R3LDvMOfZQ==?="),  # markers are case-sensitive: literal
        ("=?base64?R3LDvMOfZQ==", "=?base64?R3LDvMOfZQ=="),  # no suffix: literal
        ("R3LDvMOfZQ==?=", "R3LDvMOfZQ==?="),  # no prefix: literal
        ("=?base64??=", ""),  # the sentinel form of the empty string
    ],
)
def test_decode(raw: str, decoded: str) -> None:
    assert decode_header_value(raw, "Mcp-Name") == decoded


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        ("=?base64?R3LDvMOfZQ?=", "invalid base64"),  # missing padding
        ("=?base64?R3LD*MOfZQ==?=", "invalid base64"),  # bad character
        ("=?base64?R3LDvMOfZQ=?=", "invalid base64"),
        ("=?base64?/w==?=", "invalid base64"),  # decodes to non-UTF-8 bytes
        ("bad\x00value", "invalid characters"),
        ("caf\xe9", "invalid characters"),  # raw non-ASCII (latin-1 decoded)
        ("a\x7fb", "invalid characters"),
    ],
)
def test_decode_rejects(raw: str, fragment: str) -> None:
    with pytest.raises(McpError) as e:
        decode_header_value(raw, "Mcp-Param-Region")
    assert e.value.code == errors.HEADER_MISMATCH
    assert e.value.message.startswith("Mcp-Param-Region header ")
    assert fragment in e.value.message


def test_param_headers_found_in_nested_properties() -> None:
    schema = {
        "type": "object",
        "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"},
            "opts": {
                "type": "object",
                "properties": {
                    "n": {"type": "integer", "x-mcp-header": "Count"},
                    "dry": {"type": "boolean", "x-mcp-header": "Dry-Run"},
                },
            },
        },
    }
    assert param_headers(schema) == (
        ParamHeader("Region", ("region",), "string"),
        ParamHeader("Count", ("opts", "n"), "integer"),
        ParamHeader("Dry-Run", ("opts", "dry"), "boolean"),
    )
    assert param_headers(schema)[2].header == "mcp-param-dry-run"


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "properties": {"a": {"type": "string", "x-mcp-header": ""}}},
        {"type": "object", "properties": {"a": {"type": "string", "x-mcp-header": "Bad Name"}}},
        {"type": "object", "properties": {"a": {"type": "string", "x-mcp-header": "Bad:Name"}}},
        {"type": "object", "properties": {"a": {"type": "number", "x-mcp-header": "N"}}},
        {"type": "object", "properties": {"a": {"type": "object", "x-mcp-header": "O"}}},
        {
            "type": "object",
            "properties": {
                "a": {"type": "string", "x-mcp-header": "R"},
                "b": {"type": "string", "x-mcp-header": "r"},
            },
        },
        {
            "type": "object",
            "properties": {"a": {"type": "array", "items": {"type": "string", "x-mcp-header": "I"}}},
        },
        {"type": "object", "anyOf": [{"properties": {"a": {"type": "string", "x-mcp-header": "A"}}}]},
    ],
)
def test_param_headers_rejects_invalid_annotations(schema: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        param_headers(schema)


SPECS = (
    ParamHeader("Region", ("region",), "string"),
    ParamHeader("Count", ("n",), "integer"),
    ParamHeader("Dry", ("dry",), "boolean"),
)


@pytest.mark.parametrize(
    ("arguments", "headers"),
    [
        (
            {"region": "eu", "n": 3, "dry": True},
            {"mcp-param-region": "eu", "mcp-param-count": "3", "mcp-param-dry": "true"},
        ),
        ({"region": "Grüße"}, {"mcp-param-region": "=?base64?R3LDvMOfZQ==?="}),
        ({"region": "=?base64?abc?="}, {"mcp-param-region": "=?base64?PT9iYXNlNjQ/YWJjPz0=?="}),
        ({"n": 3}, {"mcp-param-count": "03"}),  # integers compare numerically
        ({"n": 3.0}, {"mcp-param-count": "3"}),
        ({"region": None}, {}),  # null: no header
        ({}, {}),
    ],
)
def test_check_param_headers_accepts(arguments: dict[str, Any], headers: dict[str, str]) -> None:
    assert check_param_headers(SPECS, arguments, headers) is None


@pytest.mark.parametrize(
    ("arguments", "headers", "fragment"),
    [
        ({"region": "eu"}, {}, "Mcp-Param-Region header is missing"),
        ({}, {"mcp-param-region": "eu"}, "present but the argument is absent"),
        ({"region": "eu"}, {"mcp-param-region": "us"}, "does not match"),
        ({"region": "Grüße"}, {"mcp-param-region": "=?base64?R3LDvMOfZQ?="}, "invalid base64"),
        ({"region": "=?base64?abc?="}, {"mcp-param-region": "=?base64?abc?="}, "invalid base64"),
        ({"n": 3}, {"mcp-param-count": "three"}, "does not match"),
        ({"dry": False}, {"mcp-param-dry": "False"}, "does not match"),
        ({"dry": True}, {"mcp-param-dry": "1"}, "does not match"),
        ({"region": "eu"}, {"mcp-param-region": "e\x01u"}, "invalid characters"),
    ],
)
def test_check_param_headers_rejects(
    arguments: dict[str, Any], headers: dict[str, str], fragment: str
) -> None:
    err = check_param_headers(SPECS, arguments, headers)
    assert err is not None and err.code == errors.HEADER_MISMATCH
    assert fragment in err.message
