"""Streamable HTTP (2026-07-28) as a plain ASGI application.

It moves bytes and cancellation only: every rule (envelope, headers, versions, errors) comes from the
sans-IO core, every answer from an `Endpoint` (an `App`, or anything else that speaks the seam). A
response is JSON unless the handler emits a notification (progress, log) before finishing, in which
case it becomes an SSE stream; `subscriptions/listen` is always SSE. A client disconnect cancels the
handler and nothing more is written for that request.

Each request is authenticated before its body is read: a `Challenge` becomes its HTTP status, a
`WWW-Authenticate` header and a JSON-RPC error body.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
import urllib.parse
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any

import orjson

from ...protocol import envelope, errors, sse
from ...protocol.asgi import AsgiApp, Message, Middleware, Receive, Scope, Send
from ...protocol.card import SUFFIX as CARD_SUFFIX
from ...protocol.encoding import encode_message
from ...protocol.endpoint import (
    Call,
    Endpoint,
    KeepAlive,
    LegacyAnswer,
    LegacyEndpoint,
    ListenEnd,
    ListenItem,
    authenticator_for,
)
from ...protocol.envelope import Notification, Rejection, Request
from ...protocol.errors import McpError
from ...protocol.headers import accepted_media, repeated_header
from ...protocol.legacy import era_of, request_id, requested_version
from ...protocol.outbox import BoundedOutbox
from ...protocol.principal import (
    ANONYMOUS,
    AnonymousAuthenticator,
    Authenticator,
    Challenge,
    Credentials,
    Principal,
    ResolverAuthenticator,
)
from ...protocol.retirement import Retirement
from ...protocol.security import OriginPolicy
from ..heap import settle_heap
from .card import CardRoute

DEFAULT_MAX_BODY = 4 * 1024 * 1024
INSTANCE_ENV = "MCP_STATELESS_INSTANCE"

log = logging.getLogger("mcp_stateless.http")

_LOOPBACK_ADDRS = frozenset({"127.0.0.1", "::1", "localhost"})


def _json_headers(length: int) -> list[tuple[bytes, bytes]]:
    # perf: a Content-Length lets uvicorn skip chunked framing for the (usual) JSON answer
    return [(b"content-type", b"application/json"), (b"content-length", b"%d" % length)]


class _Wakeup:
    """Wakes the response writer: the handler finished, emitted a notification, or the client went.

    perf: one future per wait, instead of an Event + a waker task + asyncio.wait() per request."""

    __slots__ = ("_future", "_loop")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._future: asyncio.Future[None] | None = None

    def set(self) -> None:
        f = self._future
        if f is not None and not f.done():
            f.set_result(None)

    async def wait(self) -> None:
        self._future = self._loop.create_future()
        try:
            await self._future
        finally:
            self._future = None


class _DisconnectWatch:
    """Calls `then()` (and sets `disconnected`) when the client goes away while `task` runs.

    perf: the watcher (a task blocked in receive()) is scheduled with call_soon right after `task`
    starts, so it only exists once `task` first suspends: a handler that answers without suspending
    (the common async tool) never pays for it."""

    __slots__ = ("_closed", "_loop", "_receive", "_task", "_then", "_watcher", "disconnected")

    def __init__(self, loop: asyncio.AbstractEventLoop, task: asyncio.Task[Any], receive: Receive,
                 then: Callable[[], object]) -> None:
        self._loop = loop
        self._task = task
        self._receive = receive
        self._then = then
        self._watcher: asyncio.Task[None] | None = None
        self._closed = False
        self.disconnected = False
        loop.call_soon(self._start)

    def _start(self) -> None:
        if not self._closed and not self._task.done():
            self._watcher = self._loop.create_task(self._watch())

    async def _watch(self) -> None:
        await _wait_disconnect(self._receive)
        if not self._closed:
            self.disconnected = True
            self._then()

    def close(self) -> None:
        self._closed = True
        if self._watcher is not None:
            self._watcher.cancel()


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
    ) -> None:
        self.endpoint = endpoint
        # Other ASGI apps answering exact paths (health, readiness, an app's own routes), before the endpoint.
        self.routes: dict[str, AsgiApp] = dict(routes or {})
        self._started: asyncio.Future[None] | None = None
        self._running = False
        # HTTP requests pass the middleware, the first given outermost; the lifespan goes straight to us.
        entry: AsgiApp = self._serve
        for wrap in reversed(middleware):
            entry = wrap(entry)
        self._entry = entry
        self.legacy = legacy
        if legacy_sse and legacy is None:
            raise ValueError("legacy_sse needs the legacy branch (legacy=LegacyServer(app))")
        self.legacy_sse = legacy_sse
        self.legacy_until = legacy_until
        self.public_url = public_url
        # perf: off the modern path, the sub-routes are looked at only when the path is not the endpoint's
        self._card = CardRoute(self) if server_card and hasattr(endpoint, "card_identity") else None
        self.authenticator = authenticator_for(endpoint, authenticator)
        # perf: with no authentication configured, or a synchronous resolver, no coroutine per request
        self._anonymous = isinstance(self.authenticator, AnonymousAuthenticator)
        self._resolver = self.authenticator if isinstance(self.authenticator, ResolverAuthenticator) else None
        # An OAuth authenticator (auth.BearerAuthenticator) brings GET routes (RFC 9728 metadata) and the
        # 403 step-up challenge for `InsufficientScope`; both optional, so any Authenticator works.
        self._routes: Mapping[str, bytes] = getattr(self.authenticator, "metadata_routes", None) or {}
        self._step_up: Callable[[frozenset[str]], Challenge] | None = getattr(
            self.authenticator, "scope_challenge", None)
        self.path = path
        self.origin_policy = origin_policy
        self._loopback_policy = OriginPolicy.loopback()
        self._public_policy = OriginPolicy.public()
        self.max_body = max_body
        # Opt-in: name this instance in an X-Mcp-Instance header of every response (debugging a cluster).
        name = instance if instance is not None else os.environ.get(INSTANCE_ENV)
        self._instance_header = (b"x-mcp-instance", name.encode("latin-1")) if name else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind == "http":
            await self._entry(scope, receive, send)
        elif kind == "lifespan":
            await self._lifespan(receive, send)

    async def _serve(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self._instance_header is not None:
            send = _with_header(send, self._instance_header)
        if not self._running:
            try:
                await self._start()
            except Exception as e:  # e.g. the lifespan could not open its database: say so, keep serving
                log.exception("startup failed")
                await _error(send, 500, None, McpError(errors.INTERNAL_ERROR, f"the server could not start: {e}"))
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

    def _routed_here(self, scope: Scope, path: str) -> bool:
        """A host app sent this request here: the root of a mount (`root_path` set, nothing after it), or
        an exact route to this transport (Starlette names the matched endpoint in the scope; a match by
        a Mount also sets `app_root_path`, and only the mount's root is ours)."""
        if scope.get("root_path") and path == "/":
            return True
        return scope.get("endpoint") is self and "app_root_path" not in scope

    def _policy(self, scope: Scope) -> OriginPolicy:
        if self.origin_policy is not None:
            return self.origin_policy
        server = scope.get("server")
        if server and server[0] in _LOOPBACK_ADDRS:
            return self._loopback_policy
        return self._public_policy

    async def _http(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self._routes and scope["method"] == "GET":
            doc = self._routes.get(scope.get("path", ""))
            if doc is not None:
                await send({"type": "http.response.start", "status": 200, "headers": [
                    *_json_headers(len(doc)), (b"access-control-allow-origin", b"*")]})
                await send({"type": "http.response.body", "body": doc})
                return
        if self.routes or self.path is not None:
            path = scope.get("path", "")
            root = scope.get("root_path", "")
            if root and path.startswith(root):  # Starlette >= 0.35 keeps the full path beside root_path
                path = path[len(root) :] or "/"
            route = self.routes.get(path)
            if route is not None:
                await route(scope, receive, send)
                return
            if self.path is not None:
                base = self.path.rstrip("/")
                if path.rstrip("/") != base and not self._routed_here(scope, path):
                    # Off the endpoint's own path: only its sub-resources (looked at only here, off the hot path).
                    sub = path[len(base):].rstrip("/") if path.startswith(base + "/") else None
                    if sub == CARD_SUFFIX and self._card is not None:
                        await self._card.serve(scope, send)
                        return
                    if not (sub == SSE_SUFFIX and self.legacy_sse and scope["method"] == "GET"):
                        await _plain(send, 404, b"Not Found")
                        return
        if self.path is None and self._card is not None and scope.get("path", "").endswith(CARD_SUFFIX):
            await self._card.serve(scope, send)
            return
        raw = scope["headers"]
        # perf: one comprehension; only when it collapsed repeated lines are they looked at
        headers: dict[str, str] = {k.decode("latin-1"): v.decode("latin-1") for k, v in raw}
        if len(headers) != len(raw):
            problem = repeated_header(raw)
            if problem is not None:
                await _error(send, 400, None, problem)
                return

        why = self._policy(scope).check(headers.get("host"), headers.get("origin"))
        if why is not None:
            await _error(send, 403, None, McpError(errors.INVALID_REQUEST, why))
            return

        method = scope["method"]
        if method != "POST" and self.legacy is not None and era_of(method, None, headers) == "legacy":
            await self._legacy(method, None, headers, receive, send)
            return
        if method == "GET" and self.legacy_sse:
            await self._legacy_sse_open(scope, headers, receive, send)
            return
        # A POST to a 2024-11-05 channel names it in the query string (the stream's `endpoint` event).
        channel = _channel_of(scope) if self.legacy_sse and scope.get("query_string") else None
        if method != "POST":
            await send({"type": "http.response.start", "status": 405,
                        "headers": [(b"allow", b"POST"), (b"content-type", b"application/json")]})
            refusal = errors.error_response(
                None, McpError(errors.INVALID_REQUEST, f"{method} is not allowed: POST only"))
            await send({"type": "http.response.body", "body": orjson.dumps(refusal)})
            return

        ctype = headers.get("content-type")
        if ctype is not None and ctype.split(";", 1)[0].strip().lower() != "application/json":
            await _error(send, 415, None, McpError(errors.INVALID_REQUEST, "Content-Type must be application/json"))
            return
        can_json, can_sse = accepted_media(headers.get("accept", "*/*"))
        if not (can_json or can_sse):
            await _error(send, 406, None, McpError(
                errors.INVALID_REQUEST, "Accept must list application/json and text/event-stream"))
            return

        if self._anonymous:
            who: Principal | Challenge = ANONYMOUS
        elif self._resolver is not None:
            who = self._resolver.principal_for(headers)
        else:
            who = await self.authenticator.authenticate(Credentials("http", headers))
        if isinstance(who, Challenge):
            await _challenge(send, who)
            return
        body = await self._read_body(scope, headers, receive, send)
        if body is None:
            return
        try:
            message = envelope.parse(body)
        except McpError as e:
            await _error(send, 400, None, e)
            return
        if channel is not None:
            await self._legacy_sse_post(channel, message, headers, who, receive, send)
            return
        decision = envelope.classify(message, headers, self.endpoint.table, self.endpoint.supported_versions)
        # Only what the modern ladder did not take as a request can be legacy: its hot path is unchanged.
        if (self.legacy is not None and not isinstance(decision, Request)
                and era_of("POST", message, headers) == "legacy"):
            await self._legacy("POST", message, headers, receive, send, who, can_sse)
            return
        if isinstance(decision, Rejection):
            await _send_json(send, decision.status, decision.body())
            return
        if isinstance(decision, Notification):
            # Cancellation on HTTP is closing the stream; nothing else is defined for notifications.
            await send({"type": "http.response.start", "status": 202, "headers": []})
            await send({"type": "http.response.body", "body": b""})
            return
        if decision.method == "subscriptions/listen":
            if not can_sse:
                await _error(send, 406, decision.id, McpError(
                    errors.INVALID_REQUEST, "subscriptions/listen needs Accept: text/event-stream"))
                return
            # perf: a listen stream can stay open for hours; drop what this frame no longer needs
            # (raw body, decoded message, header dict: ~2.5 KB per stream) before waiting on it; so a
            # listen call carries no headers.
            del body, message, headers
            await self._listen(decision, Call(who, "http"), receive, send)
            return
        await self._request(decision, who, headers, can_json, can_sse, receive, send)

    async def _legacy(self, method: str, message: Any, headers: dict[str, str], receive: Receive, send: Send,
                      who: Principal | None = None, can_sse: bool | None = None) -> None:
        """Hand a 2025-era exchange to the legacy branch (GET/DELETE are authenticated here)."""
        from . import legacy_write as legacy_http

        assert self.legacy is not None
        if who is None:
            got = ANONYMOUS if self._anonymous else await self.authenticator.authenticate(Credentials("http", headers))
            if isinstance(got, Challenge):
                await _challenge(send, got)
                return
            who = got
        if can_sse is None:
            can_sse = _accepts_sse(headers)
        if await self._retired(message, headers, send):
            return
        answer = await self.legacy.exchange(method, message, headers, who, can_sse)
        if answer.scopes is not None:  # the 2025-11-25 clients step up on the same challenge
            answer.headers = (*answer.headers, ("www-authenticate", self._scope_challenge(answer.scopes)))
        # The GET stream is the session's long-lived one: it ends when the token that opened it expires.
        expires_at = who.expires_at if method == "GET" else None
        await legacy_http.write(self._deprecated(answer), receive, send, expires_at)

    async def _retired(self, message: Any, headers: Mapping[str, str], send: Send) -> bool:
        """After the legacy retirement date: refuse (410), and True."""
        until = self.legacy_until
        if until is None or not until.retired(time.time()):
            return False
        refusal = until.refusal(request_id(message), self.endpoint.supported_versions,
                                requested_version(message, headers))
        await _send_json(send, refusal.status, refusal.body())
        return True

    def _deprecated(self, answer: LegacyAnswer) -> LegacyAnswer:
        """`Deprecation` and `Sunset` on a legacy answer, while a retirement date lies ahead."""
        if self.legacy_until is not None:
            answer.headers = (*answer.headers, *self.legacy_until.headers())
        return answer

    async def _legacy_sse_open(self, scope: Scope, headers: dict[str, str], receive: Receive, send: Send) -> None:
        """GET without a session: a 2024-11-05 HTTP+SSE stream, whose first event names where to POST."""
        from . import legacy_write as legacy_http

        assert self.legacy is not None
        if not _accepts_sse(headers):
            await _error(send, 406, None, McpError(
                errors.INVALID_REQUEST, "Not Acceptable: the HTTP+SSE stream needs Accept: text/event-stream"))
            return
        who = ANONYMOUS if self._anonymous else await self.authenticator.authenticate(Credentials("http", headers))
        if isinstance(who, Challenge):
            await _challenge(send, who)
            return
        if await self._retired(None, headers, send):
            return
        token, stream = await self.legacy.sse_open(who)
        base = scope.get("root_path", "") + (self.path if self.path is not None else scope.get("path", "/"))
        url = f"{urllib.parse.quote(base)}?{CHANNEL_PARAM}={urllib.parse.quote(token, safe='')}"
        extra = self.legacy_until.headers() if self.legacy_until is not None else ()
        await legacy_http.write_channel(url, extra, stream, receive, send, who.expires_at)

    async def _legacy_sse_post(self, channel: str, message: Any, headers: dict[str, str], who: Principal,
                               receive: Receive, send: Send) -> None:
        from . import legacy_write as legacy_http

        assert self.legacy is not None
        if await self._retired(message, headers, send):
            return
        answer = await self.legacy.sse_post(channel, message, headers, who)
        await legacy_http.write(self._deprecated(answer), receive, send)

    async def _read_body(self, scope: Scope, headers: dict[str, str], receive: Receive, send: Send) -> bytes | None:
        length = headers.get("content-length")
        if length is not None and length.isdigit() and int(length) > self.max_body:
            await _error(send, 413, None, McpError(errors.INVALID_REQUEST,
                                                   f"Request body exceeds {self.max_body} bytes"))
            return None
        chunks: list[bytes] = []
        size = 0
        while True:
            msg = await receive()
            if msg["type"] == "http.disconnect":
                return None
            chunk = msg.get("body", b"")
            if chunk:
                size += len(chunk)
                if size > self.max_body:
                    await _error(send, 413, None, McpError(errors.INVALID_REQUEST,
                                                           f"Request body exceeds {self.max_body} bytes"))
                    return None
                chunks.append(chunk)
            if not msg.get("more_body", False):
                break
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)

    async def _request(self, req: Request, principal: Principal, headers: dict[str, str], can_json: bool,
                       can_sse: bool, receive: Receive, send: Send) -> None:
        outbox = BoundedOutbox(enabled=can_sse)  # the one bound and drop policy (protocol/outbox.py)
        call = Call(principal, "http", outbox, headers)
        if req.progress_token is None and req.log_level is None:
            await self._request_inline(req, call, outbox, can_json, receive, send)
            return
        loop = asyncio.get_running_loop()
        task = loop.create_task(self.endpoint.handle(req, call))
        wake = _Wakeup(loop)
        outbox.wake = wake.set
        task.add_done_callback(lambda _t: wake.set())
        watch = _DisconnectWatch(loop, task, receive, wake.set)
        streaming = not can_json
        started = False
        try:
            while True:
                if not outbox.pending and not task.done() and not watch.disconnected:
                    await wake.wait()
                if watch.disconnected:
                    task.cancel()
                    return
                if outbox.pending:
                    if not started:
                        streaming = True
                        started = True
                        await send({"type": "http.response.start", "status": 200, "headers": sse.HEADERS})
                    frames = b"".join(sse.event(encode_message(m)) for m in outbox.take())
                    await send({"type": "http.response.body", "body": frames, "more_body": True})
                if task.done() and not outbox.pending:  # what arrived during the last send goes first
                    break
            reply = task.result()
            outbox.enabled = False
            data = encode_message(reply.message)
            if streaming:
                if not started:
                    await send({"type": "http.response.start", "status": 200, "headers": sse.HEADERS})
                await send({"type": "http.response.body", "body": sse.event(data)})
            else:
                if reply.scopes is not None:
                    await self._scope_refusal(send, reply.scopes, data)
                    return
                status = 200 if reply.error_code is None else errors.http_status_for(reply.error_code)
                await send({"type": "http.response.start", "status": status, "headers": _json_headers(len(data))})
                await send({"type": "http.response.body", "body": data})
        finally:
            if not task.done():
                task.cancel()
            watch.close()

    async def _request_inline(
        self, req: Request, call: Call, outbox: BoundedOutbox, can_json: bool, receive: Receive, send: Send
    ) -> None:
        """perf: a request without a progressToken or logLevel gets no notification while it runs, so
        its handler is awaited right in this task (no handler task, fewer loop turns). A disconnect
        still cancels it: `_DisconnectWatch` cancels this task, and the cancellation it caused is
        taken back here (uncancel) so the ASGI call ends quietly, writing nothing more."""
        me = asyncio.current_task()
        assert me is not None
        guard = _DisconnectWatch(asyncio.get_running_loop(), me, receive, me.cancel)
        try:
            reply = await self.endpoint.handle(req, call)
        except asyncio.CancelledError:
            if not guard.disconnected:
                raise
            me.uncancel()
            return
        finally:
            guard.close()
        if guard.disconnected:  # the handler swallowed the cancellation: still write nothing
            me.uncancel()
            return
        outbox.enabled = False
        data = encode_message(reply.message)
        if outbox.pending or not can_json:  # something emitted anyway, or the client takes SSE only
            frames = b"".join(sse.event(encode_message(m)) for m in outbox.take())
            await send({"type": "http.response.start", "status": 200, "headers": sse.HEADERS})
            await send({"type": "http.response.body", "body": frames + sse.event(data)})
            return
        if reply.scopes is not None:
            await self._scope_refusal(send, reply.scopes, data)
            return
        status = 200 if reply.error_code is None else errors.http_status_for(reply.error_code)
        await send({"type": "http.response.start", "status": status, "headers": _json_headers(len(data))})
        await send({"type": "http.response.body", "body": data})

    def _scope_challenge(self, scopes: frozenset[str]) -> str:
        """The `WWW-Authenticate` value asking the client to step up to `scopes` (either era)."""
        if self._step_up is not None:
            return self._step_up(scopes).www_authenticate
        return f'Bearer error="insufficient_scope", scope="{" ".join(sorted(scopes))}"'

    async def _scope_refusal(self, send: Send, scopes: frozenset[str], data: bytes) -> None:
        """403 with a step-up challenge; the body is the JSON-RPC error (it keeps the request id)."""
        header = self._scope_challenge(scopes)
        await send({"type": "http.response.start", "status": 403, "headers": [
            *_json_headers(len(data)), (b"www-authenticate", header.encode("latin-1"))]})
        await send({"type": "http.response.body", "body": data})

    async def _listen(self, req: Request, call: Call, receive: Receive, send: Send) -> None:
        try:
            stream = self.endpoint.listen(req, call)
            first = await anext(stream)
        except McpError as e:
            await _error(send, errors.http_status_for(e.code), req.id, e)
            return
        loop = asyncio.get_running_loop()
        await send({"type": "http.response.start", "status": 200, "headers": sse.HEADERS})
        await send({"type": "http.response.body", "body": _frame(first), "more_body": True})
        # perf: one pump task per stream, waited for once and cancelled by the disconnect watcher,
        # instead of a task and an asyncio.wait() per message: an event reaches 10k idle streams sooner.
        pump = loop.create_task(_pump(stream, send))
        watch = _DisconnectWatch(loop, pump, receive, pump.cancel)
        expiry = _expiry(loop, call.principal.expires_at, pump)
        try:
            await asyncio.wait((pump,))
        finally:
            watch.close()
            if expiry is not None:
                expiry.cancel()
            if not pump.done():
                pump.cancel()
                await asyncio.wait((pump,))  # let it unwind before aclose() below
            await stream.aclose()
        if pump.cancelled() and not watch.disconnected:
            await _end_expired(send)  # the token expired: end the response; the client reconnects with a new one
            return
        if not pump.cancelled():
            failure = pump.exception()
            if failure is not None:
                raise failure


def _expiry(loop: asyncio.AbstractEventLoop, expires_at: float | None,
            task: asyncio.Task[None]) -> asyncio.TimerHandle | None:
    """Cancel `task` (a stream's pump) when the principal's credentials expire."""
    if expires_at is None:
        return None
    return loop.call_later(max(0.0, expires_at - time.time()), task.cancel)


async def _end_expired(send: Send) -> None:
    with contextlib.suppress(OSError):
        await send({"type": "http.response.body", "body": b""})


def _frame(item: ListenItem) -> bytes:
    if isinstance(item, KeepAlive):
        return sse.KEEPALIVE
    return sse.event(encode_message(item.message))


async def _pump(stream: AsyncIterator[ListenItem], send: Send) -> None:
    """Write a listen stream's items until its final result, its end, or a broken connection."""
    try:
        async for item in stream:
            if isinstance(item, ListenEnd):
                await send({"type": "http.response.body", "body": _frame(item)})
                return
            await send({"type": "http.response.body", "body": _frame(item), "more_body": True})
        await send({"type": "http.response.body", "body": b""})
    except OSError:
        return


CHANNEL_PARAM = "session"  # the query parameter naming a 2024-11-05 channel
SSE_SUFFIX = "/sse"  # <endpoint>/sse: where 2024-11-05 clients configured with that conventional path GET


def _channel_of(scope: Scope) -> str | None:
    values = urllib.parse.parse_qs(scope["query_string"].decode("latin-1")).get(CHANNEL_PARAM)
    return values[0] if values else None


def _accepts_sse(headers: Mapping[str, str]) -> bool:
    accept = headers.get("accept", "*/*").lower()
    return "*/*" in accept or "text/event-stream" in accept or "text/*" in accept


def _with_header(send: Send, header: tuple[bytes, bytes]) -> Send:
    async def wrapped(message: Message) -> None:
        if message["type"] == "http.response.start":
            message = {**message, "headers": [*message.get("headers", ()), header]}
        await send(message)

    return wrapped


async def _wait_disconnect(receive: Receive) -> None:
    while True:
        msg = await receive()
        if msg["type"] == "http.disconnect":
            return


async def _send_json(send: Send, status: int, body: Any) -> None:
    if body is None:
        await send({"type": "http.response.start", "status": status, "headers": []})
        await send({"type": "http.response.body", "body": b""})
        return
    data = encode_message(body)  # an error may echo an id of any size
    await send({"type": "http.response.start", "status": status, "headers": _json_headers(len(data))})
    await send({"type": "http.response.body", "body": data})


async def _error(send: Send, status: int, id_: Any, err: McpError) -> None:
    await _send_json(send, status, errors.error_response(id_, err))


async def _challenge(send: Send, refusal: Challenge) -> None:
    body = orjson.dumps(errors.error_response(None, McpError(refusal.code, refusal.message)))
    headers = _json_headers(len(body))
    if refusal.www_authenticate:
        headers.append((b"www-authenticate", refusal.www_authenticate.encode("latin-1")))
    await send({"type": "http.response.start", "status": refusal.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def _plain(send: Send, status: int, body: bytes) -> None:
    await send({"type": "http.response.start", "status": status, "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": body})
