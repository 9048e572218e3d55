"""MRTR (SEP-2322): sealed `requestState` and the shape rules for `inputRequests` / `inputResponses`.

`requestState` is attacker-controlled, so it is HMAC-SHA256 sealed with a key from a `KeyRing` that every
instance shares, and bound to the principal, the method, a digest of the original params and an expiry.
Format: ``s1.<kid>.<base64url payload>.<base64url tag>``; the tag covers everything before it.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import time
from collections.abc import Mapping
from typing import Any

import orjson

from . import methods
from .errors import McpError, invalid_params

_VERSION = "s1"
# Params that a retry adds; everything else must be byte-for-byte the original request.
MRTR_PARAMS = frozenset({"inputResponses", "requestState", "_meta"})
MRTR_METHODS = methods.MRTR_METHODS  # the method table's `mrtr` (protocol/methods.py)


def _b64e(b: bytes) -> str:
    return base64.urlsafe_b64encode(b).rstrip(b"=").decode("ascii")


def _b64d(s: str) -> bytes:
    return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))


class KeyRing:
    """HMAC keys by key id. The first key seals; all of them open (so keys can rotate)."""

    __slots__ = ("_current", "_keys", "ephemeral")

    def __init__(self, keys: Mapping[str, bytes], current: str | None = None, *, ephemeral: bool = False) -> None:
        if not keys:
            raise ValueError("a key ring needs at least one key")
        for kid, key in keys.items():
            if not kid or "." in kid:
                raise ValueError(f"invalid key id {kid!r} (non-empty, no dots)")
            if len(key) < 16:
                raise ValueError(f"key {kid!r} is shorter than 16 bytes")
        self._keys = dict(keys)
        self._current = current if current is not None else next(iter(self._keys))
        if self._current not in self._keys:
            raise ValueError(f"current key id {self._current!r} is not in the ring")
        self.ephemeral = ephemeral

    @classmethod
    def generate(cls) -> KeyRing:
        """A random per-process key: only correct when exactly one process serves the endpoint."""
        return cls({"local": os.urandom(32)}, ephemeral=True)

    @classmethod
    def from_config(cls, spec: str) -> KeyRing:
        """Parse ``kid:secret[,kid:secret...]``; the first entry seals. Secrets are base64 (url-safe or
        standard) or, failing that, taken as UTF-8 text of at least 16 bytes."""
        keys: dict[str, bytes] = {}
        for part in spec.split(","):
            part = part.strip()
            if not part:
                continue
            kid, sep, secret = part.partition(":")
            if not sep:
                raise ValueError("each key must be written kid:secret")
            keys[kid.strip()] = _decode_secret(secret.strip())
        return cls(keys)

    @property
    def current(self) -> str:
        return self._current

    def key(self, kid: str) -> bytes | None:
        return self._keys.get(kid)


def _decode_secret(secret: str) -> bytes:
    for decoder in (base64.urlsafe_b64decode, base64.b64decode):
        try:
            raw = decoder(secret + "=" * (-len(secret) % 4))
        except ValueError:
            continue
        if len(raw) >= 16:
            return raw
    return secret.encode("utf-8")


def params_digest(method: str, params: Mapping[str, Any]) -> str:
    """Digest of the request identity: method plus the original params (MRTR fields excluded)."""
    core = {k: v for k, v in params.items() if k not in MRTR_PARAMS}
    blob = method.encode() + b"\n" + orjson.dumps(core, option=orjson.OPT_SORT_KEYS)
    return _b64e(hashlib.sha256(blob).digest()[:18])


class StateContext:
    """What a sealed state is bound to.

    perf: `StateContext.of(principal, method, params)` defers the params digest (a sorted JSON dump and
    a SHA-256) until a state is actually sealed or opened, which most tools/call requests never do."""

    __slots__ = ("_digest", "_params", "method", "principal")

    def __init__(self, principal: str, method: str, digest: str | None = None) -> None:
        self.principal = principal
        self.method = method
        self._digest = digest
        self._params: Mapping[str, Any] | None = None

    @classmethod
    def of(cls, principal: str, method: str, params: Mapping[str, Any]) -> StateContext:
        ctx = cls(principal, method)
        ctx._params = params
        return ctx

    @property
    def digest(self) -> str:
        if self._digest is None:
            self._digest = params_digest(self.method, self._params or {})
        return self._digest

    def __repr__(self) -> str:
        return f"StateContext({self.principal!r}, {self.method!r}, {self.digest!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, StateContext):
            return NotImplemented
        return (self.principal, self.method, self.digest) == (other.principal, other.method, other.digest)

    __hash__ = None  # type: ignore[assignment]  # mutable: equal by value, never a dict key


def seal(ring: KeyRing, ctx: StateContext, payload: Any, ttl_s: float, now: float | None = None) -> str:
    exp = int((time.time() if now is None else now) + ttl_s)
    body = orjson.dumps({"p": ctx.principal, "m": ctx.method, "d": ctx.digest, "e": exp, "v": payload})
    kid = ring.current
    head = f"{_VERSION}.{kid}.{_b64e(body)}"
    key = ring.key(kid)
    assert key is not None
    tag = hmac.new(key, head.encode("ascii"), hashlib.sha256).digest()
    return f"{head}.{_b64e(tag)}"


def unseal(ring: KeyRing, ctx: StateContext, state: Any, now: float | None = None) -> Any:
    """Verify and return the payload; any failure is -32602 with a reason the caller can log."""
    if not isinstance(state, str):
        raise invalid_params("requestState must be a string")
    if not state.isascii():  # a sealed state is plain ASCII; anything else is forged or mangled
        raise invalid_params("requestState is not valid")
    parts = state.split(".")
    if len(parts) != 4 or parts[0] != _VERSION:
        raise invalid_params("requestState is not valid")
    _, kid, body_b64, tag_b64 = parts
    key = ring.key(kid)
    if key is None:
        raise invalid_params("requestState was sealed with an unknown key")
    head = f"{_VERSION}.{kid}.{body_b64}"
    # Compare the exact sealed text, not decoded bytes: base64 decoding forgives padding, junk and unused
    # trailing bits, so several strings would otherwise verify for one tag.
    expected = _b64e(hmac.new(key, head.encode("ascii"), hashlib.sha256).digest())
    if not hmac.compare_digest(tag_b64, expected):
        raise invalid_params("requestState failed verification")
    try:  # only a verified payload is ever parsed
        body = orjson.loads(_b64d(body_b64))
    except (ValueError, orjson.JSONDecodeError):
        raise invalid_params("requestState is not valid") from None
    # Another principal's state is answered as a malformed one, and before anything else is said about it
    # (expired, another request): its holder learns nothing, not even that it is genuine.
    if not isinstance(body, dict) or body.get("p") != ctx.principal:
        raise invalid_params("requestState is not valid")
    if body.get("e", 0) < (time.time() if now is None else now):
        raise invalid_params("requestState has expired; start the request again without it")
    if body.get("m") != ctx.method or body.get("d") != ctx.digest:
        raise invalid_params("requestState belongs to a different request")
    return body.get("v")


def check_input_responses(value: Any) -> dict[str, Any]:
    """`inputResponses` must be an object of objects (unknown keys are ignored later, not here)."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise McpError(-32602, "inputResponses must be an object keyed by the inputRequests keys")
    for k, v in value.items():
        if not isinstance(v, dict):
            raise McpError(-32602, f"inputResponses[{k!r}] must be an object")
    return value
