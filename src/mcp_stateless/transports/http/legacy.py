"""The 2025-era leg of the HTTP edge: the exchanges `protocol.legacy.era_of` calls legacy (and, with
`legacy_sse`, the 2024-11-05 HTTP+SSE transport) handed to the legacy branch over the `LegacyEndpoint`
seam, its retirement policy applied, and its replies written (a JSON body, an empty status, or an SSE
stream). The branch says what became of an exchange (`LegacyOutcome`); the HTTP status for each is
chosen here and only here (`STATUS`), as the modern path's are from the error code. Each exchange is
counted with the status it got. Imported only when a transport serves that era, so the modern request
path never loads it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import types
import urllib.parse
from collections.abc import AsyncGenerator, Callable, Mapping
from typing import Any

from ...protocol import errors, sse
from ...protocol.asgi import Receive, Scope, Send
from ...protocol.encoding import encode_message
from ...protocol.endpoint import KeepAlive, LegacyEndpoint, LegacyItem, LegacyOutcome, LegacyReply
from ...protocol.errors import McpError
from ...protocol.legacy import SESSION_HEADER, request_id, requested_version
from ...protocol.principal import Principal
from ...protocol.retirement import Retirement
from . import respond
from .guards import Authentication, accepts_sse
from .routing import CHANNEL_PARAM

log = logging.getLogger("mcp_stateless.legacy")

# What each outcome of a 2025-era exchange is on HTTP.
STATUS: Mapping[LegacyOutcome, int] = types.MappingProxyType({
    LegacyOutcome.OK: 200,
    LegacyOutcome.ACCEPTED: 202,
    LegacyOutcome.BAD_REQUEST: 400,
    # the authorization spec's step-up: 403 with a challenge naming the scopes, which 2025-11-25 clients act on
    LegacyOutcome.INSUFFICIENT_SCOPE: 403,
    LegacyOutcome.UNKNOWN_SESSION: 404,  # the Streamable HTTP transport's "start a new session"
    LegacyOutcome.NOT_ACCEPTABLE: 406,
    LegacyOutcome.TOO_MANY: 429,
    LegacyOutcome.FAILED: 500,
})


def exchange_kind(http_method: str, message: Any) -> str:
    """What a legacy exchange was, for counters and logs: get, delete, initialize, response, notification,
    request (a method name would let clients grow the counter without bound)."""
    if http_method != "POST":
        return http_method.lower()
    if not isinstance(message, dict):
        return "invalid"
    if message.get("method") == "initialize":
        return "initialize"
    if "method" not in message:
        return "response"
    return "request" if "id" in message else "notification"


class LegacyLeg:
    """Serves the 2025 era of one endpoint: `legacy` answers, `auth` says who calls (GET/DELETE and
    HTTP+SSE streams are authenticated here), `legacy_until` retires the era, `modern_versions` are named
    in the retirement refusal, `path` is the endpoint's (None: any) for the HTTP+SSE `endpoint` event."""

    def __init__(self, legacy: LegacyEndpoint, auth: Authentication, *, legacy_sse: bool,
                 legacy_until: Retirement | None, modern_versions: Callable[[], Any], path: str | None) -> None:
        self.legacy = legacy
        self.auth = auth
        self.legacy_sse = legacy_sse
        self.legacy_until = legacy_until
        self._modern_versions = modern_versions
        self.path = path

    @staticmethod
    def channel(scope: Scope) -> str | None:
        """The 2024-11-05 channel a POST names in its query string (the stream's `endpoint` event)."""
        values = urllib.parse.parse_qs(scope["query_string"].decode("latin-1")).get(CHANNEL_PARAM)
        return values[0] if values else None

    async def exchange(self, method: str, message: Any, headers: dict[str, str], receive: Receive, send: Send,
                       who: Principal | None = None, can_sse: bool | None = None) -> None:
        """Hand a 2025-era exchange to the legacy branch (GET/DELETE are authenticated here)."""
        if who is None:
            who = await self.auth.principal(headers, send)
            if who is None:
                return
        if can_sse is None:
            can_sse = accepts_sse(headers)
        if await self._retired(message, headers, send):
            return
        reply = await self.legacy.exchange(method, message, headers, who, can_sse)
        status = self._counted(method, message, reply)
        # The GET stream is the session's long-lived one: it ends when the token that opened it expires.
        expires_at = who.expires_at if method == "GET" else None
        await write(status, reply, self._headers(reply), receive, send, expires_at)

    def _counted(self, method: str, message: Any, reply: LegacyReply) -> int:
        """The HTTP status of `reply`, the exchange counted with it."""
        status = STATUS[reply.kind]
        kind = exchange_kind(method, message)
        self.legacy.count(kind, status)
        if log.isEnabledFor(logging.DEBUG):
            log.debug("legacy %s -> %d", kind, status, extra={"era": "legacy", "legacy_kind": kind})
        return status

    def _headers(self, reply: LegacyReply) -> list[tuple[str, str]]:
        """The headers a reply's outcome calls for, then `Deprecation` and `Sunset` while a retirement
        date lies ahead."""
        out: list[tuple[str, str]] = []
        if reply.session_id is not None:
            out.append((SESSION_HEADER, reply.session_id))
        if reply.retry_after_s is not None:
            out.append(("Retry-After", str(reply.retry_after_s)))
        if reply.scopes is not None:  # the 2025-11-25 clients step up on the modern path's challenge
            out.append(("www-authenticate", self.auth.scope_challenge(reply.scopes)))
        if self.legacy_until is not None:
            out.extend(self.legacy_until.headers())
        return out

    async def _retired(self, message: Any, headers: Mapping[str, str], send: Send) -> bool:
        """After the legacy retirement date: refuse (410), and True."""
        until = self.legacy_until
        if until is None or not until.retired(time.time()):
            return False
        refusal = until.refusal(request_id(message), self._modern_versions(), requested_version(message, headers))
        await respond.send_json(send, refusal.status, refusal.body())
        return True

    async def sse_open(self, scope: Scope, headers: dict[str, str], receive: Receive, send: Send) -> None:
        """GET without a session: a 2024-11-05 HTTP+SSE stream, whose first event names where to POST."""
        if not accepts_sse(headers):
            await respond.error(send, 406, None, McpError(
                errors.INVALID_REQUEST, "Not Acceptable: the HTTP+SSE stream needs Accept: text/event-stream"))
            return
        who = await self.auth.principal(headers, send)
        if who is None:
            return
        if await self._retired(None, headers, send):
            return
        token, stream = await self.legacy.sse_open(who)
        self.legacy.count("sse", 200)
        base = scope.get("root_path", "") + (self.path if self.path is not None else scope.get("path", "/"))
        url = f"{urllib.parse.quote(base)}?{CHANNEL_PARAM}={urllib.parse.quote(token, safe='')}"
        extra = self.legacy_until.headers() if self.legacy_until is not None else ()
        await write_channel(url, extra, stream, receive, send, who.expires_at)

    async def sse_post(self, channel: str, message: Any, headers: dict[str, str], who: Principal,
                       receive: Receive, send: Send) -> None:
        if await self._retired(message, headers, send):
            return
        reply = await self.legacy.sse_post(channel, message, headers, who)
        status = self._counted("POST", message, reply)
        await write(status, reply, self._headers(reply), receive, send)


