"""The one place every HTTP request of a client passes: where an auth hook signs it and may react to a
refusal (httpx's auth-flow idea).

An `Auth` is an async generator per request: it yields the request to send (headers filled in), receives
the response, and either returns (that response is the answer) or yields a new request to send instead,
for example after refreshing a token on a 401. Modern requests, the era probe, legacy Streamable HTTP
(POST, GET stream, DELETE) and the 2024-11-05 HTTP+SSE transport all go through `send`.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from dataclasses import dataclass
from typing import Protocol

from .http11 import HttpUrl, Pool, Response


@dataclass(slots=True)
class HttpRequest:
    """One outgoing HTTP request; an auth flow may change its headers (or anything else) before it goes out."""

    method: str
    endpoint: HttpUrl
    headers: dict[str, str]
    body: bytes = b""


class Auth(Protocol):
    def auth_flow(self, request: HttpRequest) -> AsyncGenerator[HttpRequest, Response]: ...


class BearerToken:
    """A static `Authorization: Bearer …` on every request (no refresh)."""

    __slots__ = ("_value",)

    def __init__(self, token: str) -> None:
        self._value = f"Bearer {token}"

    async def auth_flow(self, request: HttpRequest) -> AsyncGenerator[HttpRequest, Response]:
        request.headers["Authorization"] = self._value
        yield request


async def send(pool: Pool, request: HttpRequest, auth: Auth | None, *, timeout: float | None) -> Response:
    """Send `request` through `auth`'s flow; the response the flow settles on is returned unread."""
    if auth is None:
        return await pool.request(request.method, request.endpoint, request.headers, request.body, timeout=timeout)
    flow = auth.auth_flow(request)
    try:
        outgoing = await flow.__anext__()
        while True:
            response = await pool.request(
                outgoing.method, outgoing.endpoint, outgoing.headers, outgoing.body, timeout=timeout
            )
            try:
                outgoing = await flow.asend(response)
            except StopAsyncIteration:
                return response
            except BaseException:
                await response.aclose()  # the flow failed (e.g. the authorization was refused): nobody reads it
                raise
            await response.aclose()  # the flow sends another request instead of this response
    finally:
        await flow.aclose()


__all__ = ["Auth", "BearerToken", "HttpRequest", "send"]
