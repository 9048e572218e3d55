"""The 2024-11-05 HTTP+SSE transport: GET an SSE stream, POST each message to the endpoint it announces."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

import orjson

from ..channels import ChannelError, Exchange, ServerLost
from ..events import obj
from ..http11 import Endpoint, HttpError, Pool, Response
from ..sse import SSEParser

log = logging.getLogger("mcp_stateless.client.legacy")

_END = object()


class SseExchange(Exchange):
    def __init__(self, chan: SseChannel, id_: Any) -> None:
        self._chan = chan
        self.id = id_
        self.queue: asyncio.Queue[Any] = asyncio.Queue()
        self.status = 200
        self.headers = {}
        self.session_id = None
        self.token: Any = None
        self._done = False

    async def __aiter__(self) -> AsyncIterator[dict[str, Any]]:
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
                await self._chan.send({"jsonrpc": "2.0", "method": "notifications/cancelled",
                                       "params": {"requestId": self.id, "reason": "client closed the request"}})


class SseChannel:
    """One GET stream for everything the server sends; POSTs to the announced endpoint for the rest."""

    kind = "http+sse"

    def __init__(
        self,
        url: str,
        pool: Pool,
        on_unsolicited: Callable[[dict[str, Any]], None],
        *,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        self.url = url
        self.endpoint = Endpoint.parse(url)
        self.pool = pool
        self.on_unsolicited = on_unsolicited
        self.base_headers = {k: v for k, v in (headers or {}).items()
                             if k.lower() not in ("accept", "content-type")}
        self.post_to: Endpoint | None = None
        self.pending: dict[Any, SseExchange] = {}
        self._resp: Response | None = None
        self._reader: asyncio.Task[None] | None = None
        self._ready: asyncio.Future[Endpoint] | None = None

    async def open(self, *, timeout: float | None = 30.0) -> None:
        loop = asyncio.get_running_loop()
        self._ready = loop.create_future()
        try:
            resp = await self.pool.request("GET", self.endpoint, {**self.base_headers, "Accept": "text/event-stream"},
                                           b"", timeout=timeout)
        except HttpError as e:
            raise ChannelError(f"HTTP+SSE GET failed: {e}") from None
        if resp.status != 200 or resp.content_type != "text/event-stream":
            body = await resp.read()
            raise ChannelError(f"HTTP+SSE GET answered HTTP {resp.status} {resp.content_type!r}: {body[:120]!r}")
        self._resp = resp
        self._reader = loop.create_task(self._read(resp))
        try:
            async with asyncio.timeout(timeout):
                self.post_to = await self._ready
        except TimeoutError:
            await self.aclose()
            raise ChannelError("the HTTP+SSE stream sent no endpoint event") from None

    async def _read(self, resp: Response) -> None:
        parser = SSEParser()
        try:
            async for chunk in resp.iter_bytes():
                for ev in parser.feed(chunk):
                    if ev.event == "endpoint":
                        if self._ready is not None and not self._ready.done():
                            self._ready.set_result(self.endpoint.resolve(ev.data.strip()))
                        continue
                    if ev.event != "message" or not ev.data:
                        continue
                    try:
                        m = orjson.loads(ev.data)
                    except orjson.JSONDecodeError:
                        continue
                    if not isinstance(m, dict):
                        continue
                    if "method" not in m and m.get("id") in self.pending:
                        self.pending[m["id"]].queue.put_nowait(m)
                    else:
                        params = obj(m.get("params"))
                        meta = obj(params.get("_meta"))
                        tok = meta.get("progressToken") if meta else params.get("progressToken")
                        owner = next((x for x in self.pending.values() if tok is not None and
                                      x.token == tok), None) if tok is not None else None
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
        self, message: dict[str, Any], headers: Mapping[str, str] | None = None, *, timeout: float | None = None
    ) -> SseExchange:
        ex = SseExchange(self, message["id"])
        params = obj(message.get("params"))
        meta = obj(params.get("_meta"))
        ex.token = meta.get("progressToken")
        self.pending[ex.id] = ex
        try:
            await self.send(message, headers)
        except BaseException:
            self.pending.pop(ex.id, None)
            raise
        return ex

    async def send(self, message: dict[str, Any], headers: Mapping[str, str] | None = None) -> int:
        if self.post_to is None or (self._reader is not None and self._reader.done()):
            raise ServerLost("the HTTP+SSE stream is closed")
        hdrs = {**self.base_headers, "Content-Type": "application/json", **(headers or {})}
        hdrs.pop("Mcp-Session-Id", None)
        try:
            resp = await self.pool.request("POST", self.post_to, hdrs, orjson.dumps(message), timeout=30.0)
            await resp.read()
        except HttpError as e:
            raise ChannelError(f"HTTP+SSE POST failed: {e}") from None
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
