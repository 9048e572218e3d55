"""Who is calling: the principal every request is answered for, and the authenticator that finds it.

A transport asks its `Authenticator` once per HTTP request (before the body is read) and once per stdio
process (from its environment). The answer is a `Principal` or a `Challenge` the transport turns into
the refusal (HTTP status and `WWW-Authenticate`). Handles, tasks and sealed `requestState` bind to
`Principal.id`; scopes and claims are for authorization decisions and for handlers.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal, Protocol

TransportKind = Literal["http", "stdio", "memory"]

_NO_CLAIMS: Mapping[str, Any] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class Principal:
    """An authenticated caller. `id` is stable across requests (e.g. issuer + subject).

    `expires_at` (seconds since the epoch, None: never) is when the credentials it was found from stop
    being accepted; a transport ends a long-lived stream (a listen stream, a legacy GET stream) then, so
    an open connection never outlives the token that opened it."""

    id: str
    scopes: frozenset[str] = frozenset()
    claims: Mapping[str, Any] = field(default_factory=lambda: _NO_CLAIMS)
    expires_at: float | None = None

    def has_scopes(self, needed: frozenset[str] | set[str] | tuple[str, ...]) -> bool:
        """The one scope rule: every one of `needed` is granted (all of them, not any; none needed: True)."""
        return self.scopes.issuperset(needed)  # perf: one C call, it runs on every authenticated request


ANONYMOUS = Principal("anonymous")


@dataclass(frozen=True, slots=True)
class Challenge:
    """A refusal before dispatch: 401 (no or bad credentials) or 403 (insufficient scope).

    `www_authenticate` is the header value, e.g. ``Bearer resource_metadata="…", error="invalid_token"``.
    """

    status: int
    www_authenticate: str  # "" sends no WWW-Authenticate (e.g. a 503 while the issuer is unreachable)
    message: str = "Unauthorized"
    code: int = -32600  # the JSON-RPC error code of the refusal's body (INVALID_REQUEST)


@dataclass(frozen=True, slots=True)
class Credentials:
    """What a transport hands its authenticator: HTTP request headers (lower-cased names), or for stdio
    the headers an operator configured for the process (e.g. from its environment)."""

    transport: TransportKind
    headers: Mapping[str, str]


class Authenticator(Protocol):
    async def authenticate(self, credentials: Credentials) -> Principal | Challenge: ...


class AnonymousAuthenticator:
    """Everyone is `ANONYMOUS` (the default: no authentication configured)."""

    __slots__ = ()

    async def authenticate(self, credentials: Credentials) -> Principal | Challenge:
        return ANONYMOUS


PrincipalResolver = Callable[[Mapping[str, str] | None], str]


# Principals a resolver authenticator keeps to hand out again (they are immutable); past this many
# distinct ids the cache starts afresh, so memory stays bounded whoever calls.
RESOLVED_CACHE = 4096


class ResolverAuthenticator:
    """Adapts a synchronous ``(headers) -> principal id`` function (headers None on stdio).

    perf: transports call `principal_for` directly (no coroutine, no `Credentials`), and the same id
    gets the same `Principal` object back."""

    __slots__ = ("_known", "_resolve")

    def __init__(self, resolve: PrincipalResolver) -> None:
        self._resolve = resolve
        self._known: dict[str, Principal] = {}

    def principal_for(self, headers: Mapping[str, str] | None) -> Principal:
        pid = self._resolve(headers)
        known = self._known.get(pid)
        if known is None:
            if len(self._known) >= RESOLVED_CACHE:
                self._known.clear()
            known = self._known[pid] = Principal(pid)
        return known

    async def authenticate(self, credentials: Credentials) -> Principal | Challenge:
        return self.principal_for(credentials.headers if credentials.transport == "http" else None)
