"""Exact behaviour of MRTR sealing and the key ring: the wire format recomputed independently, the expiry
boundary, what a correctly tagged but malformed payload gets, and the key ring's validation messages."""

from __future__ import annotations

import base64
import hashlib
import hmac

import orjson
import pytest

from mcp_stateless import KeyRing
from mcp_stateless.protocol import errors
from mcp_stateless.protocol.errors import McpError
from mcp_stateless.protocol.mrtr import StateContext, check_input_responses, params_digest, seal, unseal

KEY = b"k" * 32
RING = KeyRing({"k1": KEY})
CTX = StateContext("alice", "tools/call", params_digest("tools/call", {"name": "t"}))


def b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def hand_sealed(body: bytes, key: bytes = KEY, kid: str = "k1") -> str:
    """A state with a valid tag over an arbitrary body: what only a holder of the key could make."""
    head = f"s1.{kid}.{b64(body)}"
    return f"{head}.{b64(hmac.new(key, head.encode('ascii'), hashlib.sha256).digest())}"


def refusal(state: object, now: float | None = None, ctx: StateContext = CTX) -> tuple[int, str]:
    with pytest.raises(McpError) as e:
        unseal(RING, ctx, state, now=now)
    return e.value.code, e.value.message


@pytest.mark.parametrize("n", range(64))
def test_the_sealed_text_is_exactly_the_documented_format(n: int) -> None:
    # 64 payload sizes: every length of the base64 tail, including bodies and tags ending in any letter
    payload = {"round": n, "pad": "x" * n}
    state = seal(RING, CTX, payload, ttl_s=60, now=1000.0)
    body = orjson.dumps({"p": "alice", "m": "tools/call", "d": CTX.digest, "e": 1060, "v": payload})
    assert state == hand_sealed(body)
    assert unseal(RING, CTX, state, now=1000.0) == payload


def test_a_state_lives_until_its_expiry_second_and_not_after() -> None:
    state = seal(RING, CTX, "v", ttl_s=10, now=1000.0)
    assert unseal(RING, CTX, state, now=1010.0) == "v"
    assert refusal(state, now=1010.001) == (
        errors.INVALID_PARAMS, "requestState has expired; start the request again without it")


def test_a_tagged_body_without_an_expiry_counts_as_expired() -> None:
    body = orjson.dumps({"p": "alice", "m": "tools/call", "d": CTX.digest, "v": 1})
    assert refusal(hand_sealed(body), now=0.5) == (
        errors.INVALID_PARAMS, "requestState has expired; start the request again without it")


@pytest.mark.parametrize("body", [b"not json", b"[1, 2]", b'"text"', b"\xff\xfe"], ids=["junk", "list", "str", "bytes"])
def test_a_tagged_body_that_is_not_a_json_object_is_invalid(body: bytes) -> None:
    assert refusal(hand_sealed(body)) == (errors.INVALID_PARAMS, "requestState is not valid")


def test_a_state_that_is_not_a_string_is_refused() -> None:
    assert refusal(123) == (errors.INVALID_PARAMS, "requestState must be a string")


def test_input_responses_shape_errors_say_what_is_wrong() -> None:
    assert check_input_responses(None) == {}
    ok = {"a": {"action": "accept"}}
    assert check_input_responses(ok) is ok
    with pytest.raises(McpError) as e:
        check_input_responses([1])
    assert (e.value.code, e.value.message) == (
        -32602, "inputResponses must be an object keyed by the inputRequests keys")
    with pytest.raises(McpError) as e:
        check_input_responses({"a": {}, "b": "yes"})
    assert (e.value.code, e.value.message) == (-32602, "inputResponses['b'] must be an object")


def test_state_contexts_compare_by_principal_method_and_digest() -> None:
    same = StateContext.of("alice", "tools/call", {"name": "t", "requestState": "ignored"})
    assert same == CTX
    assert StateContext("bob", "tools/call", CTX.digest) != CTX
    assert StateContext("alice", "prompts/get", CTX.digest) != CTX
    assert StateContext.of("alice", "tools/call", {"name": "u"}) != CTX
    assert CTX.__eq__("not a context") is NotImplemented
    assert StateContext("alice", "tools/call").digest == params_digest("tools/call", {})


# --------------------------------------------------------------------------- the key ring
def test_key_ring_validation_messages() -> None:
    cases: list[tuple[dict[str, bytes], str | None, str]] = [
        ({}, None, "a key ring needs at least one key"),
        ({"": KEY}, None, "invalid key id '' (non-empty, no dots)"),
        ({"a.b": KEY}, None, "invalid key id 'a.b' (non-empty, no dots)"),
        ({"short": b"x" * 15}, None, "key 'short' is shorter than 16 bytes"),
        ({"k1": KEY}, "k2", "current key id 'k2' is not in the ring"),
    ]
    for keys, current, message in cases:
        with pytest.raises(ValueError) as e:
            KeyRing(keys, current)
        assert str(e.value) == message


def test_a_sixteen_byte_key_is_enough_and_a_ring_is_not_ephemeral_unless_generated() -> None:
    ring = KeyRing({"k": b"x" * 16})
    assert (ring.current, ring.key("k"), ring.key("other"), ring.ephemeral) == ("k", b"x" * 16, None, False)
    made = KeyRing.generate()
    assert made.current == "local" and made.ephemeral is True
    key = made.key("local")
    assert key is not None and len(key) == 32
    assert KeyRing.generate().key("local") != key


def test_key_ring_from_config_parses_every_entry() -> None:
    sixteen = bytes(range(16))
    ring = KeyRing.from_config(f" new:{b64(sixteen)} ,, old:this secret: has a colon ,")
    assert ring.current == "new"
    assert ring.key("new") == sixteen  # 16 decoded bytes are a key, not text
    assert ring.key("old") == b"this secret: has a colon"  # not base64: the text itself
    standard = base64.b64encode(b"\xfb" * 20).decode()  # '+' and '/': the standard alphabet
    assert KeyRing.from_config(f"std:{standard}").key("std") == b"\xfb" * 20
    with pytest.raises(ValueError) as e:
        KeyRing.from_config("no-colon-here")
    assert str(e.value) == "each key must be written kid:secret"

