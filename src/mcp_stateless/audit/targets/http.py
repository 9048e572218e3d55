"""Instances of one server at given Streamable HTTP URLs, each request to the next in turn."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import Literal

import orjson

from ...client.http11 import HttpError, HttpUrl, Pool, bounded
from ...protocol.sse import decode_messages, iter_messages
from ..wire import Exchange, Message, headers_for
from .base import ACCEPT, BODY_MAX, MESSAGES_MAX, TOO_LARGE, Lane, Recorder, Restart, Stream, TargetError, streaming


async def http_exchange(pool: Pool, url: str, message: Message | None, *, instance: int, http_method: str,
                         headers: Mapping[str, str], timeout: float,
                         on_request: Callable[[Message], Awaitable[None]] | None = None) -> Exchange:
    """`message` sent and its response read (an SSE stream until the response arrives); `on_request` is
    given every request the server sends on that stream (a 2025 server's elicitation, say) to answer."""
    body = b"" if message is None else orjson.dumps(message)
    ex = Exchange(message, http_method, dict(headers), instance)
    want = (message or {}).get("id")
    try:
        async with asyncio.timeout(timeout):
            resp = await pool.request(http_method, HttpUrl.parse(url), headers, body, timeout=None)
            ex.status, ex.response_headers = resp.status, dict(resp.headers)
            try:
                if resp.content_type == "text/event-stream":
                    async for m in iter_messages(bounded(resp.iter_bytes(), BODY_MAX, TOO_LARGE)):
                        done = "method" not in m and m.get("id") == want and want is not None
                        if on_request is not None and "method" in m and "id" in m:
                            await on_request(m)
                        if done or len(ex.messages) < MESSAGES_MAX - 1:  # room for the response, always
                            ex.messages.append(m)
                        if done:
                            break  # the response ends the exchange, whatever the stream does next
                else:
                    ex.body = b"".join([c async for c in bounded(resp.iter_bytes(), BODY_MAX, TOO_LARGE)])
                    ex.messages = decode_messages(ex.body) if ex.body[:1] in (b"{", b"[") else []
            finally:
                await resp.aclose()
    except TimeoutError:
        ex.failure, ex.timed_out = f"no complete response within {timeout:g} s", True
    except HttpError as e:
        ex.failure = str(e)
    return ex


class _HttpLane:
    def __init__(self, target: HttpTarget, instance: int) -> None:
        self.target, self.instance = target, instance
        self.pool = Pool(max_idle=1)

    async def send(self, message: Message, *, headers: Mapping[str, str | None] | None = None,
                   principal: str | None = None, timeout: float = 10.0) -> Exchange:
        return self.target.record(await http_exchange(
            self.pool, self.target.urls[self.instance], message, instance=self.instance, http_method="POST",
            headers=self.target.headers(message, headers, principal), timeout=timeout))

    async def notify(self, message: Message) -> None:
        await self.send(message, timeout=5.0)


class HttpTarget(Recorder):
    """Instances of one server at the given URLs; requests go to each in turn."""

    kind: Literal["http", "stdio"] = "http"
    can_restart = False

    def __init__(self, urls: Sequence[str], principals: Mapping[str, str] | None = None) -> None:
        if not urls:
            raise TargetError("no URL given")
        for u in urls:
            try:
                HttpUrl.parse(u)
            except ValueError as e:
                raise TargetError(str(e)) from None
        super().__init__()
        self.urls = list(urls)
        self.principals = dict(principals or {})
        self.pool = Pool()
        self.last_instance = 0
        self._next = 0
        self.description = " ".join(self.urls)

    @property
    def instances(self) -> int:
        return len(self.urls)

    @property
    def url(self) -> str | None:
        return self.urls[0] if len(self.urls) == 1 else None

    async def start(self) -> None:
        return None

    def headers(self, message: Message | None, extra: Mapping[str, str | None] | None, principal: str | None,
                mirror: bool = True) -> dict[str, str]:
        h: dict[str, str | None] = {"content-type": "application/json", "accept": ACCEPT}
        if mirror and message is not None and "method" in message:
            h.update({k.lower(): v for k, v in headers_for(message).items()})
        token = self.principals.get(principal) if principal else next(iter(self.principals.values()), None)
        if token:
            h["authorization"] = f"Bearer {token}"
        h.update({k.lower(): v for k, v in (extra or {}).items()})  # an override replaces, never repeats
        return {k: v for k, v in h.items() if v is not None}

    def _pick(self, instance: int | None) -> int:
        if instance is None:
            instance = self._next % len(self.urls)
            self._next += 1
        self.last_instance = instance
        return instance

    async def send(self, message: Message | None, *, instance: int | None = None,
                   headers: Mapping[str, str | None] | None = None, http_method: str = "POST",
                   mirror: bool = True, principal: str | None = None, timeout: float = 10.0) -> Exchange:
        h = self.headers(message, headers, principal, mirror)
        if http_method != "POST":
            h = {k: v for k, v in h.items() if k in ("accept", "authorization")}
            h.update({k: v for k, v in (headers or {}).items() if v is not None})
        return self.record(await self._exchange(message, instance, http_method, h, timeout))

    async def _exchange(self, message: Message | None, instance: int | None, http_method: str,
                        headers: dict[str, str], timeout: float) -> Exchange:
        i = self._pick(instance)
        return await http_exchange(self.pool, self.urls[i], message, instance=i, http_method=http_method,
                                    headers=headers, timeout=timeout)

    async def notify(self, message: Message) -> None:
        await self.send(message)

    async def get(self, suffix: str, instance: int = 0, timeout: float = 10.0) -> Exchange:
        """GET a document beside instance `instance`'s endpoint (`<endpoint><suffix>`, e.g. its Server Card)."""
        headers = {k: v for k, v in self.headers(None, {"accept": "application/json"}, None).items()
                   if k in ("accept", "authorization")}
        return self.record(await http_exchange(self.pool, self.urls[instance].rstrip("/") + suffix, None,
                                               instance=instance, http_method="GET", headers=headers,
                                               timeout=timeout))

    @contextlib.asynccontextmanager
    async def lane(self, instance: int = 0) -> AsyncIterator[Lane]:
        lane = _HttpLane(self, instance)
        try:
            yield lane
        finally:
            await lane.pool.aclose()

    @contextlib.asynccontextmanager
    async def stream(self, message: Message, instance: int = 0) -> AsyncIterator[Stream]:
        """POST `message` on a connection of its own and keep reading its response until the block ends
        (closing the connection is how HTTP ends a listen)."""
        self.last_instance = instance
        self.ledger.note(message, instance)
        headers = self.headers(message, None, None)
        st = Stream(Exchange(message, "POST", headers, instance))
        pool = Pool(max_idle=0)
        url = self.urls[instance]

        async def source() -> AsyncIterator[Message]:
            resp = await pool.request("POST", HttpUrl.parse(url), headers, orjson.dumps(message), timeout=10.0)
            st.exchange.status, st.exchange.response_headers = resp.status, dict(resp.headers)
            if resp.content_type == "text/event-stream":
                async for m in iter_messages(bounded(resp.iter_bytes(), BODY_MAX, TOO_LARGE)):
                    yield m
            else:
                for m in decode_messages(b"".join([c async for c in bounded(resp.iter_bytes(), BODY_MAX, TOO_LARGE)])):
                    yield m

        try:
            async with streaming(st, source()) as out:
                yield out
        finally:
            await pool.aclose()

    async def restart(self, which: Restart = "all") -> None:
        raise TargetError("the auditor did not start these instances, so it cannot restart them (use --launch)")

    async def aclose(self) -> None:
        await self.pool.aclose()
