"""Streamable HTTP (2026-07-28), and the 2025 era beside it, as a plain ASGI application.

It moves bytes and cancellation only: every rule (envelope, headers, versions, errors) comes from the
sans-IO core, every answer from an `Endpoint` (an `App`, or anything else that speaks the seam). One job
per module:

- `routing`: which app answers a path (metadata documents, routes, the Server Card, 404, the endpoint);
- `guards`: header lines, Host/Origin, Content-Type, Accept, who is calling (before the body is read),
  the body limit;
- `modern`: a modern request (JSON, or SSE once the handler emits notifications) and listen streams;
- `legacy`: the 2025 era's exchanges and the 2024-11-05 HTTP+SSE transport (loaded only when served);
- `respond`: the writers (every JSON body through `protocol.encoding.encode_message`);
- `card`: the SEP-2127 Server Card.

This module is the ASGI entry: the lifespan, starting the endpoint, and the order of the steps above.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import os
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import TYPE_CHECKING

from ...protocol import envelope, errors
from ...protocol.asgi import AsgiApp, Middleware, Receive, Scope, Send
from ...protocol.endpoint import Call, Endpoint, LegacyEndpoint, authenticator_for
from ...protocol.envelope import Notification, Rejection, Request
from ...protocol.errors import McpError
from ...protocol.legacy import declares_modern, era_of
from ...protocol.principal import ANONYMOUS, Authenticator, Principal
from ...protocol.retirement import Retirement
from ...protocol.security import OriginPolicy
from ..heap import settle_heap
from . import guards, respond
from .card import CardRoute, CardSource
from .modern import Modern
from .routing import CHANNEL_PARAM, SSE_SUFFIX, Router

if TYPE_CHECKING:
    from .legacy import LegacyLeg

__all__ = ["CHANNEL_PARAM", "DEFAULT_MAX_BODY", "DEFAULT_MAX_LISTEN_STREAMS", "INSTANCE_ENV", "SSE_SUFFIX",
           "HttpTransport"]

DEFAULT_MAX_BODY = 4 * 1024 * 1024
# Open `subscriptions/listen` streams per principal (per peer address for anonymous callers): a tenth of
# the default connection cap, so one caller holding streams cannot take every connection.
DEFAULT_MAX_LISTEN_STREAMS = 100
INSTANCE_ENV = "MCP_STATELESS_INSTANCE"

log = logging.getLogger("mcp_stateless.http")


class HttpTransport:
    """ASGI app serving one MCP endpoint.

    `path`: the endpoint path (None accepts any path, e.g. when mounted under a router).
    `authenticator`: who is calling (default: the endpoint's own, see `authenticator_for`).
    `origin_policy`: Host/Origin validation; the default refuses foreign Hosts on a loopback bind and
    any Origin but the loopback ones; on any other bind it accepts every Host and refuses every Origin
    (browsers), so a deployment serving browsers names them (`OriginPolicy.public([...])`).
    `legacy`: the 2025-era branch (e.g. `LegacyServer(app)`); None refuses 2025 clients as a modern-only
    server does (`initialize` gets -32601, GET/DELETE 405). `legacy_sse`: also serve the 2024-11-05
    HTTP+SSE transport (a GET on the endpoint, or on `<endpoint>/sse`, without a session id opens its
    stream; needs `legacy`). `legacy_until`: when the legacy era retires (`protocol.retirement`):
    `Deprecation`/`Sunset` headers before, HTTP 410 after; modern traffic is never affected.
    `server_card`: serve the SEP-2127 Server Card at `<endpoint>/server-card` (when the endpoint has a
    `card_identity()`, as `App` does); `public_url`: the endpoint's URL as clients reach it, for the card
    (default: from the request's scheme, Host and path).
    `routes`: exact paths (relative to a mount) answered by other ASGI apps, any method.
    `middleware`: ASGI middleware around every HTTP request (routes included), the first outermost.
    `max_listen_streams`: open `subscriptions/listen` streams one principal (an anonymous caller: one
    peer address) may hold; beyond it a listen is refused with 429 (-32600, `data.limit`, `Retry-After`).

    Mounted under a prefix (Starlette's `Mount`, FastAPI's `mount`: `root_path` is set), the mount point
    itself is the endpoint too. The endpoint is started (`startup()`) by the ASGI lifespan, or by the
    first request where the host does not forward the lifespan to mounted apps (Starlette does not):
    pass `lifespan=transport.lifespan` to the host app to also close it on shutdown.
    """

    def __init__(
        self,
        endpoint: Endpoint,
        *,
        authenticator: Authenticator | None = None,
        path: str | None = "/mcp",
        origin_policy: OriginPolicy | None = None,
        max_body: int = DEFAULT_MAX_BODY,
        instance: str | None = None,
        legacy: LegacyEndpoint | None = None,
        routes: Mapping[str, AsgiApp] | None = None,
        middleware: Sequence[Middleware] = (),
        legacy_sse: bool = False,
        legacy_until: Retirement | None = None,
        server_card: bool = True,
        public_url: str | None = None,
        max_listen_streams: int = DEFAULT_MAX_LISTEN_STREAMS,
    ) -> None:
        self.endpoint = endpoint
        self.max_listen_streams = max_listen_streams
        self._listening: collections.Counter[str] = collections.Counter()  # open streams by caller
        self._started: asyncio.Future[None] | None = None
        self._running = False
        # HTTP requests pass the middleware, the first given outermost; the lifespan goes straight to us.
        entry: AsgiApp = self._serve
        for wrap in reversed(middleware):
            entry = wrap(entry)
        self._entry = entry
        if legacy_sse and legacy is None:
            raise ValueError("legacy_sse needs the legacy branch (legacy=LegacyServer(app))")
        self.legacy = legacy
        self.legacy_sse = legacy_sse
        self.legacy_until = legacy_until
        self.public_url = public_url
        self.path = path
        self.max_body = max_body
        self.authenticator = authenticator_for(endpoint, authenticator)
        self._auth = guards.Authentication(self.authenticator)
        self._origins = guards.Origins(origin_policy)
        self._modern = Modern(endpoint, self._auth.scope_challenge)
        self._legacy: LegacyLeg | None = None
        if legacy is not None:
            from .legacy import LegacyLeg  # the modern-only server never loads the 2025 leg

            self._legacy = LegacyLeg(legacy, self._auth, legacy_sse=legacy_sse, legacy_until=legacy_until,
                                     modern_versions=lambda: endpoint.supported_versions, path=path)
        card = (CardRoute(CardSource(endpoint, legacy, legacy_sse, legacy_until, public_url, path))
                if server_card and hasattr(endpoint, "card_identity") else None)
        # Other ASGI apps answering exact paths (health, readiness, an app's own routes), before the
        # endpoint; an OAuth authenticator (auth.BearerAuthenticator) brings GET documents (RFC 9728).
        self._router = Router(self, path, dict(routes or {}),
                              getattr(self.authenticator, "metadata_routes", None) or {}, card, legacy_sse)
        # Opt-in: name this instance in an X-Mcp-Instance header of every response (debugging a cluster).
        name = instance if instance is not None else os.environ.get(INSTANCE_ENV)
        self._instance_header = (b"x-mcp-instance", name.encode("latin-1")) if name else None

    @property
    def routes(self) -> dict[str, AsgiApp]:
        """The exact paths answered by other ASGI apps (add to it to route more)."""
        return self._router.routes

    @property
    def origin_policy(self) -> OriginPolicy | None:
        return self._origins.given

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind == "http":
            await self._entry(scope, receive, send)
        elif kind == "lifespan":
            await self._lifespan(receive, send)

    async def _serve(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self._instance_header is not None:
            send = respond.with_header(send, self._instance_header)
        if not self._running:
            try:
                await self._start()
            except Exception as e:  # e.g. the lifespan could not open its database: say so, keep serving
                log.exception("startup failed")
                await respond.error(send, 500, None,
                                    McpError(errors.INTERNAL_ERROR, f"the server could not start: {e}"))
                return
        await self._http(scope, receive, send)

    async def _start(self) -> None:
        """Start the endpoint once, however many requests arrive first. Run in the caller's task (the
        lifespan's), so a lifespan holding task-bound resources (an anyio task group) is entered and
        exited in one task. A failure fails the requests waiting for it; the next one tries again."""
        started = self._started
        if started is not None:
            await asyncio.shield(started)
            return
        started = self._started = asyncio.get_running_loop().create_future()
        try:
            await self.endpoint.startup()
        except BaseException as e:
            self._started = None
            started.set_exception(e)
            started.exception()  # retrieved: nobody else may be waiting
            raise
        started.set_result(None)
        self._running = True

    async def _stop(self) -> None:
        if self._running:
            self._running = False
            self._started = None
            await self.endpoint.aclose()

    @contextlib.asynccontextmanager
    async def lifespan(self, _host: object = None) -> AsyncIterator[None]:
        """The endpoint's startup and shutdown for a host app that mounts this transport:
        `FastAPI(lifespan=transport.lifespan)`, `Starlette(..., lifespan=transport.lifespan)`."""
        await self._start()
        try:
            yield
        finally:
            await self._stop()

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            msg = await receive()
            if msg["type"] == "lifespan.startup":
                try:
                    await self._start()
                except Exception as e:  # the server does not start: say why instead of a bare traceback
                    log.exception("startup failed")
                    await send({"type": "lifespan.startup.failed", "message": f"{type(e).__name__}: {e}"})
                    return
                settle_heap()  # the server owns this process: its start-up objects live as long as it
                await send({"type": "lifespan.startup.complete"})
            elif msg["type"] == "lifespan.shutdown":
                await self._stop()
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def _http(self, scope: Scope, receive: Receive, send: Send) -> None:
        route = self._router.match(scope)
        if route is not None:
            await route(scope, receive, send)
            return
        headers = guards.header_dict(scope["headers"])
        if not isinstance(headers, dict):
            await respond.error(send, 400, None, headers)
            return
        refused = self._origins.refusal(scope, headers)
        if refused is not None:
            await respond.error(send, 403, None, refused)
            return
        method = scope["method"]
        if method != "POST":
            await self._not_post(method, scope, headers, receive, send)
            return
        media = guards.media(headers)
        if isinstance(media, guards.Refusal):
            await respond.error(send, media.status, None, media.error)
            return
        can_json, can_sse = media
        who = self._auth.quick(headers)
        if who is None:
            who = await self._auth.full(headers)
        if not isinstance(who, Principal):
            await respond.challenge(send, who)
            return
        body = await guards.read_body(headers, self.max_body, receive, send)
        if body is None:
            return
        try:
            message = envelope.parse(body)
        except McpError as e:
            await respond.error(send, 400, None, e)
            return
        leg = self._legacy
        if leg is not None and leg.legacy_sse and scope.get("query_string"):
            # A POST to a 2024-11-05 channel names it in the query string (the stream's `endpoint` event).
            channel = leg.channel(scope)
            if channel is not None:
                await leg.sse_post(channel, message, headers, who, receive, send)
                return
        decision = envelope.classify(message, headers, self.endpoint.table, self.endpoint.supported_versions)
        # Only what the modern ladder did not take as a request can be legacy: its hot path is unchanged.
        if leg is not None and not isinstance(decision, Request) and era_of("POST", message, headers) == "legacy":
            await leg.exchange("POST", message, headers, receive, send, who, can_sse)
            return
        if isinstance(decision, Rejection):
            await respond.send_json(send, decision.status, decision.body())
            return
        if isinstance(decision, Notification):
            # Cancellation on HTTP is closing the stream; nothing else is defined for notifications.
            await respond.empty(send, 202, [])
            return
        if decision.method == "subscriptions/listen":
            if not can_sse:
                await respond.error(send, 406, decision.id, McpError(
                    errors.INVALID_REQUEST, "subscriptions/listen needs Accept: text/event-stream"))
                return
            # perf: a listen stream can stay open for hours; drop what this frame no longer needs
            # (raw body, decoded message, header dict: ~2.5 KB per stream) before waiting on it; so a
            # listen call carries no headers.
            del body, message, headers
            # Anonymous callers share one principal: they are told apart by their address instead.
            caller = f"peer:{(scope.get('client') or ('?',))[0]}" if who.id == ANONYMOUS.id else f"id:{who.id}"
            if self._listening[caller] >= self.max_listen_streams:
                limit = self.max_listen_streams
                await respond.send_json(send, 429, errors.error_response(decision.id, McpError(
                    errors.INVALID_REQUEST, f"Too many listen streams: this caller has {limit} open already; "
                    "close one first", {"limit": limit, "scope": "peer" if caller[0] == "p" else "principal"})),
                    [(b"retry-after", b"30")])
                return
            self._listening[caller] += 1
            try:
                await self._modern.listen(decision, Call(who, "http"), receive, send)
            finally:
                self._listening[caller] -= 1
                if self._listening[caller] <= 0:
                    del self._listening[caller]
            return
        await self._modern.request(decision, who, headers, can_json, can_sse, receive, send)

    async def _not_post(self, method: str, scope: Scope, headers: dict[str, str], receive: Receive,
                        send: Send) -> None:
        """GET/DELETE of a 2025 session, a 2024-11-05 HTTP+SSE stream (GET), else 405: a request naming a
        modern version in `MCP-Protocol-Version` is never either (the modern transport is POST only)."""
        leg = self._legacy
        if leg is not None:
            if era_of(method, None, headers) == "legacy":
                await leg.exchange(method, None, headers, receive, send)
                return
            if method == "GET" and leg.legacy_sse and not declares_modern(headers):  # a 2024-11-05 client
                await leg.sse_open(scope, headers, receive, send)
                return
        await respond.not_allowed(send, method)
