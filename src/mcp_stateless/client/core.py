"""`Client`: one object for 2026-07-28 servers (stateless, MRTR, listen) and, by deliberate fallback, legacy ones.

Every modern request is self-contained: `_meta` carries the version, the capabilities derived from the handlers
and the client info; on HTTP the `MCP-Protocol-Version`, `Mcp-Method`, `Mcp-Name` and `Mcp-Param-*` headers
mirror the body. Era selection follows REFERENCE.md §1.5 and is cached per server.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any

from ..protocol.errors import HEADER_MISMATCH, MISSING_CLIENT_CAPABILITY, UNSUPPORTED_PROTOCOL_VERSION, McpError
from ..protocol.headers import ParamHeader, encode_header_value, param_headers, value_at
from ..protocol.versions import LATEST, LEGACY_VERSIONS, MODERN_VERSIONS, is_legacy, is_modern
from .channels import ChannelError, HttpChannel, HttpStatusError, ServerLost, StdioChannel
from .events import (
    Acknowledged,
    ClientError,
    InvalidResult,
    ListenEnded,
    ListenEvent,
    PromptsListChanged,
    ResourcesListChanged,
    ResourceUpdated,
    StreamBroken,
    ToolsListChanged,
    TooManyRounds,
    UnsupportedServer,
    event_for,
    obj,
)
from .handlers import Handler, Handlers, Roots
from .tasks import EXTENSION_ID as TASKS_EXTENSION
from .tasks import TaskHandle

log = logging.getLogger("mcp_stateless.client")

PV = "io.modelcontextprotocol/protocolVersion"
CC = "io.modelcontextprotocol/clientCapabilities"
CI = "io.modelcontextprotocol/clientInfo"
SUB = "io.modelcontextprotocol/subscriptionId"
IDEMPOTENCY_KEY = "dev.mcp-stateless/idempotencyKey"

DEFAULT_CLIENT_INFO = {"name": "mcp-stateless-client", "version": "0.1.0"}
MRTR_METHODS = frozenset({"tools/call", "prompts/get", "resources/read"})
SAFE_METHODS = frozenset({
    "server/discover", "tools/list", "prompts/list", "resources/list", "resources/templates/list",
    "resources/read", "prompts/get", "completion/complete",
})
_MODERN_ERRORS = frozenset({HEADER_MISMATCH, MISSING_CLIENT_CAPABILITY, UNSUPPORTED_PROTOCOL_VERSION})
_LIST_KEYS = {"tools/list": "tools", "prompts/list": "prompts", "resources/list": "resources",
              "resources/templates/list": "resourceTemplates"}

# Era per server (REFERENCE.md §1.5: cache per stdio command / HTTP endpoint; re-probe when it fails).
ERA_CACHE: dict[str, tuple[str, str]] = {}

Progress = Callable[[dict[str, Any]], Any]


def _error(err: Any) -> McpError:
    if not isinstance(err, dict):
        return McpError(-32603, "malformed error response")
    code = err.get("code")
    return McpError(code if isinstance(code, int) else -32603, str(err.get("message", "")), err.get("data"))


def _pick_modern(supported: Any) -> str | None:
    if not isinstance(supported, list):
        return None
    for v in MODERN_VERSIONS:
        if v in supported:
            return v
    return None


class Subscription:
    """`async with client.listen(...) as sub: async for event in sub:` — leaving ends the subscription."""

    def __init__(self, gen: AsyncIterator[ListenEvent]) -> None:
        self._gen = gen

    def __aiter__(self) -> AsyncIterator[ListenEvent]:
        return self._gen

    async def __anext__(self) -> ListenEvent:
        return await self._gen.__anext__()

    async def __aenter__(self) -> Subscription:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        aclose = getattr(self._gen, "aclose", None)
        if aclose is not None:
            await aclose()


class Client:
    """An MCP client over Streamable HTTP (`Client(url)`) or stdio (`Client(stdio="python server.py")`).

    `version`: "auto" (probe with server/discover, fall back to the legacy handshake), a modern version
    (pinned, no probe) or a legacy one (go straight to `initialize`).
    """

    def __init__(
        self,
        url: str | None = None,
        *,
        stdio: str | Sequence[str] | None = None,
        version: str = "auto",
        client_info: Mapping[str, Any] | None = None,
        elicitation: Handler | None = None,
        url_elicitation: Handler | None = None,
        sampling: Handler | None = None,
        roots: Roots | None = None,
        headers: Mapping[str, str] | None = None,
        timeout: float | None = 60.0,
        probe_timeout: float = 5.0,
        max_rounds: int = 10,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        stderr: int | None = None,
        tasks: bool = False,
    ) -> None:
        if (url is None) == (stdio is None):
            raise ValueError("give exactly one of url or stdio")
        if version != "auto" and not (is_modern(version) or is_legacy(version)):
            raise ValueError(f"unknown protocol version {version!r}")
        self.channel: HttpChannel | StdioChannel
        if url is not None:
            self.channel = HttpChannel(url, headers=headers, timeout=timeout)
        else:
            assert stdio is not None
            self.channel = StdioChannel(stdio, env=env, cwd=cwd, stderr=stderr)
        self.requested_version = version
        self.version = version if is_modern(version) else LATEST
        self.client_info = dict(client_info or DEFAULT_CLIENT_INFO)
        self.handlers = Handlers(elicitation, url_elicitation, sampling, roots)
        self.capabilities = self.handlers.capabilities()
        # Tasks extension (opt-in): the server may then answer tools/call with a task (see client/tasks.py)
        self.tasks = tasks
        if tasks:
            self.capabilities.setdefault("extensions", {})[TASKS_EXTENSION] = {}
        self.timeout = timeout
        self.probe_timeout = probe_timeout
        self.max_rounds = max_rounds
        self.era: str | None = "modern" if is_modern(version) else None
        self.legacy: Any = None  # legacy.LegacySession once the era is legacy
        self.server_capabilities: dict[str, Any] | None = None
        self.server_info: dict[str, Any] | None = None
        self.instructions: str | None = None
        self._ids = itertools.count(1)
        self._connect_lock: asyncio.Lock | None = None
        self._tool_headers: dict[str, tuple[ParamHeader, ...]] = {}
        self._tool_annotations: dict[str, dict[str, Any]] = {}
        self._tools_listed = False
        self._cache: dict[tuple[str, str], tuple[float, dict[str, Any]]] = {}
        self._closed = False
        self._bg: set[asyncio.Future[Any]] = set()

    @property
    def is_http(self) -> bool:
        return isinstance(self.channel, HttpChannel)

    # -- lifecycle ------------------------------------------------------------------------------------
    async def __aenter__(self) -> Client:
        await self.connect()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self.legacy is not None:
            with contextlib.suppress(Exception):
                await self.legacy.aclose()
        await self.channel.aclose()

    async def connect(self) -> None:
        """Pick the era (probing when `auto`); idempotent."""
        if self.era == "modern" or (self.era == "legacy" and self.legacy is not None):
            return
        if self._connect_lock is None:
            self._connect_lock = asyncio.Lock()
        async with self._connect_lock:
            if self.era == "modern" or (self.era == "legacy" and self.legacy is not None):
                return
            if self.requested_version != "auto":
                await self._start_legacy(self.requested_version)
                return
            cached = ERA_CACHE.get(self.channel.key)
            if cached is not None:
                era, version = cached
                if era == "modern":
                    self.era, self.version = "modern", version
                    return
                try:
                    await self._start_legacy(version)
                    return
                except (ChannelError, McpError, ClientError):
                    ERA_CACHE.pop(self.channel.key, None)  # the cached assumption failed: probe again
            era, version = await self._probe()
            ERA_CACHE[self.channel.key] = (era, version)
            if era == "legacy":
                await self._start_legacy(version)

    async def _start_legacy(self, version: str | None) -> None:
        from .legacy import LegacySession

        session = LegacySession(self.channel, self.handlers, self.client_info, version, timeout=self.timeout)
        await session.start()
        self.legacy = session
        self.era = "legacy"
        self.version = session.version
        self.server_capabilities = session.server_capabilities
        self.server_info = session.server_info
        self.instructions = session.instructions

    async def _probe(self) -> tuple[str, str]:
        """server/discover with the preferred modern version (REFERENCE.md §1.5)."""
        self.era = "probing"
        try:
            result = await self._send("server/discover", {}, timeout=self.probe_timeout, version_retry=True)
        except McpError as e:
            if e.code in _MODERN_ERRORS:
                supported = e.data.get("supported") if isinstance(e.data, dict) else None
                if e.code == UNSUPPORTED_PROTOCOL_VERSION and _pick_modern(supported) is None:
                    legacy = [v for v in LEGACY_VERSIONS if isinstance(supported, list) and v in supported]
                    if legacy:
                        self.era = None
                        return "legacy", legacy[0]
                    self.era = None
                    raise UnsupportedServer(f"no protocol version in common; the server supports {supported}") \
                        from None
                self.era = "modern"
                return "modern", self.version
            log.info("server/discover answered %s (%s): falling back to the legacy handshake", e.code, e.message)
            self.era = None
            return "legacy", LEGACY_VERSIONS[0]
        except HttpStatusError as e:
            log.info("server/discover got HTTP %s: falling back to the legacy handshake", e.status)
            self.era = None
            return "legacy", LEGACY_VERSIONS[0]
        except (TimeoutError, StreamBroken, ServerLost) as e:
            log.info("no answer to server/discover (%s): falling back to the legacy handshake", e or "timeout")
            self.era = None
            return "legacy", LEGACY_VERSIONS[0]
        except BaseException:
            self.era = None
            raise
        self._remember_discover(result)
        self.era = "modern"
        return "modern", self.version

    def _remember_discover(self, result: dict[str, Any]) -> None:
        caps = result.get("capabilities")
        self.server_capabilities = caps if isinstance(caps, dict) else {}
        meta = result.get("_meta")
        if isinstance(meta, dict) and isinstance(meta.get("io.modelcontextprotocol/serverInfo"), dict):
            self.server_info = meta["io.modelcontextprotocol/serverInfo"]
        if isinstance(result.get("instructions"), str):
            self.instructions = result["instructions"]
        supported = result.get("supportedVersions")
        if isinstance(supported, list) and self.version not in supported:
            pick = _pick_modern(supported)
            if pick is not None:
                self.version = pick
        self._store("server/discover", "", result)

    # -- one modern request -----------------------------------------------------------------------------
    def _headers(self, method: str, params: dict[str, Any]) -> dict[str, str]:
        h = {"MCP-Protocol-Version": self.version, "Mcp-Method": method}
        if method in ("tools/call", "prompts/get"):
            name = params.get("name")
            if isinstance(name, str):
                h["Mcp-Name"] = encode_header_value(name)
            if method == "tools/call" and isinstance(name, str):
                specs = self._tool_headers.get(name)
                if specs:
                    args = params.get("arguments")
                    for spec in specs:
                        v = value_at(args, spec.path)
                        if v is None:
                            continue
                        if isinstance(v, float) and v.is_integer():
                            v = int(v)
                        if isinstance(v, str | int | bool):
                            h["Mcp-Param-" + spec.name] = encode_header_value(v)
        elif method == "resources/read":
            uri = params.get("uri")
            if isinstance(uri, str):
                h["Mcp-Name"] = encode_header_value(uri)
        elif method in ("tasks/get", "tasks/update", "tasks/cancel"):
            tid = params.get("taskId")
            if isinstance(tid, str):
                h["Mcp-Name"] = encode_header_value(tid)
        return h

    async def _send(
        self,
        method: str,
        params: dict[str, Any],
        *,
        progress: Progress | None = None,
        timeout: float | None = -1.0,
        version_retry: bool = True,
        meta: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """One request (plus at most one retry on -32022 with a version from data.supported)."""
        if timeout is not None and timeout < 0:
            timeout = self.timeout
        while True:
            id_ = next(self._ids)
            m: dict[str, Any] = dict(params.get("_meta") or {})
            if meta:
                m.update(meta)
            m[PV] = self.version
            m[CC] = self.capabilities
            m[CI] = self.client_info
            if progress is not None and "progressToken" not in m:
                m["progressToken"] = f"p{id_}"
            p = dict(params)
            p["_meta"] = m
            msg = {"jsonrpc": "2.0", "id": id_, "method": method, "params": p}
            headers = self._headers(method, p) if self.is_http else None
            resp = await self._roundtrip(msg, headers, progress, timeout)
            if "error" in resp:
                err = _error(resp["error"])
                if err.code == UNSUPPORTED_PROTOCOL_VERSION and version_retry and isinstance(err.data, dict):
                    pick = _pick_modern(err.data.get("supported"))
                    if pick is not None:
                        log.info("server does not support %s; retrying with %s", self.version, pick)
                        self.version = pick
                        version_retry = False
                        continue
                raise err
            result = resp.get("result")
            if not isinstance(result, dict):
                raise InvalidResult(f"{method}: the result is not an object")
            return result

    async def _roundtrip(
        self, msg: dict[str, Any], headers: dict[str, str] | None, progress: Progress | None, timeout: float | None
    ) -> dict[str, Any]:
        id_ = msg["id"]
        if timeout is None:
            return await self._exchange(msg, headers, progress, None)
        try:
            async with asyncio.timeout(timeout):
                return await self._exchange(msg, headers, progress, timeout)
        except TimeoutError:
            raise TimeoutError(f"{msg['method']} (id {id_}) timed out after {timeout} s") from None

    async def _exchange(
        self, msg: dict[str, Any], headers: dict[str, str] | None, progress: Progress | None, timeout: float | None
    ) -> dict[str, Any]:
        id_ = msg["id"]
        ex = await self.channel.exchange(msg, headers, timeout=timeout)
        try:
            async for m in ex:
                if "method" not in m:
                    if m.get("id") == id_ and ("result" in m or "error" in m):
                        return m
                    if m.get("id") is None and "error" in m and ex.status >= 400:
                        return {**m, "id": id_}  # HTTP: one request per POST, so an id-less error rejects it
                    continue
                self._notification(m, progress)
        finally:
            await ex.aclose()
        raise StreamBroken(
            f"the response stream of {msg['method']} (id {id_}) ended before the response; "
            "the request may or may not have run"
        )

    def _notification(self, m: dict[str, Any], progress: Progress | None) -> None:
        method = m.get("method")
        params = obj(m.get("params"))
        if method == "notifications/progress" and progress is not None:
            try:
                out = progress(params)
                if asyncio.iscoroutine(out):
                    task = asyncio.ensure_future(out)
                    self._bg.add(task)
                    task.add_done_callback(self._bg.discard)
            except Exception:
                log.exception("progress callback failed")
        elif method == "notifications/message":
            log.info("server log [%s]: %s", params.get("level"), params.get("data"))
        elif "id" in m:
            log.warning("ignoring a server→client request %r: 2026-07-28 servers must not send requests", method)

    # -- requests with MRTR, retries, caching -------------------------------------------------------------
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
        await self.connect()
        params = dict(params or {})
        if safe is None:
            safe = method in SAFE_METHODS or idempotency_key is not None
        meta = {IDEMPOTENCY_KEY: idempotency_key} if idempotency_key else None
        for attempt in range(1, attempts + 1):
            try:
                if self.era == "legacy":
                    lt = self.timeout if timeout is not None and timeout < 0 else timeout
                    result = await self.legacy.request(method, params, progress=progress, timeout=lt)
                    return self._check_result(method, result)
                return await self._mrtr(method, params, progress=progress, timeout=timeout, meta=meta)
            except (StreamBroken, ServerLost) as e:
                if not safe or attempt == attempts:
                    if not safe:
                        raise type(e)(f"{e} (not re-issued: pass safe=True or an idempotency_key "
                                      "if repeating it is harmless)") from None
                    raise
                log.warning("%s; re-issuing %s with a new id (attempt %d)", e, method, attempt + 1)
                await asyncio.sleep(min(0.05 * attempt, 0.5))
        raise AssertionError("unreachable")  # pragma: no cover

    def _check_result(self, method: str, result: dict[str, Any]) -> dict[str, Any]:
        rt = result.get("resultType", "complete")
        if rt != "complete":
            raise InvalidResult(f"{method}: unexpected resultType {rt!r}")
        return result

    async def _mrtr(
        self,
        method: str,
        params: dict[str, Any],
        *,
        progress: Progress | None,
        timeout: float | None,
        meta: Mapping[str, Any] | None,
    ) -> dict[str, Any]:
        # MRTR fields of an earlier request never leak into this one (tasks/update's inputResponses are its own)
        mrtr = method in MRTR_METHODS
        base = {k: v for k, v in params.items() if not mrtr or k not in ("inputResponses", "requestState")}
        responses: dict[str, Any] | None = None
        state: str | None = None
        rounds = 0
        while True:
            p = dict(base)
            if responses is not None:
                p["inputResponses"] = responses
            if state is not None:
                p["requestState"] = state
            result = await self._send(method, p, progress=progress, timeout=timeout, meta=meta)
            rt = result.get("resultType", "complete")  # absent = a complete (legacy-style) result
            if rt == "complete":
                return result
            if rt == "task" and method == "tools/call" and self.tasks:
                if not isinstance(result.get("taskId"), str):
                    raise InvalidResult("tools/call: a task result without a taskId")
                return result  # call_tool / start_tool wrap it in a TaskHandle
            if rt != "input_required" or method not in MRTR_METHODS:
                raise InvalidResult(f"{method}: unknown or misplaced resultType {rt!r}")
            rounds += 1
            if rounds > self.max_rounds:
                raise TooManyRounds(f"{method}: the server asked for input more than {self.max_rounds} times")
            requests = result.get("inputRequests")
            st = result.get("requestState")
            if requests is None and st is None:
                raise InvalidResult(f"{method}: input_required result without inputRequests or requestState")
            if requests is not None and not isinstance(requests, dict):
                raise InvalidResult(f"{method}: inputRequests must be an object")
            if st is not None and not isinstance(st, str):
                raise InvalidResult(f"{method}: requestState must be a string")
            responses = await self._fulfil(requests) if requests else None
            state = st

    async def _fulfil(self, requests: dict[str, Any]) -> dict[str, Any]:
        keys = list(requests)
        for k in keys:
            if not isinstance(requests[k], dict) or not isinstance(requests[k].get("method"), str):
                raise InvalidResult(f"input request {k!r} is malformed")
        answers = await asyncio.gather(
            *(self.handlers.answer(requests[k]["method"], requests[k].get("params")) for k in keys)
        )
        return dict(zip(keys, answers, strict=True))

    # -- caching (REFERENCE.md §4.9) --------------------------------------------------------------------
    def _store(self, method: str, key: str, result: dict[str, Any]) -> None:
        ttl = result.get("ttlMs")
        if isinstance(ttl, int) and not isinstance(ttl, bool) and ttl > 0:
            self._cache[(method, key)] = (time.monotonic() + ttl / 1000.0, result)

    def _cached(self, method: str, key: str) -> dict[str, Any] | None:
        hit = self._cache.get((method, key))
        if hit is None:
            return None
        if time.monotonic() >= hit[0]:
            del self._cache[(method, key)]
            return None
        return hit[1]

    def invalidate(self, *methods: str, key: str | None = None) -> None:
        """Drop cached results of these methods (all of them when none are named)."""
        for k in list(self._cache):
            if (not methods or k[0] in methods) and (key is None or k[1] == key):
                del self._cache[k]

    def _on_event(self, ev: ListenEvent) -> None:
        if isinstance(ev, ToolsListChanged):
            self.invalidate("tools/list")
            self._tools_listed = False
        elif isinstance(ev, PromptsListChanged):
            self.invalidate("prompts/list")
        elif isinstance(ev, ResourcesListChanged):
            self.invalidate("resources/list", "resources/templates/list")
        elif isinstance(ev, ResourceUpdated):
            self.invalidate("resources/read", key=ev.uri)

    async def _cacheable(self, method: str, key: str, params: dict[str, Any], use_cache: bool) -> dict[str, Any]:
        if use_cache:
            hit = self._cached(method, key)
            if hit is not None:
                return hit
        result = await self.request(method, params)
        self._store(method, key, result)
        return result

    # -- the API -------------------------------------------------------------------------------------------
    async def discover(self, *, use_cache: bool = True) -> dict[str, Any]:
        """server/discover (modern) or the InitializeResult-derived equivalent (legacy)."""
        await self.connect()
        if self.era == "legacy":
            out: dict[str, Any] = self.legacy.discover_result()
            return out
        result = await self._cacheable("server/discover", "", {}, use_cache)
        self._remember_discover(result)
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
        await self.connect()
        if self.is_http and self.era == "modern" and not self._tools_listed:
            with contextlib.suppress(McpError):
                await self.list_tools()  # x-mcp-header annotations decide the Mcp-Param-* headers
        params: dict[str, Any] = {"name": name}
        if arguments is not None:
            params["arguments"] = dict(arguments)
        try:
            first = await self.request("tools/call", params, progress=progress, timeout=timeout, safe=safe,
                                       idempotency_key=idempotency_key)
        except McpError as e:
            if e.code != HEADER_MISMATCH or not self.is_http or self.era != "modern":
                raise
            await self.list_tools(use_cache=False)  # a stale x-mcp-header view: re-fetch and retry once
            first = await self.request("tools/call", params, progress=progress, timeout=timeout, safe=safe,
                                       idempotency_key=idempotency_key)
        return TaskHandle(self, first)

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

    # -- listen --------------------------------------------------------------------------------------------
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

    async def _listen(self, flt: dict[str, Any]) -> AsyncIterator[ListenEvent]:
        await self.connect()
        if self.era == "legacy":
            async for ev in self.legacy.listen(flt):
                self._on_event(ev)
                yield ev
            return
        id_ = next(self._ids)
        params = {"notifications": flt, "_meta": {PV: self.version, CC: self.capabilities, CI: self.client_info}}
        msg = {"jsonrpc": "2.0", "id": id_, "method": "subscriptions/listen", "params": params}
        headers = self._headers("subscriptions/listen", params) if self.is_http else None
        ex = await self.channel.exchange(msg, headers, timeout=self.timeout)
        acked = False
        try:
            async for m in ex:
                method = m.get("method")
                if method is None:
                    if m.get("id") != id_:
                        continue
                    if "error" in m:
                        raise _error(m["error"])
                    yield ListenEnded("subscriptions/listen", obj(m.get("result")))
                    return
                p = obj(m.get("params"))
                if method == "notifications/cancelled" and p.get("requestId") == id_:
                    yield ListenEnded(method, p)
                    return
                meta = obj(p.get("_meta"))
                if meta.get(SUB) != id_:
                    self._notification(m, None)
                    continue
                if not acked:
                    if method != "notifications/subscriptions/acknowledged":
                        raise InvalidResult(f"listen: the first message was {method}, not the acknowledgement")
                    honoured = obj(p.get("notifications"))
                    extra_keys = [k for k, v in honoured.items() if v and k not in flt]
                    if extra_keys:
                        raise InvalidResult(f"listen: the server acknowledged what was not asked for: {extra_keys}")
                    asked_uris = set(flt.get("resourceSubscriptions") or [])
                    got_uris = set(honoured.get("resourceSubscriptions") or [])
                    if not got_uris <= asked_uris:
                        raise InvalidResult("listen: the server acknowledged resource URIs that were not asked for")
                    dropped = {k: v for k, v in flt.items() if not honoured.get(k)}
                    if asked_uris - got_uris and got_uris:
                        dropped["resourceSubscriptions"] = sorted(asked_uris - got_uris)
                    acked = True
                    yield Acknowledged(method, p, dict(honoured), dropped)
                    continue
                ev = event_for(method, p)
                self._on_event(ev)
                yield ev
        finally:
            await ex.aclose()
        raise StreamBroken("the listen stream closed without the server ending the subscription")


__all__ = ["ERA_CACHE", "Client", "Subscription"]