def _frame(item: LegacyItem) -> bytes:
    if isinstance(item, KeepAlive):
        return sse.KEEPALIVE
    head = b"" if item.id is None else b"id: " + item.id.encode("ascii", "replace") + b"\n"
    if item.retry is not None:
        head += b"retry: %d\n" % item.retry
    if item.message is None:  # a priming event: an id to resume from, no message
        return head + b"data: \n\n"
    return head + sse.event(encode_message(item.message))


def _encoded(headers: list[tuple[str, str]]) -> list[tuple[bytes, bytes]]:
    return [(k.encode("latin-1"), v.encode("latin-1")) for k, v in headers]


async def write(status: int, reply: LegacyReply, headers: list[tuple[str, str]], receive: Receive, send: Send,
                expires_at: float | None = None) -> None:
    """Write `reply` with `status` and `headers`; a stream is ended (its response completed) at
    `expires_at` (epoch seconds)."""
    extra = _encoded(headers)
    stream = reply.stream
    if stream is None:
        if reply.message is None:
            await send({"type": "http.response.start", "status": status, "headers": extra})
            await send({"type": "http.response.body", "body": b""})
            return
        data = encode_message(reply.message)
        head = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(data)), *extra]
        await send({"type": "http.response.start", "status": status, "headers": head})
        await send({"type": "http.response.body", "body": data})
        return
    await _stream(status, extra, stream, receive, send, expires_at)


