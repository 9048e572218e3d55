"""A 2025 session the auditor opens on a target, the way a 2025 client does: `initialize`, then
`notifications/initialized`, then requests inside the session. Over Streamable HTTP the session is its
`Mcp-Session-Id` (sent, on purpose, to whichever instance a request names, as a non-sticky balancer would);
over stdio it is a process of its own. The auditor declares no client capabilities, so a conforming 2025 server
sends it no elicitation, sampling or roots request; one that asks anyway is declined (`refusal`): a probe never
answers a user's question or stands in for a model."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import orjson

from ..client.channels import StdioChannel
from ..client.http11 import HttpError, HttpUrl, Pool, bounded
from ..protocol.errors import METHOD_NOT_FOUND
from ..protocol.sse import iter_messages
from ..protocol.versions import LEGACY_VERSIONS
from .engine import Context
from .targets import HttpTarget, Lane
from .targets.base import BODY_MAX, TOO_LARGE
from .targets.http import http_exchange
from .wire import AUDITOR_INFO, Exchange, Message, all_pages, next_id

LEGACY = LEGACY_VERSIONS[0]


SAMPLING_REFUSED = "sampling refused (a JSON-RPC error)"


def refusal(asked: Message) -> tuple[str, Message]:
    """The auditor's answer to a request a 2025 server sent it, and its kind for the report: an elicitation
    declined, sampling refused (an error: 2025 sampling has no refusal result, and a made-up model answer could
    be acted on), roots refused as not offered (no roots capability was declared), a ping answered, anything
    else not offered."""
    method, id_ = asked.get("method"), asked.get("id")
    if method == "elicitation/create":
        return "elicitation decline", {"jsonrpc": "2.0", "id": id_, "result": {"action": "decline"}}
    if method == "ping":
        return "ping", {"jsonrpc": "2.0", "id": id_, "result": {}}
    if method == "sampling/createMessage":
        return SAMPLING_REFUSED, {"jsonrpc": "2.0", "id": id_, "error": {
            "code": -1, "message": "declined: the mcp-stateless auditor never answers for a model"}}
    return f"{method} refused", {"jsonrpc": "2.0", "id": id_, "error": {
        "code": METHOD_NOT_FOUND, "message": f"{method} not offered: the auditor declared no capability for it"}}


def initialize_request() -> Message:
    return {"jsonrpc": "2.0", "id": next_id(), "method": "initialize", "params": {
        "protocolVersion": LEGACY, "capabilities": {}, "clientInfo": AUDITOR_INFO}}


def request(method: str, params: dict[str, Any] | None = None) -> Message:
    return {"jsonrpc": "2.0", "id": next_id(), "method": method, "params": dict(params or {})}


def tool_call(name: str, arguments: dict[str, Any] | None = None) -> Message:
    return request("tools/call", {"name": name, "arguments": dict(arguments or {})})


class AuditorSession:
    """One open 2025 session. `init` is the initialize exchange; `opened` whether the server took it;
    `session_id` the HTTP session's id ("" when the server runs its transport without sessions)."""

    def __init__(self, ctx: Context, instance: int, lane: Lane | None) -> None:
        self.ctx, self.instance, self.lane = ctx, instance, lane
        self.init = Exchange(None)
        self.session_id = ""
        self.version = LEGACY
        # The standalone GET stream's request and answer (its status and headers), once `listen` has them.
        self.stream: Exchange | None = None
        self.stream_known = asyncio.Event()
        self.answering: set[asyncio.Task[Any]] = set()  # refusals being written (stdio), cancelled at the end

    @property
    def opened(self) -> bool:
        return self.init.result is not None and isinstance(self.init.result.get("protocolVersion"), str)

    @property
    def capabilities(self) -> dict[str, Any]:
        caps = (self.init.result or {}).get("capabilities")
        return caps if isinstance(caps, dict) else {}

    def headers(self) -> dict[str, str]:
        return {"mcp-protocol-version": self.version} | ({"mcp-session-id": self.session_id}
                                                         if self.session_id else {})

    def noted(self, asked: Message) -> Message:
        """The refusal of `asked`, counted in the report's answers."""
        kind, reply = refusal(asked)
        self.ctx.target.ledger.answer(kind)
        return reply

    async def _send(self, message: Message, instance: int | None, timeout: float) -> Exchange:
        if self.lane is not None:
            return await self.lane.send(message, timeout=timeout)
        t = self.ctx.target
        assert isinstance(t, HttpTarget)
        where = self.instance if instance is None else instance

        async def answer(asked: Message) -> None:
            await t.send(self.noted(asked), instance=where, mirror=False, headers=self.headers(), timeout=timeout)

        # Sent to the instance named, never through a balancer: the session belongs to one on purpose.
        return t.record(await http_exchange(t.pool, t.urls[where], message, instance=where, http_method="POST",
                                            headers=t.headers(message, self.headers(), None, mirror=False),
                                            timeout=timeout, on_request=answer))

    async def open(self) -> None:
        timeout = self.ctx.options.call_timeout
        if self.lane is not None:
            self.init = await self.lane.send(initialize_request(), timeout=timeout)
        else:
            self.init = await self.ctx.target.send(initialize_request(), instance=self.instance, mirror=False,
                                                   timeout=timeout)
            self.session_id = self.init.response_headers.get("mcp-session-id", "")
        if not self.opened:
            return
        self.version = str((self.init.result or {}).get("protocolVersion") or LEGACY)
        note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        if self.lane is not None:
            await self.lane.notify(note)
        else:
            await self.ctx.target.send(note, instance=self.instance, mirror=False, headers=self.headers(),
                                       timeout=timeout)

    async def drop(self, message: Message) -> Exchange:
        """`message` sent in the session and its response stream broken before any answer can arrive: over
        HTTP the connection closed right after the request is written, over stdio the request cancelled
        (`notifications/cancelled`) right after it is written."""
        ex = Exchange(message, "POST" if self.lane is None else "stdio", {}, self.instance)
        chan = getattr(self.lane, "chan", None)
        if isinstance(chan, StdioChannel):
            pending = await chan.exchange(message)
            await pending.aclose()
        else:
            t = self.ctx.target
            assert isinstance(t, HttpTarget)
            url = HttpUrl.parse(t.urls[self.instance])
            ex.headers = t.headers(message, self.headers(), None, mirror=False)
            body = orjson.dumps(message)
            head = "".join(f"{k}: {v}\r\n" for k, v in {**ex.headers, "host": url.host_header,
                                                         "content-length": str(len(body))}.items())
            try:
                _, writer = await asyncio.open_connection(url.host, url.port)
                writer.write(f"POST {url.target} HTTP/1.1\r\n{head}\r\n".encode() + body)
                await writer.drain()
                writer.close()  # before the server can answer: the client went away mid-request
                with contextlib.suppress(OSError):
                    await writer.wait_closed()
            except OSError as e:
                ex.failure = f"could not send it: {e}"
                return self.ctx.target.record(ex)
        ex.failure = "the auditor broke the response stream before any answer"
        return self.ctx.target.record(ex)

    async def send(self, message: Message, *, instance: int | None = None, timeout: float | None = None) -> Exchange:
        """`message` inside this session, to `instance` (HTTP; default: the one that opened it)."""
        return await self._send(message, instance, self.ctx.options.call_timeout if timeout is None else timeout)

    async def listen(self) -> None:
        """The session's standalone GET stream, held open as a 2025 client holds it: a server sends there the
        requests it makes outside a call's response (sampling through its session object, say), and each gets
        the auditor's refusal. A server without one (405) just has nothing to send."""
        t = self.ctx.target
        assert isinstance(t, HttpTarget)
        headers = {k: v for k, v in t.headers(None, self.headers(), None, mirror=False).items()
                   if k != "content-type"} | {"accept": "text/event-stream"}
        pool = Pool(max_idle=0)
        self.stream = Exchange(None, "GET", headers, self.instance)
        try:
            resp = await pool.request("GET", HttpUrl.parse(t.urls[self.instance]), headers, b"", timeout=10.0)
            self.stream.status, self.stream.response_headers = resp.status, dict(resp.headers)
            t.record(self.stream)
            self.stream_known.set()
            if resp.status != 200 or resp.content_type != "text/event-stream":
                await resp.aclose()
                return
            try:
                async for m in iter_messages(bounded(resp.iter_bytes(), BODY_MAX, TOO_LARGE)):
                    if "method" in m and "id" in m:
                        await t.send(self.noted(m), instance=self.instance, mirror=False, headers=self.headers(),
                                     timeout=self.ctx.options.call_timeout)
            finally:
                await resp.aclose()
        except (HttpError, OSError) as e:
            self.stream.failure = str(e)  # ended or refused: the requests sent on it are lost, never answered
        finally:
            self.stream_known.set()
            await pool.aclose()

    @property
    def keeps_stream(self) -> bool:
        """Whether the session has a standalone GET stream (a server answering that GET with an SSE stream)."""
        x = self.stream
        return x is not None and x.status == 200 and \
            x.response_headers.get("content-type", "").startswith("text/event-stream")

    async def close(self) -> None:
        """DELETE the HTTP session (a 2025 client's goodbye); a stdio session ends with its process."""
        if self.lane is None and self.session_id:
            await self.ctx.target.send(None, instance=self.instance, http_method="DELETE",
                                       headers=self.headers(), timeout=5)


