"""`Client`: one object for 2026-07-28 servers (stateless, MRTR, listen) and, by deliberate fallback, legacy ones.

The client picks a channel for its target (an HTTP URL, a stdio command, an `Endpoint` object in memory),
a session for the server's era (probing with `server/discover` when asked to), and adds what is the same in
every era: retries of safe requests after a lost stream, the result cache, paging, typed listen events and
tool calls that may become tasks.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeVar

from ..protocol import methods
from ..protocol.endpoint import Endpoint
from ..protocol.errors import HEADER_MISMATCH, McpError
from ..protocol.headers import ParamHeader, param_headers
from ..protocol.meta import META_IDEMPOTENCY_KEY
from ..protocol.tasks import EXTENSION_ID as TASKS_EXTENSION
from ..protocol.versions import LATEST, is_legacy, is_modern, package_version
from .auth import Auth
from .cache import ResultCache
from .channels import Channel, HttpChannel, StdioChannel
from .era import EraCache, probe
from .errors import ChannelError, ClientError, ServerLost, StreamBroken
from .events import ServerEvent, ToolsListChanged
from .handlers import Handlers, Responder, Roots
from .memory import MemoryChannel
from .modern import ModernSession
from .session import Era, Progress, Session
from .tasks import TaskHandle

log = logging.getLogger("mcp_stateless.client")

T = TypeVar("T")

CLIENT_NAME = "mcp-stateless-client"  # clientInfo.name; its version is the package's own
SAFE_METHODS = methods.SAFE_METHODS  # retried as is after a lost connection (protocol/methods.py)
_LIST_KEYS = methods.LIST_KEYS


class Subscription:
    """`async with client.listen(...) as sub: async for event in sub:` — leaving ends the subscription."""

    def __init__(self, gen: AsyncIterator[ServerEvent]) -> None:
        self._gen = gen

    def __aiter__(self) -> AsyncIterator[ServerEvent]:
        return self._gen

    async def __anext__(self) -> ServerEvent:
        return await self._gen.__anext__()

    async def __aenter__(self) -> Subscription:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        aclose = getattr(self._gen, "aclose", None)
        if aclose is not None:
            await aclose()


def _channel(
    target: str | Endpoint | None,
    stdio: str | Sequence[str] | None,
    channel: Channel | None,
    *,
    headers: Mapping[str, str] | None,
    timeout: float | None,
    auth: Auth | None,
    env: Mapping[str, str] | None,
    cwd: str | None,
    stderr: int | None,
) -> Channel:
    if sum(x is not None for x in (target, stdio, channel)) != 1:
        raise ValueError("give exactly one of a URL or an endpoint, stdio, or channel")
    if channel is not None:
        return channel
    if stdio is not None:
        return StdioChannel(stdio, env=env, cwd=cwd, stderr=stderr)
    if isinstance(target, str):
        return HttpChannel(target, headers=headers, timeout=timeout, auth=auth)
    assert target is not None
    return MemoryChannel(target, headers=headers)


class Client:
    """An MCP client over Streamable HTTP (`Client(url)`), stdio (`Client(stdio="python server.py")`), or in
    memory against an `Endpoint` such as an `App` (`Client(app)`: no socket, for tests).

    `version`: "auto" (probe with server/discover, fall back to the legacy handshake), a modern version
    (pinned, no probe) or a legacy one (go straight to `initialize`). `era_cache` remembers the probe's
    outcome per server; share one between clients to probe each server once. `auth` signs every HTTP request.
    `stderr` (stdio): the server's stderr; None inherits this process's, `asyncio.subprocess.PIPE` captures
    it and keeps its end as `client.channel.stderr_tail` (see `StdioChannel`).
    """

    def __init__(
        self,
        url: str | Endpoint | None = None,
        *,
        stdio: str | Sequence[str] | None = None,
        channel: Channel | None = None,
        version: str = "auto",
        client_info: Mapping[str, Any] | None = None,
        elicitation: Responder | None = None,
        url_elicitation: Responder | None = None,
        sampling: Responder | None = None,
        roots: Roots | None = None,
        headers: Mapping[str, str] | None = None,
        auth: Auth | None = None,
        timeout: float | None = 60.0,
        probe_timeout: float = 5.0,
        max_rounds: int = 10,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        stderr: int | None = None,
        tasks: bool = False,
        era_cache: EraCache | None = None,
    ) -> None:
        if version != "auto" and not (is_modern(version) or is_legacy(version)):
            raise ValueError(f"unknown protocol version {version!r}")
        self.channel = _channel(url, stdio, channel, headers=headers, timeout=timeout, auth=auth, env=env,
                                cwd=cwd, stderr=stderr)
        self.requested_version = version
        if client_info is None:
            client_info = {"name": CLIENT_NAME, "version": package_version()}
        self.client_info = dict(client_info)
        self.handlers = Handlers(elicitation, url_elicitation, sampling, roots)
        self.capabilities = self.handlers.capabilities()
        # Tasks extension (opt-in): the server may then answer tools/call with a task (see client/tasks.py)
        self.tasks = tasks
        if tasks:
            self.capabilities.setdefault("extensions", {})[TASKS_EXTENSION] = {}
        self.timeout = timeout
        self.probe_timeout = probe_timeout
        self.max_rounds = max_rounds
        self.era_cache = era_cache if era_cache is not None else EraCache()
        self.cache = ResultCache()
        self.session: Session | None = None
        self._tool_headers: dict[str, tuple[ParamHeader, ...]] = {}
        self._tool_annotations: dict[str, dict[str, Any]] = {}
        self._tools_listed = False
        self._connect_lock: asyncio.Lock | None = None
        self._closed = False

    # -- what the session knows ---------------------------------------------------------------------------
    @property
    def era(self) -> Era | None:
        return self.session.era if self.session is not None else None

    @property
    def version(self) -> str:
        if self.session is not None:
            return self.session.version
        return self.requested_version if is_modern(self.requested_version) else LATEST

    @property
    def server_capabilities(self) -> dict[str, Any] | None:
        return self.session.server_capabilities if self.session is not None else None

    @property
    def server_info(self) -> dict[str, Any] | None:
        return self.session.server_info if self.session is not None else None

    @property
    def instructions(self) -> str | None:
        return self.session.instructions if self.session is not None else None

    # -- lifecycle ----------------------------------------------------------------------------------------
    async def __aenter__(self) -> Client:
        await self.connect()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self.session is not None:
            with contextlib.suppress(Exception):
                await self.session.aclose()
        await self.channel.aclose()

    async def connect(self) -> Session:
        """Pick the era (probing when `auto`) and open the session; idempotent."""
        if self.session is not None:
            return self.session
        if self._connect_lock is None:
            self._connect_lock = asyncio.Lock()
        async with self._connect_lock:
            if self.session is None:
                self.session = await self._open()
            return self.session

    def _modern(self, version: str) -> ModernSession:
        return ModernSession(
            self.channel, self.handlers, version=version, capabilities=self.capabilities,
            client_info=self.client_info, timeout=self.timeout, max_rounds=self.max_rounds, tasks=self.tasks,
            param_headers=self._param_headers,
        )

    async def _legacy(self, version: str | None) -> Session:
        from .legacy import LegacySession  # the legacy path is only loaded when a server needs it

        session = LegacySession(self.channel, self.handlers, self.client_info, version, timeout=self.timeout)
        await session.start()
        return session

    async def _open(self) -> Session:
        wanted = self.requested_version
        if is_modern(wanted):
            return self._modern(wanted)
        if wanted != "auto":
            return await self._legacy(wanted)
        await self.channel.start()
        key = self.channel.key
        cached = self.era_cache.get(key)
        if cached is not None:
            era, version = cached
            if era == "modern":
                return self._modern(version)
            try:
                return await self._legacy(version)
            except (ChannelError, McpError, ClientError):
                self.era_cache.forget(key)  # the cached assumption failed: probe again
        modern = self._modern(LATEST)
        era, version, discovered = await probe(modern, self.probe_timeout)
        self.era_cache.remember(key, era, version)
        if era == "modern":
            if discovered is not None:
                self.cache.store("server/discover", "", discovered)
            return modern
        return await self._legacy(version)

    def _param_headers(self, tool: str) -> tuple[ParamHeader, ...]:
        return self._tool_headers.get(tool, ())

    # -- requests with MRTR, retries, caching -------------------------------------------------------------
    async def _retrying(self, method: str, safe: bool, attempts: int, call: Callable[[], Awaitable[T]]) -> T:
        """Re-issue (with a new id) after a lost stream, but only when repeating `method` is harmless."""
        for attempt in range(1, attempts + 1):
            try:
                return await call()
            except (StreamBroken, ServerLost) as e:
                if not safe or attempt == attempts:
                    if not safe:
                        raise type(e)(f"{e} (not re-issued: pass safe=True or an idempotency_key "
                                      "if repeating it is harmless)") from None
                    raise
                log.warning("%s; re-issuing %s with a new id (attempt %d)", e, method, attempt + 1)
                await asyncio.sleep(min(0.05 * attempt, 0.5))
        raise AssertionError("unreachable")  # pragma: no cover

    async def request(
        self,
        method: str,
        params: Mapping[str, Any] | None = None,
        *,
        progress: Progress | None = None,
        timeout: float | None = -1.0,
        safe: bool | None = None,
        idempotency_key: str | None = None,
        attempts: int = 3,
    ) -> dict[str, Any]:
        """Send a request; fulfil MRTR rounds; re-issue (new id) after a lost stream only when `safe`."""
        session = await self.connect()
        p = dict(params or {})
        if safe is None:
            safe = method in SAFE_METHODS or idempotency_key is not None
        meta = {META_IDEMPOTENCY_KEY: idempotency_key} if idempotency_key else None
        if timeout is not None and timeout < 0:
            timeout = self.timeout
        return await self._retrying(
            method, safe, attempts,
            lambda: session.request(method, p, progress=progress, timeout=timeout, meta=meta),
        )

    def _on_event(self, ev: ServerEvent) -> None:
        self.cache.on_event(ev)
        if isinstance(ev, ToolsListChanged):
            self._tools_listed = False

    def invalidate(self, *methods: str, key: str | None = None) -> None:
        """Drop cached results of these methods (all of them when none are named)."""
        self.cache.invalidate(*methods, key=key)

    async def _cacheable(self, method: str, key: str, params: dict[str, Any], use_cache: bool) -> dict[str, Any]:
        if use_cache:
            hit = self.cache.get(method, key)
            if hit is not None:
                return hit
        result = await self.request(method, params)
        self.cache.store(method, key, result)
        return result

    # -- the API ------------------------------------------------------------------------------------------
    async def discover(self, *, use_cache: bool = True) -> dict[str, Any]:
        """server/discover (modern) or the InitializeResult-derived equivalent (legacy)."""
        session = await self.connect()
        if use_cache:
            hit = self.cache.get("server/discover", "")
            if hit is not None:
                return hit
        result = await self._retrying("server/discover", True, 3, session.discover)
        self.cache.store("server/discover", "", result)
        return result

    async def _list(self, method: str, use_cache: bool, params: Mapping[str, Any] | None = None) -> list[Any]:
        items: list[Any] = []
        cursor: str | None = None
        seen: set[str] = set()
        for _ in range(10_000):
            p: dict[str, Any] = dict(params or {})
            if cursor is not None:
                p["cursor"] = cursor
            page = await self._cacheable(method, cursor if cursor is not None else "", p, use_cache)
            got = page.get(_LIST_KEYS[method])
            if isinstance(got, list):
                items.extend(got)
            nxt = page.get("nextCursor")
            if not isinstance(nxt, str) or nxt in seen:  # missing = end; an empty string is a real cursor
                break
            seen.add(nxt)
            cursor = nxt
        return items

    async def list_tools(self, *, use_cache: bool = True) -> list[dict[str, Any]]:
        """All tools; a tool whose x-mcp-header annotations break the rules is dropped with a warning."""
        tools = await self._list("tools/list", use_cache)
        kept: list[dict[str, Any]] = []
        headers: dict[str, tuple[ParamHeader, ...]] = {}
        for t in tools:
            if not isinstance(t, dict) or not isinstance(t.get("name"), str):
                continue
            schema = t.get("inputSchema")
            try:
                specs = param_headers(schema) if isinstance(schema, dict) else ()
            except ValueError as e:
                log.warning("dropping tool %r: invalid x-mcp-header annotation (%s)", t["name"], e)
                continue
            headers[t["name"]] = specs
            ann = t.get("annotations")
            self._tool_annotations[t["name"]] = ann if isinstance(ann, dict) else {}
            kept.append(t)
        self._tool_headers = headers
        self._tools_listed = True
        return kept

    async def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        progress: Progress | None = None,
        timeout: float | None = -1.0,
        safe: bool = False,
        idempotency_key: str | None = None,
    ) -> dict[str, Any]:
        """tools/call; MRTR rounds are answered through the handlers. Returns the CallToolResult (when the
        server answers with a task, this waits for it: use `start_tool` to get the `TaskHandle` instead)."""
        handle = await self.start_tool(name, arguments, progress=progress, timeout=timeout, safe=safe,
                                       idempotency_key=idempotency_key)
        return await handle.wait()

    async def start_tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        progress: Progress | None = None,
        timeout: float | None = -1.0,
        safe: bool = False,
        idempotency_key: str | None = None,
    ) -> TaskHandle:
        """tools/call that may become a durable task (needs `Client(tasks=True)`). `await` the handle for the
        CallToolResult; `handle.cancel()`, `handle.refresh()`, `handle.task_id` while it runs. A synchronous
        answer gives an already-complete handle."""
        session = await self.connect()
        if session.mirrors_tool_headers and not self._tools_listed:
            with contextlib.suppress(McpError):
                await self.list_tools()  # x-mcp-header annotations decide the Mcp-Param-* headers
        params: dict[str, Any] = {"name": name}
        if arguments is not None:
            params["arguments"] = dict(arguments)
        try:
            first = await self.request("tools/call", params, progress=progress, timeout=timeout, safe=safe,
                                       idempotency_key=idempotency_key)
        except McpError as e:
            if e.code != HEADER_MISMATCH or not session.mirrors_tool_headers:
                raise
            await self.list_tools(use_cache=False)  # a stale x-mcp-header view: re-fetch and retry once
            first = await self.request("tools/call", params, progress=progress, timeout=timeout, safe=safe,
                                       idempotency_key=idempotency_key)
        return TaskHandle(self, self.handlers, first)

    async def list_prompts(self, *, use_cache: bool = True) -> list[dict[str, Any]]:
        return await self._list("prompts/list", use_cache)

    async def get_prompt(self, name: str, arguments: Mapping[str, str] | None = None) -> dict[str, Any]:
        params: dict[str, Any] = {"name": name}
        if arguments is not None:
            params["arguments"] = dict(arguments)
        return await self.request("prompts/get", params)

    async def list_resources(self, *, use_cache: bool = True) -> list[dict[str, Any]]:
        return await self._list("resources/list", use_cache)

    async def list_resource_templates(self, *, use_cache: bool = True) -> list[dict[str, Any]]:
        return await self._list("resources/templates/list", use_cache)

    async def read_resource(self, uri: str, *, use_cache: bool = True) -> dict[str, Any]:
        return await self._cacheable("resources/read", uri, {"uri": uri}, use_cache)

    async def complete(
        self, ref: Mapping[str, Any], argument: Mapping[str, str], context: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        params: dict[str, Any] = {"ref": dict(ref), "argument": dict(argument)}
        if context is not None:
            params["context"] = dict(context)
        return await self.request("completion/complete", params)

    # -- listen -------------------------------------------------------------------------------------------
    def listen(
        self,
        *,
        tools: bool = False,
        prompts: bool = False,
        resources: bool = False,
        resource_uris: Sequence[str] | None = None,
        extra: Mapping[str, Any] | None = None,
    ) -> Subscription:
        """subscriptions/listen as an async iterator of typed events; close it to end the subscription."""
        flt: dict[str, Any] = {}
        if tools:
            flt["toolsListChanged"] = True
        if prompts:
            flt["promptsListChanged"] = True
        if resources:
            flt["resourcesListChanged"] = True
        if resource_uris:
            flt["resourceSubscriptions"] = list(resource_uris)
        if extra:
            flt.update(extra)
        return Subscription(self._listen(flt))

    async def _listen(self, flt: dict[str, Any]) -> AsyncIterator[ServerEvent]:
        session = await self.connect()
        events = session.listen(flt)
        try:
            async for ev in events:
                self._on_event(ev)
                yield ev
        finally:
            aclose = getattr(events, "aclose", None)
            if aclose is not None:
                await aclose()


__all__ = ["Client", "Subscription"]
