"""`mrtr.tampered-state`'s forging probe: readable state is edited and re-encoded as it came; opaque state is not."""

from __future__ import annotations

import base64
import json

import pytest

from mcp_stateless.audit.checks.mrtr import FORGED_MEMBER, forge

ENVELOPE = json.dumps({"v": 1, "s": "{\"amount\": \"10.00\"}"}).encode()


@pytest.mark.parametrize(("encode", "decode"), [
    (lambda b: base64.urlsafe_b64encode(b).decode().rstrip("="), base64.urlsafe_b64decode),
    (lambda b: base64.urlsafe_b64encode(b).decode(), base64.urlsafe_b64decode),
    (lambda b: base64.b64encode(b).decode(), base64.b64decode),
    (lambda b: b.decode(), lambda s: s.encode()),
])
def test_readable_state_is_forged_in_its_own_encoding(encode: object, decode: object) -> None:
    state = encode(ENVELOPE)  # type: ignore[operator]
    forged = forge(state)
    assert forged is not None and forged != state
    if state.endswith("="):
        assert len(forged) % 4 == 0  # padded as it came
    else:
        assert not forged.endswith("=")
    padded = forged + "=" * (-len(forged) % 4) if not forged.startswith("{") else forged
    assert json.loads(decode(padded)) == {**json.loads(ENVELOPE), FORGED_MEMBER: True}  # type: ignore[operator]


@pytest.mark.parametrize("state", ["v1.AAAAbm9uY2Vub25jZQ.c2VhbGVk",
                                   base64.urlsafe_b64encode(b"\x01\x02binary").decode(),
                                   base64.b64encode(b"[1, 2]").decode(), "{not json", ""])
def test_opaque_state_is_not_forged(state: str) -> None:
    assert forge(state) is None
