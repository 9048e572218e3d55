"""A small synchronous layer over `Client`: a private event loop on a background thread."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Coroutine, Iterator, Mapping
from typing import Any, TypeVar

from ..protocol.endpoint import Endpoint
from .core import Client
from .events import ServerEvent

T = TypeVar("T")


async def _next(it: AsyncIterator[ServerEvent]) -> ServerEvent:
    return await it.__anext__()


class SyncClient:
    """`with SyncClient("http://127.0.0.1:8000/mcp") as c: c.call_tool("echo", {"text": "hi"})`."""

    def __init__(self, url: str | Endpoint | None = None, **kwargs: Any) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="mcp-sync-client", daemon=True)
        self._thread.start()
        self.client: Client = self._run(self._make(url, kwargs))

    @staticmethod
    async def _make(url: str | Endpoint | None, kwargs: dict[str, Any]) -> Client:
        return Client(url, **kwargs)

    def _run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    def __enter__(self) -> SyncClient:
        self._run(self.client.connect())
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._loop.is_closed():
            return
        try:
            self._run(self.client.aclose())
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(5)
            self._loop.close()

    def discover(self) -> dict[str, Any]:
        return self._run(self.client.discover())

    def list_tools(self) -> list[dict[str, Any]]:
        return self._run(self.client.list_tools())

    def call_tool(self, name: str, arguments: Mapping[str, Any] | None = None, **kw: Any) -> dict[str, Any]:
        return self._run(self.client.call_tool(name, arguments, **kw))

    def list_prompts(self) -> list[dict[str, Any]]:
        return self._run(self.client.list_prompts())

    def get_prompt(self, name: str, arguments: Mapping[str, str] | None = None) -> dict[str, Any]:
        return self._run(self.client.get_prompt(name, arguments))

    def list_resources(self) -> list[dict[str, Any]]:
        return self._run(self.client.list_resources())

    def list_resource_templates(self) -> list[dict[str, Any]]:
        return self._run(self.client.list_resource_templates())

    def read_resource(self, uri: str) -> dict[str, Any]:
        return self._run(self.client.read_resource(uri))

    def request(self, method: str, params: Mapping[str, Any] | None = None, **kw: Any) -> dict[str, Any]:
        return self._run(self.client.request(method, params, **kw))

    def listen(self, *, limit: int | None = None, **kw: Any) -> Iterator[ServerEvent]:
        """Events until the stream ends (or `limit` events); breaking out closes the subscription."""
        sub = self.client.listen(**kw)
        it = sub.__aiter__()
        n = 0
        try:
            while limit is None or n < limit:
                try:
                    ev: ServerEvent = self._run(_next(it))
                except StopAsyncIteration:
                    return
                n += 1
                yield ev
        finally:
            self._run(sub.aclose())


__all__ = ["SyncClient"]
