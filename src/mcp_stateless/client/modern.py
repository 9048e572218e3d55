"""`ModernSession`: the 2026-07-28 client side. No handshake and no session state on the server: each
request carries its version, capabilities and client info in `_meta` (and, over HTTP, mirrors them in
headers), MRTR rounds are answered from the handlers, and `subscriptions/listen` is one long request."""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

from ..protocol import jsonrpc
from ..protocol.errors import UNSUPPORTED_PROTOCOL_VERSION
from ..protocol.headers import ParamHeader, mirror_headers
from ..protocol.meta import META_PROGRESS_TOKEN, META_SERVER_INFO, META_SUBSCRIPTION_ID, request_meta
from ..protocol.mrtr import MRTR_METHODS
from ..protocol.versions import MODERN_VERSIONS
from .channels import Channel, Message
from .errors import (
    GATEWAY_LOST,
    HttpStatusError,
    InvalidResult,
    RequestTimeout,
    ServerError,
    StreamBroken,
    TooManyRounds,
)
from .events import Acknowledged, ListenEnded, ServerEvent, event_for, obj
from .handlers import Handlers
from .session import Era, Progress
from .tracecontext import inject_trace_context

log = logging.getLogger("mcp_stateless.client")

# Params an MRTR retry adds: a caller's own are dropped, so an earlier request's answers never leak in.
_RETRY_PARAMS = ("inputResponses", "requestState")

ParamHeaders = Callable[[str], tuple[ParamHeader, ...]]


def pick_modern(supported: Any) -> str | None:
    """The newest modern version in a server's `supported` list."""
    if not isinstance(supported, list):
        return None
    for v in MODERN_VERSIONS:
        if v in supported:
            return v
    return None


