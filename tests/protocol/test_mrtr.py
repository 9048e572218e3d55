"""Sealed MRTR requestState (SEP-2322): integrity, expiry, principal, method/params binding, rotation."""

from __future__ import annotations

import base64
import json
import time

import pytest

from mcp_stateless import KeyRing
from mcp_stateless.protocol import errors
from mcp_stateless.protocol.errors import McpError
from mcp_stateless.protocol.mrtr import (
    StateContext,
    check_input_responses,
    params_digest,
    seal,
    unseal,
)

K1 = b"k" * 32
K2 = b"z" * 32
RING = KeyRing({"k1": K1})
PARAMS = {"name": "delete", "arguments": {"dir": "/x"}}
CTX = StateContext("alice", "tools/call", params_digest("tools/call", PARAMS))


def refused(ring: KeyRing, ctx: StateContext, state: object, message: str, now: float | None = None) -> None:
    with pytest.raises(McpError) as e:
        unseal(ring, ctx, state, now=now)
    assert e.value.code == errors.INVALID_PARAMS
    assert e.value.message == message


def test_round_trip() -> None:
    s = seal(RING, CTX, {"a": {"k": 1}}, ttl_s=60)
    assert s.startswith("s1.k1.")
    assert unseal(RING, CTX, s) == {"a": {"k": 1}}


def test_digest_ignores_mrtr_fields_only() -> None:
    retry = {**PARAMS, "inputResponses": {"x": {}}, "requestState": "s", "_meta": {"a": 1}}
    assert params_digest("tools/call", retry) == CTX.digest
    assert params_digest("tools/call", {**PARAMS, "arguments": {"dir": "/y"}}) != CTX.digest
    assert params_digest("prompts/get", PARAMS) != CTX.digest
    # key order does not matter
    assert params_digest("tools/call", {"arguments": {"dir": "/x"}, "name": "delete"}) == CTX.digest


def _tamper_payload(state: str, **changes: object) -> str:
    v, kid, body, tag = state.split(".")
    data = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    data.update(changes)
    nb = base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()
    return f"{v}.{kid}.{nb}.{tag}"


def test_tampering_is_refused() -> None:
    s = seal(RING, CTX, {"a": {}}, ttl_s=60)
    refused(RING, CTX, _tamper_payload(s, p="mallory"), "requestState failed verification")
    refused(RING, CTX, _tamper_payload(s, e=int(time.time()) + 10**6), "requestState failed verification")
    flipped = s[:-2] + ("A" if s[-2] != "A" else "B") + s[-1]
    refused(RING, CTX, flipped, "requestState failed verification")
    refused(RING, CTX, s + "x", "requestState failed verification")


@pytest.mark.parametrize(
    ("state", "message"),
    [
        ("", "requestState is not valid"),
        ("garbage", "requestState is not valid"),
        ("s2.k1.e30.AAAA", "requestState is not valid"),
        ("s1.k1.e30", "requestState is not valid"),
        ("s1.nokey.e30.AAAA", "requestState was sealed with an unknown key"),
        (12, "requestState must be a string"),
        ({"a": 1}, "requestState must be a string"),
    ],
)
def test_malformed_state(state: object, message: str) -> None:
    refused(RING, CTX, state, message)


def test_forged_with_another_key_is_refused() -> None:
    forged = seal(KeyRing({"k1": K2}), CTX, {"a": {}}, ttl_s=60)
    refused(RING, CTX, forged, "requestState failed verification")


def test_expiry() -> None:
    now = 1_000_000.0
    s = seal(RING, CTX, {}, ttl_s=30, now=now)
    assert unseal(RING, CTX, s, now=now + 29) == {}
    refused(RING, CTX, s, "requestState has expired; start the request again without it", now=now + 31)


def test_another_principals_state_is_answered_as_an_invalid_one() -> None:
    """Nothing tells its holder that it is genuine: not its expiry, not the request it belongs to."""
    now = 1_000_000.0
    s = seal(RING, CTX, {}, ttl_s=60, now=now)
    bob = StateContext("bob", CTX.method, CTX.digest)
    refused(RING, bob, "v1.k1.e30.x", "requestState is not valid", now=now)  # what a mangled one gets
    refused(RING, bob, s, "requestState is not valid", now=now)
    refused(RING, bob, s, "requestState is not valid", now=now + 61)  # expired, yet not said so
    bob_elsewhere = StateContext("bob", "prompts/get", params_digest("prompts/get", PARAMS))
    refused(RING, bob_elsewhere, s, "requestState is not valid", now=now)


def test_replay_onto_another_method_or_params() -> None:
    s = seal(RING, CTX, {}, ttl_s=60)
    other_method = StateContext("alice", "prompts/get", params_digest("prompts/get", PARAMS))
    refused(RING, other_method, s, "requestState belongs to a different request")
    other_params = StateContext(
        "alice", "tools/call", params_digest("tools/call", {**PARAMS, "arguments": {"dir": "/etc"}})
    )
    refused(RING, other_params, s, "requestState belongs to a different request")
    other_tool = StateContext("alice", "tools/call", params_digest("tools/call", {**PARAMS, "name": "other"}))
    refused(RING, other_tool, s, "requestState belongs to a different request")


def test_key_rotation_old_key_still_opens() -> None:
    old = KeyRing({"k1": K1})
    s_old = seal(old, CTX, {"v": "old"}, ttl_s=60)
    rotated = KeyRing({"k2": K2, "k1": K1})
    assert rotated.current == "k2"
    assert unseal(rotated, CTX, s_old) == {"v": "old"}
    s_new = seal(rotated, CTX, {"v": "new"}, ttl_s=60)
    assert s_new.startswith("s1.k2.")
    refused(old, CTX, s_new, "requestState was sealed with an unknown key")
    # once the old key is retired, its states stop opening
    refused(KeyRing({"k2": K2}), CTX, s_old, "requestState was sealed with an unknown key")


def test_key_ring_from_config() -> None:
    b64 = base64.b64encode(K2).decode()
    urlsafe = base64.urlsafe_b64encode(K1).decode().rstrip("=")
    ring = KeyRing.from_config(f" new:{b64} , old:{urlsafe} ")
    assert ring.current == "new"
    assert ring.key("new") == K2 and ring.key("old") == K1
    text = KeyRing.from_config("t:this is a sixteen+ byte passphrase")
    assert text.key("t") == b"this is a sixteen+ byte passphrase"
    # config ring: a state sealed under "old" still opens after "new" is prepended
    s = seal(KeyRing.from_config(f"old:{urlsafe}"), CTX, 1, ttl_s=60)
    assert unseal(ring, CTX, s) == 1


@pytest.mark.parametrize("spec", ["", "nocolon", "k:short", ".bad:" + "x" * 20, ":" + "x" * 20])
def test_key_ring_config_errors(spec: str) -> None:
    with pytest.raises(ValueError):
        KeyRing.from_config(spec)


def test_key_ring_validation() -> None:
    with pytest.raises(ValueError):
        KeyRing({})
    with pytest.raises(ValueError):
        KeyRing({"a": K1}, current="b")
    assert KeyRing.generate().ephemeral and not RING.ephemeral


def test_check_input_responses() -> None:
    assert check_input_responses(None) == {}
    assert check_input_responses({"a": {"action": "accept"}}) == {"a": {"action": "accept"}}
    for bad in ([], "x", {"a": 1}, {"a": []}):
        with pytest.raises(McpError) as e:
            check_input_responses(bad)
        assert e.value.code == -32602
