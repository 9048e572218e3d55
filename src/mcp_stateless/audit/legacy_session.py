"""A 2025 session the auditor opens on a target, the way a 2025 client does: `initialize`, then
`notifications/initialized`, then requests inside the session. Over Streamable HTTP the session is its
`Mcp-Session-Id` (sent, on purpose, to whichever instance a request names, as a non-sticky balancer would);
over stdio it is a process of its own. The auditor declares no client capabilities, so a conforming 2025 server
sends it no elicitation, sampling or roots request: a probe never answers a user's question."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

from ..protocol.versions import LEGACY_VERSIONS
from .engine import Context
from .targets import Lane
from .wire import AUDITOR_INFO, Exchange, Message, next_id

LEGACY = LEGACY_VERSIONS[0]


def initialize_request() -> Message:
    return {"jsonrpc": "2.0", "id": next_id(), "method": "initialize", "params": {
        "protocolVersion": LEGACY, "capabilities": {}, "clientInfo": AUDITOR_INFO}}


def request(method: str, params: dict[str, Any] | None = None) -> Message:
    return {"jsonrpc": "2.0", "id": next_id(), "method": method, "params": dict(params or {})}


def tool_call(name: str, arguments: dict[str, Any] | None = None) -> Message:
    return request("tools/call", {"name": name, "arguments": dict(arguments or {})})


class LegacySession:
    """One open 2025 session. `init` is the initialize exchange; `opened` whether the server took it;
    `session_id` the HTTP session's id ("" when the server runs its transport without sessions)."""

    def __init__(self, ctx: Context, instance: int, lane: Lane | None) -> None:
        self.ctx, self.instance, self.lane = ctx, instance, lane
        self.init = Exchange(None)
        self.session_id = ""
        self.version = LEGACY

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

    async def _send(self, message: Message, instance: int | None, timeout: float) -> Exchange:
        if self.lane is not None:
            return await self.lane.send(message, timeout=timeout)
        return await self.ctx.target.send(message, instance=self.instance if instance is None else instance,
                                          mirror=False, headers=self.headers(), timeout=timeout)

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

    async def send(self, message: Message, *, instance: int | None = None, timeout: float | None = None) -> Exchange:
        """`message` inside this session, to `instance` (HTTP; default: the one that opened it)."""
        return await self._send(message, instance, self.ctx.options.call_timeout if timeout is None else timeout)

    async def close(self) -> None:
        """DELETE the HTTP session (a 2025 client's goodbye); a stdio session ends with its process."""
        if self.lane is None and self.session_id:
            await self.ctx.target.send(None, instance=self.instance, http_method="DELETE",
                                       headers=self.headers(), timeout=5)


@contextlib.asynccontextmanager
async def session(ctx: Context, instance: int = 0) -> AsyncIterator[LegacySession]:
    """A new session on `instance` (HTTP) or on a process of its own (stdio), ended when the block ends."""
    t = ctx.target
    if t.kind == "stdio":
        async with t.lane(instance) as lane:
            s = LegacySession(ctx, instance, lane)
            await s.open()
            yield s
        return
    s = LegacySession(ctx, instance, None)
    await s.open()
    try:
        yield s
    finally:
        await s.close()


async def list_all(s: LegacySession, method: str, key: str, *, instance: int | None = None) -> tuple[list[Any],
                                                                                                  Exchange]:
    """Every page of a list method inside the session (at most 20 pages)."""
    items: list[Any] = []
    cursor: str | None = None
    ex = Exchange(None)
    for _ in range(20):
        ex = await s.send(request(method, {"cursor": cursor} if cursor else {}), instance=instance)
        res = ex.result or {}
        items.extend(res.get(key) or [])
        cursor = res.get("nextCursor")
        if not cursor:
            break
    return items, ex


__all__ = ["LEGACY", "LegacySession", "initialize_request", "list_all", "request", "session", "tool_call"]
