"""Callers told apart by the credentials they send, for an upstream that checks them itself.

A 2025 HTTP upstream that takes bearer tokens decides who may do what; the bridge in front of it does not
validate anything (it has no issuer to trust). With `Bridge(credentialed=…)` it forwards each caller's
`Authorization` header unchanged on the upstream sessions it opens for that caller, and tells callers apart
by that value: the principal is a digest of it, so a session opened with one caller's credential is never
used for a request that carries another (a rotated token is a new caller, with sessions of its own). The
credential stays in this process (in the principal's claims, for the pool to open sessions with); only its
digest is ever keyed, logged or published on the state bus.
"""

from __future__ import annotations

import hashlib
from types import MappingProxyType

from ..protocol.principal import ANONYMOUS, Challenge, Credentials, Principal

CREDENTIAL_CLAIM = "dev.mcp-stateless/bridge-credential"
# Principals kept to hand out again; past this many distinct credentials the cache starts afresh.
KNOWN = 4096


class ForwardedCredentials:
    """The `Authenticator` of a bridge that forwards credentials: no `Authorization` is `ANONYMOUS`."""

    __slots__ = ("_known",)

    def __init__(self) -> None:
        self._known: dict[str, Principal] = {}

    async def authenticate(self, credentials: Credentials) -> Principal | Challenge:
        value = credentials.headers.get("authorization") if credentials.transport == "http" else None
        if not value:
            return ANONYMOUS
        known = self._known.get(value)
        if known is None:
            if len(self._known) >= KNOWN:
                self._known.clear()
            digest = hashlib.sha256(value.encode()).hexdigest()[:32]
            known = self._known[value] = Principal(f"credential:{digest}",
                                                   claims=MappingProxyType({CREDENTIAL_CLAIM: value}))
        return known


def credential_of(principal: Principal) -> str | None:
    """The `Authorization` value `principal` was found from (None: anonymous, or not forwarding)."""
    value = principal.claims.get(CREDENTIAL_CLAIM)
    return value if isinstance(value, str) else None