async def _stream(status: int, extra: list[tuple[bytes, bytes]], stream: AsyncGenerator[LegacyItem, None],
                  receive: Receive, send: Send, expires_at: float | None) -> None:
    # The stream's first item comes before the headers: a GET stream is subscribed by then, so nothing
    # published after the client sees 200 is missed.
    try:
        first = await anext(stream)
    except StopAsyncIteration:
        first = None
    await send({"type": "http.response.start", "status": status, "headers": [*sse.HEADERS, *extra]})
    if first is None:
        await send({"type": "http.response.body", "body": b""})
        return
    await send({"type": "http.response.body", "body": _frame(first), "more_body": True})
    await _follow(stream, receive, send, expires_at)


async def write_channel(endpoint_url: str, headers: tuple[tuple[str, str], ...],
                        stream: AsyncGenerator[LegacyItem, None], receive: Receive, send: Send,
                        expires_at: float | None = None) -> None:
    """A 2024-11-05 HTTP+SSE stream: the `endpoint` event naming where to POST, then the channel's
    messages until the client goes away (or `expires_at`, when the token that opened it expires)."""
    extra = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in headers]
    await send({"type": "http.response.start", "status": 200, "headers": [*sse.HEADERS, *extra]})
    frame = b"event: endpoint\ndata: " + endpoint_url.encode("ascii") + b"\n\n"
    try:
        await send({"type": "http.response.body", "body": frame, "more_body": True})
    except OSError:
        await stream.aclose()
        return
    await _follow(stream, receive, send, expires_at)


async def _follow(stream: AsyncGenerator[LegacyItem, None], receive: Receive, send: Send,
                  expires_at: float | None) -> None:
    """Write the rest of `stream` until it ends, the client disconnects or `expires_at` (epoch seconds)
    passes; close it in every case."""
    loop = asyncio.get_running_loop()
    pump = loop.create_task(_pump(stream, send))
    gone = loop.create_task(respond.wait_disconnect(receive))
    expiry = None if expires_at is None else loop.call_later(max(0.0, expires_at - time.time()), pump.cancel)
    try:
        await asyncio.wait((pump, gone), return_when=asyncio.FIRST_COMPLETED)
    finally:
        if expiry is not None:
            expiry.cancel()
        client_left = gone.done() and not gone.cancelled()
        for t in (pump, gone):
            if not t.done():
                t.cancel()
        await asyncio.wait((pump, gone))
        await stream.aclose()
    if pump.cancelled() and not client_left:  # the token expired: end the response (the client reconnects)
        with contextlib.suppress(OSError):
            await send({"type": "http.response.body", "body": b""})
        return
    if not pump.cancelled() and pump.exception() is not None:
        raise pump.exception()  # type: ignore[misc]


async def _pump(stream: AsyncGenerator[LegacyItem, None], send: Send) -> None:
    try:
        async for item in stream:
            await send({"type": "http.response.body", "body": _frame(item), "more_body": True})
        await send({"type": "http.response.body", "body": b""})
    except OSError:
        return
