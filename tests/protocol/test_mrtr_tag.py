"""Only the exact sealed `requestState` text verifies: no empty, padded, junk-suffixed or bit-twiddled tag,
and non-ASCII input is an ordinary invalid state (-32602), never an internal error."""

from __future__ import annotations

import base64

import pytest

from mcp_stateless import KeyRing
from mcp_stateless.protocol import errors
from mcp_stateless.protocol.errors import McpError
from mcp_stateless.protocol.mrtr import StateContext, params_digest, seal, unseal

RING = KeyRing({"k1": b"k" * 32})
CTX = StateContext("alice", "tools/call", params_digest("tools/call", {"name": "t"}))
SEALED = seal(RING, CTX, {"round": 1}, ttl_s=30 * 24 * 3600)  # sealed at import: outlives any test run
HEAD, TAG = SEALED.rsplit(".", 1)


def _same_bytes_other_text(tag: str) -> str:
    """A tag string that decodes to the same 32 bytes: 43 base64 chars carry 258 bits, the last 2 unused."""
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    last = alphabet.index(tag[-1])
    twin = tag[:-1] + alphabet[last ^ 1]
    assert base64.urlsafe_b64decode(twin + "=") == base64.urlsafe_b64decode(tag + "=")
    return twin


@pytest.mark.parametrize(
    "state",
    [
        f"{HEAD}.",  # empty tag
        f"{HEAD}.{TAG}==",  # padding appended
        f"{HEAD}.{TAG}!!!!",  # junk the lenient decoder would skip
        f"{HEAD}.{_same_bytes_other_text(TAG)}",  # non-canonical encoding of the right bytes
    ],
    ids=["empty", "padded", "junk", "unused-bits"],
)
def test_only_the_exact_tag_verifies(state: str) -> None:
    assert unseal(RING, CTX, SEALED) == {"round": 1}
    with pytest.raises(McpError) as e:
        unseal(RING, CTX, state)
    assert (e.value.code, e.value.message) == (errors.INVALID_PARAMS, "requestState failed verification")


@pytest.mark.parametrize("state", ["s1.k1.é.AAAA", SEALED + "é", "s1.k\u00e91.e30.AAAA"])
def test_non_ascii_state_is_invalid_params(state: str) -> None:
    with pytest.raises(McpError) as e:
        unseal(RING, CTX, state)
    assert (e.value.code, e.value.message) == (errors.INVALID_PARAMS, "requestState is not valid")