def answering(s: AuditorSession) -> None:
    """Over stdio, a request the server sends outside any exchange (its process's own channel) is answered
    with the auditor's `refusal` too."""
    chan = getattr(s.lane, "chan", None)
    if not isinstance(chan, StdioChannel):
        return

    def on_message(m: Message) -> None:
        if "method" in m and "id" in m:
            task = asyncio.get_running_loop().create_task(chan.send(s.noted(m)))
            s.answering.add(task)
            task.add_done_callback(s.answering.discard)

    chan.watch(on_message, None)


@contextlib.asynccontextmanager
async def session(ctx: Context, instance: int = 0) -> AsyncIterator[AuditorSession]:
    """A new session on `instance` (HTTP) or on a process of its own (stdio), ended when the block ends."""
    t = ctx.target
    if t.kind == "stdio":
        async with t.lane(instance) as lane:
            s = AuditorSession(ctx, instance, lane)
            answering(s)
            await s.open()
            try:
                yield s
            finally:
                for task in list(s.answering):
                    task.cancel()
        return
    s = AuditorSession(ctx, instance, None)
    await s.open()
    listener = asyncio.get_running_loop().create_task(s.listen()) if s.session_id else None
    if listener is not None:
        with contextlib.suppress(TimeoutError):  # a server that never answers the GET has no stream to use
            await asyncio.wait_for(s.stream_known.wait(), 2.0)
    try:
        yield s
    finally:
        if listener is not None:
            listener.cancel()
            with contextlib.suppress(BaseException):
                await listener
        await s.close()


async def list_all(s: AuditorSession, method: str, key: str, *, instance: int | None = None) -> tuple[list[Any],
                                                                                                  Exchange]:
    """Every page of a list method inside the session (at most PAGES_MAX pages)."""
    return await all_pages(lambda cursor: s.send(request(method, {"cursor": cursor} if cursor else {}),
                                                 instance=instance), key)


__all__ = ["LEGACY", "AuditorSession", "initialize_request", "list_all", "refusal", "request", "session", "tool_call"]
