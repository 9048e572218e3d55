"""The legacy (2024-11-05 … 2025-11-25) client path: initialize handshake, sessions, server→client requests.

Kept apart from the modern code: `Client` only reaches it after a deliberate fallback (or a pinned legacy
version). Transports: Streamable HTTP with `Mcp-Session-Id` (re-initialising after a 404 on an expired
session), the 2024-11-05 HTTP+SSE transport (GET an SSE stream, POST to the announced endpoint), and stdio.
The server's sampling / elicitation / roots requests are answered through the same handlers as MRTR.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping
from typing import Any

from ...protocol import jsonrpc, methods
from ...protocol.errors import INTERNAL_ERROR, METHOD_NOT_FOUND, McpError, method_not_found
from ...protocol.meta import META_PROGRESS_TOKEN, META_SERVER_INFO
from ...protocol.sse import iter_messages
from ...protocol.versions import LEGACY_VERSIONS
from ..channels import Channel, Exchange, HttpChannel, HttpExchange
from ..errors import (
    ChannelError,
    ClientError,
    HttpStatusError,
    InvalidResult,
    RequestTimeout,
    ServerError,
    StreamBroken,
    UnsupportedServer,
)
from ..events import LIST_CHANGED_KEYS, Acknowledged, ServerEvent, event_for, obj
from ..handlers import Handlers
from ..session import Era, Progress
from ..tracecontext import inject_trace_context
from .sse_transport import SseChannel

log = logging.getLogger("mcp_stateless.client.legacy")

_HEADER_VERSIONS = frozenset({"2025-06-18", "2025-11-25"})  # versions with the MCP-Protocol-Version header
_TRANSPORT_NAMES = {"http": "streamable-http"}
_LISTEN_METHODS = methods.SESSION_NOTIFICATIONS
# the server->client requests answered through the handlers (the method table's MRTR input kinds)
_HANDLED = frozenset(m.name for m in methods.SERVER.values() if m.input)


class LegacySession:
    """One initialised legacy session over HTTP (Streamable or HTTP+SSE) or stdio."""

    era: Era = "legacy"
    mirrors_tool_headers = False

    def __init__(
        self,
        channel: Channel,
        handlers: Handlers,
        client_info: Mapping[str, Any],
        version: str | None = None,
        *,
        timeout: float | None = 60.0,
        on_notification: Callable[[dict[str, Any]], None] | None = None,
    ) -> None:
        self.base = channel
        self.wire: Channel = channel
        self.handlers = handlers
        self.client_info = dict(client_info)
        self.version = version if version in LEGACY_VERSIONS else LEGACY_VERSIONS[0]
        self.timeout = timeout
        self.session_id: str | None = None
        self.server_capabilities: dict[str, Any] = {}
        self.server_info: dict[str, Any] | None = None
        self.instructions: str | None = None
        self.handshakes = 0  # how often `initialize` ran (again after a restart or an expired session)
        # Called with each session notification (list changes, resource updates) the server sends outside a
        # request's response, wherever it arrives (stdout, the GET stream, an HTTP+SSE stream, or interleaved
        # in a response): what a bridge turns into listen events. It must not block.
        self.on_notification = on_notification
        self._ids = itertools.count(1)
        self._tasks: set[asyncio.Task[None]] = set()
        self._listeners: list[asyncio.Queue[dict[str, Any]]] = []
        self._standing: asyncio.Task[None] | None = None  # the session's GET stream (Streamable HTTP)
        self._standing_open: asyncio.Future[bool] | None = None
        self._initialised = False
        self._lock = asyncio.Lock()
        channel.watch(self._unsolicited, self._reset)

    @property
    def transport(self) -> str:
        return _TRANSPORT_NAMES.get(self.wire.kind, self.wire.kind)

    def _reset(self) -> None:
        self._initialised = False
        self.session_id = None

    def _headers(self) -> dict[str, str]:
        h: dict[str, str] = {}
        if self.session_id:
            h["Mcp-Session-Id"] = self.session_id
        if self._initialised and self.version in _HEADER_VERSIONS:
            h["MCP-Protocol-Version"] = self.version
        return h

    # -- handshake -------------------------------------------------------------------------------------
    async def start(self) -> None:
        async with self._lock:
            if not self._initialised:
                await self._initialise()

    async def _initialise(self) -> None:
        self.session_id = None
        params = {"protocolVersion": self.version, "capabilities": self.handlers.capabilities(),
                  "clientInfo": self.client_info}
        try:
            result = await self._call("initialize", params, timeout=self.timeout, handshake=True)
        except HttpStatusError as e:
            if not isinstance(self.wire, HttpChannel) or e.status not in (400, 404, 405):
                raise
            log.info("POST initialize got HTTP %s: trying the 2024-11-05 HTTP+SSE transport", e.status)
            sse = SseChannel(self.wire, self._unsolicited)
            await sse.open(timeout=self.timeout)
            self.wire = sse
            result = await self._call("initialize", params, timeout=self.timeout, handshake=True)
        version = result.get("protocolVersion")
        if version not in LEGACY_VERSIONS:
            raise UnsupportedServer(f"the server answered initialize with protocol version {version!r}, "
                                    "which this client does not support")
        self.version = version
        caps = result.get("capabilities")
        self.server_capabilities = caps if isinstance(caps, dict) else {}
        info = result.get("serverInfo")
        self.server_info = info if isinstance(info, dict) else None
        self.instructions = result.get("instructions") if isinstance(result.get("instructions"), str) else None
        self._initialised = True
        self.handshakes += 1
        await self.wire.send({"jsonrpc": "2.0", "method": "notifications/initialized"}, self._headers())
        if isinstance(self.wire, HttpChannel):
            self._stop_standing()  # a re-initialised session gets its own stream
            if self.handlers.capabilities():
                # Servers may send their sampling / elicitation / roots requests on the session's GET stream
                # instead of the POST response (e.g. the TypeScript SDK 1.x for requests made outside a
                # handler's request context): a client that declares those capabilities must be reachable there.
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._open_standing(), 2.0)

    async def discover(self) -> dict[str, Any]:
        """A DiscoverResult-shaped view of the InitializeResult (for uniform callers)."""
        out: dict[str, Any] = {"resultType": "complete", "supportedVersions": [self.version],
                               "capabilities": self.server_capabilities}
        if self.instructions is not None:
            out["instructions"] = self.instructions
        if self.server_info is not None:
            out["_meta"] = {META_SERVER_INFO: self.server_info}
        return out

    # -- requests --------------------------------------------------------------------------------------
    async def request(
        self,
        method: str,
        params: Mapping[str, Any],
        *,
        progress: Progress | None = None,
        timeout: float | None = None,
        meta: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """`meta` (the modern per-request keys, e.g. an idempotency key) has no legacy meaning: not sent."""
        await self.wire.start()  # a crashed stdio server is restarted first (then initialised again)
        if not self._initialised:
            await self.start()
        clean = {k: v for k, v in params.items() if k not in ("inputResponses", "requestState")}
        try:
            result = await self._call(method, clean, progress=progress, timeout=timeout)
        except _SessionExpired:
            log.info("legacy session expired (HTTP 404): initialising again")
            async with self._lock:
                await self._initialise()
            result = await self._call(method, clean, progress=progress, timeout=timeout)
        rt = result.get("resultType", "complete")
        if rt != "complete":
            raise InvalidResult(f"{method}: unexpected resultType {rt!r}")
        return result

    async def _call(
        self,
        method: str,
        params: Mapping[str, Any],
        *,
        progress: Progress | None = None,
        timeout: float | None = None,
        handshake: bool = False,
    ) -> dict[str, Any]:
        id_ = next(self._ids) if not handshake else 0
        p = dict(params)
        meta = dict(p.get("_meta") or {})
        if progress is not None:
            meta.setdefault(META_PROGRESS_TOKEN, f"lp{id_}")
        inject_trace_context(meta)
        if meta:
            p["_meta"] = meta
        msg = jsonrpc.request(id_, method, p)
        if not self._initialised and not handshake:  # the stdio server was restarted since `request` began
            await self.start()
        try:
            async with asyncio.timeout(timeout):
                resp = await self._exchange(msg, progress)
        except TimeoutError:
            raise RequestTimeout(f"{method} (id {id_}) timed out after {timeout} s") from None
        if "error" in resp:
            raise ServerError.from_wire(resp["error"])
        result = resp.get("result")
        if not isinstance(result, dict):
            raise InvalidResult(f"{method}: the result is not an object")
        return result

    async def _exchange(self, msg: dict[str, Any], progress: Progress | None) -> dict[str, Any]:
        ex: Exchange = await self.wire.exchange(msg, self._headers(), timeout=self.timeout)
        for resumed in range(_MAX_RESUMES + 1):
            try:
                if ex.status == 404 and self.session_id and msg["method"] != "initialize":
                    raise _SessionExpired
                if msg["method"] == "initialize" and ex.session_id:
                    self.session_id = ex.session_id
                async for m in ex:
                    if "method" in m:
                        if "id" in m:
                            self._spawn(self._answer(m))
                        elif m["method"] == "notifications/progress" and progress is not None:
                            with contextlib.suppress(Exception):
                                progress(m.get("params") or {})
                        else:
                            self._unsolicited(m)
                        continue
                    if m.get("id") == msg["id"]:
                        return m
            except StreamBroken:
                if not _resumable(ex):
                    raise
            finally:
                await ex.aclose()
            if resumed == _MAX_RESUMES or not _resumable(ex) or not isinstance(self.wire, HttpChannel):
                break
            # The server ended the stream early but named its last event: wait as long as it asked, then pick
            # the stream up with a GET carrying Last-Event-ID (2025-11-25 resumability).
            assert isinstance(ex, HttpExchange) and ex.last_event_id is not None
            await asyncio.sleep(min(ex.retry_ms if ex.retry_ms is not None else 1000, 30_000) / 1000)
            resp = await self.wire.get({"Accept": "text/event-stream", **self._headers(),
                                        "Last-Event-ID": ex.last_event_id})
            last = ex.last_event_id
            ex = HttpExchange(resp)
            ex.last_event_id = last
        raise StreamBroken(f"the response stream of {msg['method']} ended before the response")

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _answer(self, req: dict[str, Any]) -> None:
        """Answer a server→client request (ping, sampling, elicitation, roots) through the handlers."""
        method, id_ = str(req.get("method")), req["id"]
        try:
            if method == "ping":
                reply = jsonrpc.result_response(id_, {})
            elif method in _HANDLED:
                reply = jsonrpc.result_response(id_, await self.handlers.answer(method, req.get("params")))
            else:
                reply = jsonrpc.error_response(id_, method_not_found(method))
        except InvalidResult as e:  # a capability this client did not declare
            reply = jsonrpc.error_response(id_, McpError(METHOD_NOT_FOUND, str(e)))
        except McpError as e:  # the handler's own refusal, code and message as it chose them
            reply = jsonrpc.error_response(id_, e)
        except Exception as e:
            log.exception("handler for %s failed", method)
            reply = jsonrpc.error_response(id_, McpError(INTERNAL_ERROR, f"client handler failed: {e}"))
        with contextlib.suppress(ChannelError, HttpStatusError):
            await self.wire.send(reply, self._headers())

    def _unsolicited(self, m: dict[str, Any]) -> None:
        if "id" in m and "method" in m:
            self._spawn(self._answer(m))
            return
        if m.get("method") in _LISTEN_METHODS:
            for q in self._listeners:
                q.put_nowait(m)
            if self.on_notification is not None:
                try:
                    self.on_notification(m)
                except Exception:
                    log.exception("on_notification failed for %s", m.get("method"))

    # -- listen ----------------------------------------------------------------------------------------
    async def listen(self, flt: Mapping[str, Any]) -> AsyncIterator[ServerEvent]:
        """Legacy equivalent of subscriptions/listen: session notifications (GET stream on Streamable HTTP)."""
        if not self._initialised:
            await self.start()
        # Open the GET stream before acknowledging: a change made right after the acknowledgement must not be
        # lost because the server had no standalone stream to put it on yet. Without one (e.g. HTTP 405 from a
        # stateless server) session notifications cannot reach us, so nothing is honoured.
        deliverable = await self._open_standing() if isinstance(self.wire, HttpChannel) else True
        caps = self.server_capabilities if deliverable else {}
        honoured: dict[str, Any] = {}
        for key, cap in (("toolsListChanged", "tools"), ("promptsListChanged", "prompts"),
                         ("resourcesListChanged", "resources")):
            if flt.get(key) and isinstance(caps.get(cap), dict) and caps[cap].get("listChanged"):
                honoured[key] = True
        uris = list(flt.get("resourceSubscriptions") or [])
        if uris and isinstance(caps.get("resources"), dict) and caps["resources"].get("subscribe"):
            for uri in uris:
                await self.request("resources/subscribe", {"uri": uri})
            honoured["resourceSubscriptions"] = uris
        q: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self._listeners.append(q)
        dropped = {k: v for k, v in flt.items() if k not in honoured}
        try:
            yield Acknowledged("notifications/subscriptions/acknowledged", {"notifications": honoured},
                               honoured, dropped)
            while True:
                m = await q.get()
                if m.get("method") == "_broken":
                    raise StreamBroken("the legacy notification stream closed")
                params = obj(m.get("params"))
                method = str(m.get("method"))
                if method == "notifications/resources/updated" and "resourceSubscriptions" not in honoured:
                    continue
                wanted = LIST_CHANGED_KEYS.get(method)
                if wanted is not None and wanted not in honoured:
                    continue
                yield event_for(method, params)
        finally:
            self._listeners.remove(q)

    async def open_stream(self) -> bool:
        """Open the session's GET stream (Streamable HTTP), where the server sends session notifications;
        True when it is open. Other transports carry them already: True."""
        if not self._initialised:
            await self.start()
        return await self._open_standing() if isinstance(self.wire, HttpChannel) else True

    async def _open_standing(self) -> bool:
        """Open the session's GET stream unless it is open; True when the server serves one."""
        if self._standing is None or self._standing.done():
            fut: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
            self._standing_open = fut
            self._standing = asyncio.get_running_loop().create_task(self._run_standing(fut))
        assert self._standing_open is not None
        return await asyncio.shield(self._standing_open)

    def _stop_standing(self) -> None:
        if self._standing is not None:
            self._standing.cancel()
            self._standing = None

    async def _run_standing(self, opened: asyncio.Future[bool]) -> None:
        """Read the GET stream: server→client requests are answered, notifications go to the listeners."""
        assert isinstance(self.wire, HttpChannel)
        try:
            resp = await self.wire.get({"Accept": "text/event-stream", **self._headers()})
        except (ChannelError, OSError) as e:
            log.info("legacy GET stream failed to open: %s", e)
            opened.set_result(False)
            return
        except BaseException:
            opened.set_result(False)
            raise
        try:
            if resp.status != 200 or resp.content_type != "text/event-stream":
                opened.set_result(False)
                await resp.read()
                log.info("legacy server offers no GET stream (HTTP %s)", resp.status)
                return
            opened.set_result(True)
            async for m in iter_messages(resp.iter_bytes()):
                self._unsolicited(m)
            for q in self._listeners:
                q.put_nowait({"method": "_broken"})
        except Exception as e:  # the stream broke off: listeners learn it, requests carry on over POST
            log.info("legacy GET stream ended: %s", e)
            for q in self._listeners:
                q.put_nowait({"method": "_broken"})
        finally:
            if not opened.done():
                opened.set_result(False)
            await resp.aclose()

    async def aclose(self) -> None:
        self._stop_standing()
        for t in list(self._tasks):
            t.cancel()
        if self.wire is not self.base:  # the HTTP+SSE channel this session opened
            await self.wire.aclose()
        elif isinstance(self.wire, HttpChannel) and self.session_id:
            with contextlib.suppress(Exception):
                await self.wire.delete({"Mcp-Session-Id": self.session_id})


class _SessionExpired(ClientError):
    pass


__all__ = ["LegacySession"]


# How often one request's response stream is picked up again after the server ended it early.
_MAX_RESUMES = 3


def _resumable(ex: Exchange) -> bool:
    return isinstance(ex, HttpExchange) and ex.status == 200 and ex.last_event_id is not None
