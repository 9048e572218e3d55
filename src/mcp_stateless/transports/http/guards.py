"""What a request must pass before its body is handled, in the order the endpoint applies them: the
header lines, Host/Origin (`protocol.security`), Content-Type, Accept, who is calling (before the body is
read), and the body limit; both eras use the same ones. perf: each is a plain function returning
the refusal (the transport writes it), so a request that passes them all awaits nothing here but its
authenticator."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ...protocol import errors
from ...protocol.asgi import Receive, Scope, Send
from ...protocol.errors import McpError
from ...protocol.headers import accepted_media, repeated_header
from ...protocol.principal import (
    ANONYMOUS,
    AnonymousAuthenticator,
    Authenticator,
    Challenge,
    Credentials,
    Principal,
    ResolverAuthenticator,
)
from ...protocol.security import OriginPolicy
from . import respond

_LOOPBACK_ADDRS = frozenset({"127.0.0.1", "::1", "localhost"})


def header_dict(raw: list[tuple[bytes, bytes]]) -> dict[str, str] | McpError:
    """The request's headers by lower-cased name, or the refusal (400) when a single-valued one repeats."""
    # perf: one comprehension; only when it collapsed repeated lines are they looked at
    headers: dict[str, str] = {k.decode("latin-1"): v.decode("latin-1") for k, v in raw}
    if len(headers) != len(raw):
        problem = repeated_header(raw)
        if problem is not None:
            return problem
    return headers


_VERDICTS_MAX = 1024  # distinct (bind, Host, Origin) answers kept; a client inventing Hosts only clears them


class Origins:
    """Host/Origin validation: the configured policy, else by the address the server is bound to."""

    __slots__ = ("_loopback", "_public", "_verdicts", "given")

    def __init__(self, given: OriginPolicy | None) -> None:
        self.given = given
        self._loopback = OriginPolicy.loopback()
        self._public = OriginPolicy.public()
        # perf: the verdict is a pure function of the policy, Host and Origin, and a server sees a handful of
        # pairs: one dict lookup per request instead of six calls that split and compare the values.
        self._verdicts: dict[tuple[bool | None, str | None, str | None], str | None] = {}

    def policy(self, scope: Scope) -> OriginPolicy:
        if self.given is not None:
            return self.given
        server = scope.get("server")
        if server and server[0] in _LOOPBACK_ADDRS:
            return self._loopback
        return self._public

    def refusal(self, scope: Scope, headers: Mapping[str, str]) -> McpError | None:
        """Why the Host or Origin is refused (403), or None."""
        host, origin = headers.get("host"), headers.get("origin")
        if self.given is None:
            server = scope.get("server")
            key: tuple[bool | None, str | None, str | None] = (
                server is not None and server[0] in _LOOPBACK_ADDRS, host, origin)
        else:
            key = (None, host, origin)
        try:
            why = self._verdicts[key]
        except KeyError:
            why = self.policy(scope).check(host, origin)
            if len(self._verdicts) >= _VERDICTS_MAX:
                self._verdicts.clear()
            self._verdicts[key] = why
        return None if why is None else McpError(errors.INVALID_REQUEST, why)


@dataclass(frozen=True, slots=True)
class Refusal:
    status: int
    error: McpError


def media(headers: Mapping[str, str]) -> tuple[bool, bool] | Refusal:
    """For a POST: (JSON accepted, SSE accepted), or the refusal (415, 406)."""
    ctype = headers.get("content-type")
    if ctype is not None and ctype.split(";", 1)[0].strip().lower() != "application/json":
        return Refusal(415, McpError(errors.INVALID_REQUEST, "Content-Type must be application/json"))
    can = accepted_media(headers.get("accept", "*/*"))
    if not (can[0] or can[1]):
        return Refusal(406, McpError(errors.INVALID_REQUEST, "Accept must list application/json and text/event-stream"))
    return can


def accepts_sse(headers: Mapping[str, str]) -> bool:
    """The looser test the 2025 transports apply to GET streams and answers."""
    accept = headers.get("accept", "*/*").lower()
    return "*/*" in accept or "text/event-stream" in accept or "text/*" in accept


class Authentication:
    """Who is calling, with one fast path: no coroutine when nothing is configured or the resolver is
    synchronous. `scope_challenge` is the `WWW-Authenticate` asking to step up to more scopes."""

    __slots__ = ("_anonymous", "_resolver", "_step_up", "authenticator")

    def __init__(self, authenticator: Authenticator) -> None:
        self.authenticator = authenticator
        self._anonymous = isinstance(authenticator, AnonymousAuthenticator)
        self._resolver = authenticator if isinstance(authenticator, ResolverAuthenticator) else None
        # An OAuth authenticator (auth.BearerAuthenticator) brings the 403 step-up challenge for
        # `InsufficientScope`; optional, so any Authenticator works.
        self._step_up: Callable[[frozenset[str]], Challenge] | None = getattr(
            authenticator, "scope_challenge", None)

    def quick(self, headers: dict[str, str]) -> Principal | Challenge | None:
        """The caller without awaiting anything, or None when the authenticator must be awaited."""
        if self._anonymous:
            return ANONYMOUS
        if self._resolver is not None:
            return self._resolver.principal_for(headers)
        return None

    def full(self, headers: dict[str, str]) -> Awaitable[Principal | Challenge]:
        return self.authenticator.authenticate(Credentials("http", headers))

    async def principal(self, headers: dict[str, str], send: Send) -> Principal | None:
        """The caller, or None after its refusal."""
        who = self.quick(headers)
        if who is None:
            who = await self.full(headers)
        if isinstance(who, Challenge):
            await respond.challenge(send, who)
            return None
        return who

    def scope_challenge(self, scopes: frozenset[str]) -> str:
        """The `WWW-Authenticate` value asking the client to step up to `scopes` (either era)."""
        if self._step_up is not None:
            return self._step_up(scopes).www_authenticate
        return f'Bearer error="insufficient_scope", scope="{" ".join(sorted(scopes))}"'


async def read_body(headers: Mapping[str, str], max_body: int, receive: Receive, send: Send) -> bytes | None:
    """The whole body, or None: the client left, or it is larger than `max_body` (413)."""
    length = headers.get("content-length")
    if length is not None and length.isdigit() and int(length) > max_body:
        await _too_large(send, max_body)
        return None
    chunks: list[bytes] = []
    size = 0
    while True:
        msg: Any = await receive()
        if msg["type"] == "http.disconnect":
            return None
        chunk = msg.get("body", b"")
        if chunk:
            size += len(chunk)
            if size > max_body:
                await _too_large(send, max_body)
                return None
            chunks.append(chunk)
        if not msg.get("more_body", False):
            break
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


async def _too_large(send: Send, max_body: int) -> None:
    await respond.error(send, 413, None, McpError(errors.INVALID_REQUEST, f"Request body exceeds {max_body} bytes"))