class ModernSession:
    era: Era = "modern"

    def __init__(
        self,
        channel: Channel,
        handlers: Handlers,
        *,
        version: str,
        capabilities: dict[str, Any],
        client_info: dict[str, Any],
        timeout: float | None = 60.0,
        max_rounds: int = 10,
        tasks: bool = False,
        param_headers: ParamHeaders = lambda _name: (),
    ) -> None:
        self.channel = channel
        self.handlers = handlers
        self.version = version
        self.capabilities = capabilities
        self.client_info = client_info
        self.timeout = timeout
        self.max_rounds = max_rounds
        self.tasks = tasks
        self.param_headers = param_headers
        self.server_capabilities: dict[str, Any] | None = None
        self.server_info: dict[str, Any] | None = None
        self.instructions: str | None = None
        self._ids = itertools.count(1)
        self._bg: set[asyncio.Future[Any]] = set()

    @property
    def mirrors_tool_headers(self) -> bool:
        return self.channel.mirrors_headers

    def _meta(self, base: Mapping[str, Any] | None = None) -> dict[str, Any]:
        meta = request_meta(self.version, self.capabilities, self.client_info, base=base)
        inject_trace_context(meta)
        return meta

    def _headers(self, method: str, params: dict[str, Any]) -> dict[str, str] | None:
        if not self.channel.mirrors_headers:
            return None
        name = params.get("name")
        specs = self.param_headers(name) if method == "tools/call" and isinstance(name, str) else ()
        return mirror_headers(method, params, specs)

    # -- one request ------------------------------------------------------------------------------------
    async def send(
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
            base = dict(params.get("_meta") or {})
            if meta:
                base.update(meta)
            if progress is not None:
                base.setdefault(META_PROGRESS_TOKEN, f"p{id_}")
            p = {**params, "_meta": self._meta(base)}
            resp = await self._roundtrip(jsonrpc.request(id_, method, p), self._headers(method, p), progress, timeout)
            if "error" in resp:
                err = ServerError.from_wire(resp["error"])
                if err.code == UNSUPPORTED_PROTOCOL_VERSION and version_retry and isinstance(err.data, dict):
                    pick = pick_modern(err.data.get("supported"))
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
        self, msg: Message, headers: dict[str, str] | None, progress: Progress | None, timeout: float | None
    ) -> Message:
        if timeout is None:
            return await self._exchange(msg, headers, progress, None)
        try:
            async with asyncio.timeout(timeout):
                return await self._exchange(msg, headers, progress, timeout)
        except TimeoutError:
            raise RequestTimeout(f"{msg['method']} (id {msg['id']}) timed out after {timeout} s") from None

    async def _exchange(
        self, msg: Message, headers: dict[str, str] | None, progress: Progress | None, timeout: float | None
    ) -> Message:
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
        except HttpStatusError as e:
            if e.status in GATEWAY_LOST:
                raise HttpStatusError(e.status, e.body, e.headers, lost=msg["method"]) from None
            raise
        finally:
            await ex.aclose()
        raise StreamBroken(
            f"the response stream of {msg['method']} (id {id_}) ended before the response; "
            "the request may or may not have run"
        )

    def _notification(self, m: Message, progress: Progress | None) -> None:
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

    # -- MRTR ---------------------------------------------------------------------------------------------
    async def request(
        self,
        method: str,
        params: dict[str, Any],
        *,
        progress: Progress | None,
        timeout: float | None,
        meta: Mapping[str, Any] | None,
    ) -> dict[str, Any]:
        # tasks/update's inputResponses are its own: only the MRTR methods' retry params are the client's
        mrtr = method in MRTR_METHODS
        base = {k: v for k, v in params.items() if not mrtr or k not in _RETRY_PARAMS}
        responses: dict[str, Any] | None = None
        state: str | None = None
        rounds = 0
        while True:
            p = dict(base)
            if responses is not None:
                p["inputResponses"] = responses
            if state is not None:
                p["requestState"] = state
            result = await self.send(method, p, progress=progress, timeout=timeout, meta=meta)
            rt = result.get("resultType", "complete")  # absent = a complete (legacy-style) result
            if rt == "complete":
                return result
            if rt == "task" and method == "tools/call" and self.tasks:
                if not isinstance(result.get("taskId"), str):
                    raise InvalidResult("tools/call: a task result without a taskId")
                return result  # call_tool / start_tool wrap it in a TaskHandle
            if rt != "input_required" or not mrtr:
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
            responses = await self.handlers.fulfil(requests) if requests else None
            state = st

    # -- discover -----------------------------------------------------------------------------------------
    async def discover(self) -> dict[str, Any]:
        result = await self.request("server/discover", {}, progress=None, timeout=-1.0, meta=None)
        self.remember_discover(result)
        return result

    def remember_discover(self, result: dict[str, Any]) -> None:
        caps = result.get("capabilities")
        self.server_capabilities = caps if isinstance(caps, dict) else {}
        meta = result.get("_meta")
        if isinstance(meta, dict) and isinstance(meta.get(META_SERVER_INFO), dict):
            self.server_info = meta[META_SERVER_INFO]
        if isinstance(result.get("instructions"), str):
            self.instructions = result["instructions"]
        supported = result.get("supportedVersions")
        if isinstance(supported, list) and self.version not in supported:
            pick = pick_modern(supported)
            if pick is not None:
                self.version = pick

    # -- listen -------------------------------------------------------------------------------------------
    async def listen(self, flt: dict[str, Any]) -> AsyncIterator[ServerEvent]:
        id_ = next(self._ids)
        params = {"notifications": flt, "_meta": self._meta()}
        msg = jsonrpc.request(id_, "subscriptions/listen", params)
        ex = await self.channel.exchange(msg, self._headers("subscriptions/listen", params), timeout=self.timeout)
        acked = False
        try:
            async for m in ex:
                method = m.get("method")
                if method is None:
                    if m.get("id") != id_:
                        continue
                    if "error" in m:
                        raise ServerError.from_wire(m["error"])
                    yield ListenEnded("subscriptions/listen", obj(m.get("result")))
                    return
                p = obj(m.get("params"))
                if method == "notifications/cancelled" and p.get("requestId") == id_:
                    yield ListenEnded(method, p)
                    return
                if obj(p.get("_meta")).get(META_SUBSCRIPTION_ID) != id_:
                    self._notification(m, None)
                    continue
                if not acked:
                    acked = True
                    yield _acknowledged(method, p, flt)
                    continue
                yield event_for(method, p)
        finally:
            await ex.aclose()
        raise StreamBroken("the listen stream closed without the server ending the subscription")

    async def aclose(self) -> None:
        return None  # nothing lives between requests


def _acknowledged(method: str, p: dict[str, Any], flt: dict[str, Any]) -> Acknowledged:
    """Check the first message of a listen stream against the filter that was asked for."""
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
    return Acknowledged(method, p, dict(honoured), dropped)


__all__ = ["ModernSession", "pick_modern"]
