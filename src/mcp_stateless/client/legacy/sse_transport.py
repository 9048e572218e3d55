"""The 2024-11-05 HTTP+SSE transport: GET an SSE stream, POST each message to the endpoint it announces."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Mapping
from typing import Any

import orjson

from ...protocol import jsonrpc
from ...protocol.meta import META_PROGRESS_TOKEN
from ...protocol.sse import Event, iter_messages
from ..channels import HttpChannel, Message, Restarted, Unsolicited
from ..errors import AuthenticationError, ChannelError, ServerLost
from ..events import obj
from ..http11 import HttpError, HttpUrl, Response

log = logging.getLogger("mcp_stateless.client.legacy")

_END = object()


class SseExchange:
    status = 200
    session_id = None

    def __init__(self, chan: SseChannel, id_: Any, token: Any) -> None:
        self._chan = chan
        self.id = id_
        self.token = token
        self.queue: asyncio.Queue[Any] = asyncio.Queue()
        self._done = False

    async def __aiter__(self) -> AsyncIterator[Message]:
        while not self._done:
            item = await self.queue.get()
            if item is _END:
                self._done = True
                raise ServerLost("the HTTP+SSE stream closed")
            if "method" not in item and item.get("id") == self.id:
                self._done = True
            yield item

    async def aclose(self) -> None:
        self._chan.pending.pop(self.id, None)
        if not self._done:
            self._done = True
            with contextlib.suppress(ChannelError):
                await self._chan.send(jsonrpc.cancelled(self.id, "client closed the request"))


class SseChannel:
    """One GET stream for everything the server sends; POSTs to the announced endpoint for the rest. Both
    go through the Streamable HTTP channel's `request`, so its auth hook signs them too."""

    kind = "http+sse"
    mirrors_headers = False

    def __init__(self, http: HttpChannel, on_unsolicited: Unsolicited) -> None:
        self.http = http
        self.endpoint = http.endpoint
        self.on_unsolicited = on_unsolicited
        self.base_headers = {k: v for k, v in http.base_headers.items()
                             if k.lower() not in ("accept", "content-type")}
        self.post_to: HttpUrl | None = None
        self.pending: dict[Any, SseExchange] = {}
        self._resp: Response | None = None
        self._reader: asyncio.Task[None] | None = None
        self._ready: asyncio.Future[HttpUrl] | None = None

    @property
    def key(self) -> str:
        return self.http.key

    async def start(self) -> None:
        return None  # opened once by the session (`open`); a lost stream is not reopened

    def watch(self, on_unsolicited: Unsolicited | None, on_restart: Restarted | None) -> None:
        if on_unsolicited is not None:
            self.on_unsolicited = on_unsolicited

    async def open(self, *, timeout: float | None = 30.0) -> None:
        loop = asyncio.get_running_loop()
        self._ready = loop.create_future()
        try:
            resp = await self.http.request("GET", self.endpoint, {**self.base_headers, "Accept": "text/event-stream"},
                                           timeout=timeout)
        except ChannelError as e:
            raise ChannelError(f"HTTP+SSE GET failed: {e}") from None
        if resp.status != 200 or resp.content_type != "text/event-stream":
            body = await resp.read()
            if resp.status in (401, 403):
                raise AuthenticationError(resp.status, body, resp.headers)
            if resp.status == 404:
                raise ChannelError(not_found_hint(self.endpoint))
            raise ChannelError(f"HTTP+SSE GET answered HTTP {resp.status} {resp.content_type!r}: {body[:120]!r}")
        self._resp = resp
        self._reader = loop.create_task(self._read(resp))
        try:
            async with asyncio.timeout(timeout):
                self.post_to = await self._ready
        except TimeoutError:
            await self.aclose()
            raise ChannelError("the HTTP+SSE stream sent no endpoint event") from None
        except ChannelError:
            await self.aclose()
            raise

    def _announced(self, ev: Event) -> None:
        if ev.event == "endpoint" and self._ready is not None and not self._ready.done():
            try:
                target = self.endpoint.resolve(ev.data.strip())
            except ValueError:
                self._ready.set_exception(ChannelError("the HTTP+SSE endpoint event is not a URL"))
                return
            if target.key != self.endpoint.key:
                # every POST carries the stream's credentials: never to another origin (as for a redirect)
                self._ready.set_exception(ChannelError(
                    f"the HTTP+SSE endpoint event names another origin ({target.scheme}://{target.host_header})"))
                return
            self._ready.set_result(target)

    async def _read(self, resp: Response) -> None:
        try:
            async for m in iter_messages(resp.iter_bytes(), other=self._announced):
                if "method" not in m and m.get("id") in self.pending:
                    self.pending[m["id"]].queue.put_nowait(m)
                    continue
                params = obj(m.get("params"))
                meta = obj(params.get("_meta"))
                tok = meta.get(META_PROGRESS_TOKEN) if meta else params.get("progressToken")
                owner = next((x for x in self.pending.values() if x.token == tok), None) if tok is not None else None
                if owner is not None and "id" not in m:
                    owner.queue.put_nowait(m)
                else:
                    self.on_unsolicited(m)
        except Exception as e:
            log.info("HTTP+SSE stream ended: %s", e)
        finally:
            for ex in list(self.pending.values()):
                ex.queue.put_nowait(_END)

    async def exchange(
        self, message: Message, headers: Mapping[str, str] | None = None, *, timeout: float | None = -1.0
    ) -> SseExchange:
        meta = obj(obj(message.get("params")).get("_meta"))
        ex = SseExchange(self, message["id"], meta.get(META_PROGRESS_TOKEN))
        self.pending[ex.id] = ex
        try:
            await self.send(message, headers)
        except BaseException:
            self.pending.pop(ex.id, None)
            raise
        return ex

    async def send(self, message: Message, headers: Mapping[str, str] | None = None) -> int:
        if self.post_to is None or (self._reader is not None and self._reader.done()):
            raise ServerLost("the HTTP+SSE stream is closed")
        hdrs = {**self.base_headers, "Content-Type": "application/json", **(headers or {})}
        hdrs.pop("Mcp-Session-Id", None)
        try:
            resp = await self.http.request("POST", self.post_to, hdrs, orjson.dumps(message), timeout=30.0)
            body = await resp.read()
        except (ChannelError, HttpError) as e:
            raise ChannelError(f"HTTP+SSE POST failed: {e}") from None
        if resp.status in (401, 403):
            raise AuthenticationError(resp.status, body, resp.headers)
        if resp.status >= 300:
            raise ChannelError(f"HTTP+SSE POST answered HTTP {resp.status}")
        return resp.status

    async def aclose(self) -> None:
        if self._resp is not None:
            await self._resp.aclose()
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(BaseException):
                await self._reader


def not_found_hint(endpoint: HttpUrl) -> str:
    """What to fix when every way of reaching the server (server/discover, initialize, the 2024 HTTP+SSE
    GET) met a 404: nearly always a URL without the endpoint's path."""
    path = endpoint.target.split("?", 1)[0]
    url = f"{endpoint.scheme}://{endpoint.host_header}{path}"
    hint = f"nothing answers MCP at {url} (HTTP 404): check the URL's path"
    if not path.rstrip("/").endswith("/mcp"):
        hint += f"; servers usually serve MCP at /mcp, e.g. {url.rstrip('/')}/mcp (mcp-stateless serve does)"
    return hint
