"""The one encoder, exactly: compact UTF-8 JSON on the fast path and on the exact fallback past 64 bits,
NaN refused, and decode_exact keeping every integer."""

from __future__ import annotations

import math

import pytest

from mcp_stateless.protocol.encoding import UNENCODABLE, decode_exact, encode_message, encode_record

BIG = 2**64 + 1


@pytest.mark.parametrize("encode", [encode_message, encode_record])
def test_past_64_bits_the_text_is_still_compact_utf8(encode: object) -> None:
    value = {"n": BIG, "t": "é ✓", "l": [1, 2]}
    assert encode(value) == '{"n":18446744073709551617,"t":"é ✓","l":[1,2]}'.encode()  # type: ignore[operator]


def test_a_record_with_nan_is_refused_not_written_as_nan() -> None:
    with pytest.raises(ValueError):
        encode_record({"n": BIG, "x": math.nan})
    with pytest.raises(TypeError):
        encode_record({"n": object()})


def test_a_message_that_is_not_json_becomes_an_internal_error_for_its_id() -> None:
    out = decode_exact(encode_message({"jsonrpc": "2.0", "id": 3, "result": {"x": object()}}))
    assert out == {"jsonrpc": "2.0", "id": 3, "error": {"code": -32603, "message": UNENCODABLE}}
    assert decode_exact(encode_message({"jsonrpc": "2.0", "id": 4, "result": {"x": math.inf, "n": BIG}}))["error"][
        "code"] == -32603


@pytest.mark.parametrize(("text", "value"), [
    (b'{"n":18446744073709551617}', {"n": BIG}),
    (b'{"n":1844674407370955161}', {"n": 1844674407370955161}),  # 19 digits, inside 64 bits
    (b'{"s":"12345678901234567890"}', {"s": "12345678901234567890"}),
    ('{"n":-18446744073709551617}', {"n": -BIG}),
])
def test_decode_exact_keeps_every_integer(text: bytes | str, value: object) -> None:
    got = decode_exact(text)
    assert got == value and all(type(v) is type(value[k]) for k, v in got.items())  # type: ignore[index]


def test_decode_exact_is_as_strict_as_orjson() -> None:
    for bad in (b'{"n":12345678901234567890,"x":NaN}', b'{"n":12345678901234567890', b"\xff"):
        with pytest.raises(ValueError):
            decode_exact(bad)


def test_an_unencodable_message_is_logged_and_answered_even_when_it_is_not_an_object(
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level("ERROR", logger="mcp_stateless")
    out = decode_exact(encode_message([object()]))
    assert out == {"jsonrpc": "2.0", "error": {"code": -32603, "message": UNENCODABLE}}  # no id: none to name
    assert [r.getMessage() for r in caplog.records] == ["a message could not be encoded as JSON"]
