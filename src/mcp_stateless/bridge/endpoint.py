"""`Bridge`: a 2026-07-28 `Endpoint` in front of an unmodified 2025-era server.

Each modern request is forwarded through a pooled `LegacySession` (pool.py). `server/discover` answers
from the upstream's `initialize` result; every result gets `resultType` and the cache hints `serve`
gives. When the upstream, during a `tools/call`, `prompts/get` or `resources/read`, asks the client
something (`elicitation/create`, `sampling/createMessage`, `roots/list`), the upstream call is kept
running and the modern client gets `input_required`: its `inputRequests` carry the question, its sealed
`requestState` names the pending call and the instance holding it. The retry continues that call; when
it lands on another instance it is routed over the state bus to the holder, and the outcome comes back
the same way. A holder that is gone is a clear error: the call is never run a second time.

`subscriptions/listen` is server/listen.py's `Listeners` over the bridge's event bus; the upstream's
session notifications become its events (events.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import secrets
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

from ..client.channels import Channel
from ..client.errors import AuthenticationError, ChannelError, ClientError
from ..client.session import Progress
from ..protocol import card, errors
from ..protocol.endpoint import Call, ListenItem, Reply
from ..protocol.envelope import MethodTable, Request
from ..protocol.errors import McpError
from ..protocol.meta import META_SERVER_INFO
from ..protocol.mrtr import KeyRing, StateContext, check_input_responses, seal, unseal
from ..protocol.versions import MODERN_VERSIONS, package_version
from ..server.listen import Listeners
from ..state.base import Bus
from ..state.events import ChangeEventBus, EventBus, MemoryEventBus
from .credentials import ForwardedCredentials, credential_of
from .events import Relay, UpstreamView, Watch, Watches
from .pool import ASKABLE_CALLS, ASKING, Asker, Lease, UpstreamPool, unprompted

log = logging.getLogger("mcp_stateless.bridge")

FORWARDED = ("tools/list", "prompts/list", "resources/list", "resources/templates/list", "completion/complete")
CACHEABLE = frozenset({"server/discover", "tools/list", "prompts/list", "resources/list",
                       "resources/templates/list", "resources/read"})
BRIDGE_INFO = {"name": "mcp-stateless-bridge"}
# The upstream's server->client requests the bridge turns into MRTR input_required rounds (pool.py's handlers).
MAPPED_REQUESTS = ("elicitation/create", "roots/list", "sampling/createMessage")
TOPIC = "mcp-stateless/bridge/"  # + pending id: answers for the call that instance holds


@dataclass(eq=False)
class Pending:
    """One upstream call in flight. `events` carries its questions and its end; `waiting` is the
    question the modern client was asked and has not answered yet."""

    id: str
    lease: Lease | None = None
    events: asyncio.Queue[tuple[str, Any]] = field(default_factory=asyncio.Queue)
    waiting: dict[str, asyncio.Future[Any]] = field(default_factory=dict)
    task: asyncio.Task[None] | None = None
    listener: asyncio.Task[None] | None = None
    asked: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    expiry: asyncio.TimerHandle | None = None
    ended: bool = False

    async def ask(self, method: str, params: dict[str, Any]) -> Any:
        if self.ended:  # a question after the call's answer went out: nobody is left to ask
            raise unprompted(method)
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        await self.events.put(("ask", (method, params, fut)))
        return await fut

    def end(self) -> None:
        """Refuse what is still waiting: questions queued behind the call's end, and the unanswered one."""
        self.ended = True
        while not self.events.empty():
            kind, value = self.events.get_nowait()
            if kind == "ask" and not value[2].done():
                value[2].set_exception(unprompted(value[0]))
        for fut in self.waiting.values():
            if not fut.done():
                fut.set_exception(McpError(errors.INTERNAL_ERROR, "the client's answer never came"))


class Bridge:
    """The endpoint `mcp-stateless bridge` serves. `channel_factory` makes one upstream channel per pooled
    session (a `StdioChannel` for a command, an `HttpChannel` for a URL); `per_principal` keys sessions
    by caller too (HTTP upstreams); `credentialed` (an HTTP upstream that checks each caller's credentials)
    makes the channel of a session opened with one caller's `Authorization`, which the bridge then forwards
    and tells callers apart by (credentials.py); `bus` (the `--state` bundle's) routes MRTR answers between
    instances and `events` (the bundle's, else change events on `bus`, else in process) carries upstream
    changes to every instance's listen streams, those a caller's own session heard to that caller's only.
    `max_watches` bounds the callers whose listen streams hold a watch session at once (events.Watches)."""

    def __init__(self, channel_factory: Callable[[], Channel], *, key_ring: KeyRing | None = None,
                 bus: Bus | None = None, events: EventBus | None = None, per_principal: bool = False,
                 max_sessions: int = 16, idle_s: float = 300.0, upstream_timeout: float = 60.0,
                 pending_ttl_s: float = 300.0, holder_timeout: float = 5.0,
                 listen_keepalive_s: float = 15.0, probe_timeout: float = 10.0,
                 credentialed: Callable[[str], Channel] | None = None, max_watches: int | None = None) -> None:
        if events is None:
            events = ChangeEventBus(bus) if bus is not None else MemoryEventBus()
        self.events = events
        self.relay = Relay(events)
        # Forwarding credentials: callers are told apart by them, so sessions are per caller.
        self.credentialed = credentialed is not None
        per_principal = per_principal or self.credentialed
        self.authenticator = ForwardedCredentials() if credentialed is not None else None
        self.pool = UpstreamPool(channel_factory, BRIDGE_INFO | {"version": _version()},
                                 max_sessions=max_sessions, idle_s=idle_s, timeout=upstream_timeout,
                                 on_notification=self.relay.notify, credentialed=credentialed)
        # Per-caller watch sessions leave half the pool to calls however many callers listen.
        self.watches = Watches(
            lambda call: Watch(lambda: self._acquire({}, call), self.pool.release, timeout=upstream_timeout),
            self._principal, max_watches if max_watches is not None else max(1, max_sessions // 2))
        self.listeners = Listeners(UpstreamView(self._upstream_capabilities), listen_keepalive_s, events,
                                   watch=self.watches.hold)
        self.key_ring = key_ring or KeyRing.generate()
        self.bus = bus
        self.per_principal = per_principal
        self.pending_ttl_s = pending_ttl_s
        self.holder_timeout = holder_timeout
        self.probe_timeout = probe_timeout
        self.instance = secrets.token_hex(6)
        self.pending: dict[str, Pending] = {}
        self.upstream: dict[str, Any] | None = None  # capabilities, serverInfo, instructions, version
        self._table = MethodTable(frozenset({"server/discover", "subscriptions/listen", *FORWARDED, *ASKABLE_CALLS}))

    # -- the seam --------------------------------------------------------------------------------------
    @property
    def table(self) -> MethodTable:
        return self._table

    @property
    def supported_versions(self) -> tuple[str, ...]:
        return MODERN_VERSIONS

    async def startup(self) -> None:
        self.listeners.closing = False
        if self.upstream is None:
            # Learn who the upstream is (for discover and the Server Card) now if it answers in time; else
            # on demand: an upstream that is down now may be up by the first request.
            try:
                async with asyncio.timeout(self.probe_timeout):
                    await self.pool.release(await self._acquire({}, Call()))
            except (McpError, TimeoutError) as e:
                log.warning("the upstream did not answer at start-up (%s): it is tried again on demand",
                            e.message if isinstance(e, McpError) else "timed out")

    async def drain(self) -> None:
        self.listeners.end_all()  # listen streams end with their final result; requests go on

    async def aclose(self) -> None:
        for p in list(self.pending.values()):
            self._forget(p, cancel=True)
        await self.watches.aclose()
        await self.relay.aclose()
        await self.pool.aclose()

    async def readiness(self) -> list[str]:
        return []

    def listen(self, req: Request, call: Call) -> AsyncGenerator[ListenItem, None]:
        return self._listen(req, call)

    async def _listen(self, req: Request, call: Call) -> AsyncGenerator[ListenItem, None]:
        if self.upstream is None:  # what is honoured follows the upstream's capabilities
            await self.pool.release(await self._acquire({}, call))
        async with contextlib.aclosing(self.listeners.stream(req, call)) as items:
            async for item in items:
                yield item

    def card_identity(self) -> card.CardIdentity:
        """The Server Card's identity: the upstream's (name, version, title, instructions), with what the
        bridge fronts under `_meta["dev.mcp-stateless/bridge"]`: the upstream as its `initialize` named it,
        the eras on each side, the server->client requests mapped to MRTR and the listen events served."""
        up = self.upstream or {}
        info = up.get("serverInfo") or {}
        name = str(info.get("name") or BRIDGE_INFO["name"])
        title = info.get("title") if isinstance(info.get("title"), str) else None
        view = self.listeners.catalog
        fronts: dict[str, Any] = {
            "upstream": None if not up else {
                "name": info.get("name"), "version": info.get("version"), "title": title,
                "protocolVersion": up.get("version"), "transport": up.get("transport"),
            },
            "eras": {"front": {"era": "modern", "versions": list(self.supported_versions)},
                     "upstream": {"era": "legacy", "versions": [up["version"]] if up else []}},
            "mrtr": list(MAPPED_REQUESTS),
            "listen": {"toolsListChanged": view.declares_tools, "promptsListChanged": view.declares_prompts,
                       "resourcesListChanged": view.declares_resources,
                       "resourceSubscriptions": view.declares_subscriptions},
            "perInstanceUpstream": True,
            "bridge": {"name": BRIDGE_INFO["name"], "version": _version()},
        }
        return card.CardIdentity(card.card_name(name), str(info.get("version") or _version()),
                                 card.describe(name, title, up.get("instructions")), title, bridge=fronts)

    def _upstream_capabilities(self) -> dict[str, Any]:
        caps = self.upstream["capabilities"] if self.upstream is not None else None
        return caps if isinstance(caps, dict) else {}

    async def handle(self, req: Request, call: Call) -> Reply:
        try:
            if req.method == "server/discover":
                result = await self._discover(call)
            elif req.method in ASKABLE_CALLS and (_may_ask(req.capabilities) or "requestState" in req.params):
                result = await self._askable(req, call)
            elif req.method in ASKABLE_CALLS:
                # No capability that lets the upstream ask: its session declares no handler, so no question
                # can come, and the call needs no pending record, task or queue (the common case, and the
                # bridge's hot path).
                result = await self._forward(req, call, progress=self._progress(req, call), a_call=True)
            else:
                result = await self._forward(req, call)
        except McpError as e:
            return Reply.error(req.id, e)
        except Exception:
            log.exception("internal error bridging %s", req.method)
            return Reply.error(req.id, McpError(errors.INTERNAL_ERROR, "Internal error"))
        return Reply.result(req.id, self._complete(req, result))

    # -- answers ---------------------------------------------------------------------------------------
    def _complete(self, req: Request, result: dict[str, Any]) -> dict[str, Any]:
        result.setdefault("resultType", "complete")
        if result["resultType"] == "complete" and req.method in CACHEABLE and "ttlMs" not in result:
            # Nothing says how long an upstream answer stays true: not cached; per caller when sessions are.
            result["ttlMs"] = 0
            result["cacheScope"] = "private" if self.per_principal else "public"
        if self.upstream is not None and self.upstream.get("serverInfo"):
            meta = result.setdefault("_meta", {})
            if isinstance(meta, dict):
                meta.setdefault(META_SERVER_INFO, self.upstream["serverInfo"])
        return result

    def _principal(self, call: Call) -> str | None:
        return call.principal.id if self.per_principal else None

    async def _discover(self, call: Call) -> dict[str, Any]:
        if self.upstream is None:
            lease = await self._acquire({}, call)
            await self.pool.release(lease)
        assert self.upstream is not None
        out: dict[str, Any] = {"supportedVersions": list(MODERN_VERSIONS),
                               "capabilities": _modern_capabilities(self.upstream["capabilities"])}
        if self.upstream.get("instructions"):
            out["instructions"] = self.upstream["instructions"]
        return out

    async def _acquire(self, capabilities: dict[str, Any], call: Call, ask: Asker | None = None) -> Lease:
        try:
            lease = await self.pool.acquire(capabilities, self._principal(call), ask=ask,
                                            authorization=credential_of(call.principal) if self.credentialed else None)
        except McpError:
            raise
        except AuthenticationError as e:  # the upstream checks the credential the caller sent
            raise McpError(errors.INTERNAL_ERROR, f"the upstream server refused the caller's credentials "
                           f"(HTTP {e.status})", {"status": e.status}) from None
        except (ClientError, ChannelError, OSError, TimeoutError) as e:
            raise McpError(errors.INTERNAL_ERROR, f"the upstream server is unavailable: {e}") from None
        s = lease.session
        if self.upstream is None or s.handshakes:
            self.upstream = {"capabilities": s.server_capabilities, "serverInfo": s.server_info,
                             "instructions": s.instructions, "version": s.version, "transport": s.transport}
        return lease

    async def _forward(self, req: Request, call: Call, *, progress: Progress | None = None,
                       a_call: bool = False) -> dict[str, Any]:
        """`req` on a pooled session, answered here. `a_call`: a call cancelled mid-flight (its modern stream
        dropped) leaves the session broken, as `_run` does: the call's answer may still arrive on it."""
        lease = await self._acquire(req.capabilities, call)
        broken = False
        try:
            return await lease.session.request(req.method, _upstream_params(req.params), progress=progress)
        except McpError:
            raise
        except (ClientError, ChannelError, OSError, TimeoutError) as e:
            broken = True
            raise McpError(errors.INTERNAL_ERROR, f"the upstream server failed: {e}") from None
        except asyncio.CancelledError:
            broken = a_call
            raise
        finally:
            await self.pool.release(lease, broken=broken)

    @staticmethod
    def _progress(req: Request, call: Call) -> Progress | None:
        """The upstream call's progress relayed to the modern request's own stream, under its token."""
        if req.progress_token is None or call.outbox is None:
            return None
        outbox, token = call.outbox, req.progress_token

        def progress(params: dict[str, Any]) -> None:
            p = {k: v for k, v in params.items() if k != "progressToken"}
            outbox.emit({"jsonrpc": "2.0", "method": "notifications/progress",
                         "params": {"progressToken": token, **p}})
        return progress

    # -- MRTR over server->client requests --------------------------------------------------------------
    async def _askable(self, req: Request, call: Call) -> dict[str, Any]:
        sctx = StateContext.of(call.principal.id, req.method, req.params)
        state = req.params.get("requestState")
        if state is not None:
            payload = unseal(self.key_ring, sctx, state)
            if not isinstance(payload, dict) or not isinstance(payload.get("b"), str):
                raise errors.invalid_params("requestState is not valid")
            responses = check_input_responses(req.params.get("inputResponses"))
            held = self.pending.get(payload["b"])
            if held is not None:
                return await self._continue(held, responses, sctx, payload.get("q"))
            return await self._route(payload, responses, sctx)
        pending = Pending(secrets.token_urlsafe(12))
        pending.lease = await self._acquire(req.capabilities, call, ask=pending.ask)
        pending.task = asyncio.get_running_loop().create_task(self._run(pending, req, call))
        return await self._next(pending, sctx)

    async def _run(self, pending: Pending, req: Request, call: Call) -> None:
        progress = self._progress(req, call)
        broken = False
        lease = pending.lease
        assert lease is not None
        try:
            result = await lease.session.request(req.method, _upstream_params(req.params),
                                                         progress=progress)
            await pending.events.put(("done", result))
        except McpError as e:
            await pending.events.put(("error", e))
        except (ClientError, ChannelError, OSError, TimeoutError) as e:
            broken = True
            await pending.events.put(("error", McpError(errors.INTERNAL_ERROR, f"the upstream server failed: {e}")))
        except asyncio.CancelledError:
            broken = True  # an answer may still arrive on that session for a call nobody waits for
            raise
        finally:
            await self.pool.release(lease, broken=broken)

    async def _next(self, pending: Pending, sctx: StateContext) -> dict[str, Any]:
        """Wait for the pending call's next event: its end (the answer) or a question (input_required)."""
        kind, value = await pending.events.get()
        if kind == "done":
            self._forget(pending)
            assert isinstance(value, dict)
            return value
        if kind == "error":
            self._forget(pending)
            raise value
        method, params, fut = value
        key = f"q{next(pending.asked)}"
        pending.waiting = {key: fut}
        if pending.id not in self.pending:
            self.pending[pending.id] = pending
            await self._hold(pending)
        if pending.expiry is not None:
            pending.expiry.cancel()
        pending.expiry = asyncio.get_running_loop().call_later(self.pending_ttl_s, self._forget, pending, True)
        return {
            "resultType": "input_required",
            "inputRequests": {key: {"method": method, "params": params}},
            # The round's key too: each round's state is its own, and an earlier round's cannot answer this one.
            "requestState": seal(self.key_ring, sctx, {"b": pending.id, "i": self.instance, "q": key},
                                 self.pending_ttl_s),
        }

    async def _continue(self, pending: Pending, responses: dict[str, Any], sctx: StateContext,
                        round_key: Any = None) -> dict[str, Any]:
        if not pending.waiting or (round_key is not None and round_key not in pending.waiting):
            raise errors.invalid_params("this round was answered already")
        waiting, pending.waiting = pending.waiting, {}
        for key, fut in waiting.items():
            if key not in responses:
                pending.waiting = waiting
                raise errors.invalid_params(f"inputResponses lacks {key!r}, the answer the upstream waits for")
            if not fut.done():
                fut.set_result(responses[key])
        return await self._next(pending, sctx)

    def _forget(self, pending: Pending, cancel: bool = False) -> None:
        self.pending.pop(pending.id, None)
        pending.end()
        if pending.expiry is not None:
            pending.expiry.cancel()
        # The listener that is answering the round that ended the call must still publish its outcome:
        # it stops by itself after that.
        if pending.listener is not None and pending.listener is not asyncio.current_task():
            pending.listener.cancel()
        if cancel and pending.task is not None:
            pending.task.cancel()

    # -- the bus: a retry that landed on another instance ----------------------------------------------
    async def _hold(self, pending: Pending) -> None:
        """Take answers for `pending` from other instances (subscribed before the client is asked)."""
        if self.bus is None:
            return
        sub = self.bus.subscribe(TOPIC + pending.id)
        await sub.ready()

        async def serve() -> None:
            try:
                while True:
                    raw = await sub.get(None)
                    if raw is None:
                        continue
                    msg = orjson.loads(raw)
                    log.debug("an answer for pending call %s from another instance", pending.id)
                    ctx = StateContext(str(msg["p"]), str(msg["m"]), str(msg["d"]))
                    try:
                        out: dict[str, Any] = {"result": await self._continue(pending, msg["r"], ctx, msg.get("q"))}
                    except McpError as e:
                        out = {"error": {"code": e.code, "message": e.message}}
                    assert self.bus is not None
                    await self.bus.publish(str(msg["reply"]), orjson.dumps(out))
                    if pending.id not in self.pending:
                        return
            finally:
                sub.close()

        pending.listener = asyncio.get_running_loop().create_task(serve())

    async def _route(self, payload: dict[str, Any], responses: dict[str, Any],
                     sctx: StateContext) -> dict[str, Any]:
        gone = McpError(errors.INTERNAL_ERROR,
                        "the bridge instance holding this call is gone (or the call ended); it was not run "
                        "again: start the request again without requestState",
                        {"instance": payload.get("i")})
        if self.bus is None:
            raise gone
        reply = TOPIC + "reply/" + secrets.token_urlsafe(12)
        sub = self.bus.subscribe(reply)
        try:
            await sub.ready()
            # The holder needs the request's identity to seal the next round; the digest stands for params.
            msg = {"r": responses, "q": payload.get("q"), "reply": reply, **_ctx_of(sctx)}
            await self.bus.publish(TOPIC + payload["b"], orjson.dumps(msg))
            raw = await sub.get(self.holder_timeout)
        finally:
            sub.close()
        if raw is None:
            raise gone
        out = orjson.loads(raw)
        if "error" in out:
            raise McpError(int(out["error"]["code"]), str(out["error"]["message"]))
        result: dict[str, Any] = out["result"]
        return result


def _ctx_of(ctx: StateContext) -> dict[str, str]:
    return {"p": ctx.principal, "m": ctx.method, "d": ctx.digest}


def _may_ask(capabilities: dict[str, Any]) -> bool:
    """Whether a request declares a capability the upstream could ask under (its session is then the
    call's alone, and a question becomes an MRTR round)."""
    return any(k in capabilities for k in ASKING)


def _upstream_params(params: dict[str, Any]) -> dict[str, Any]:
    """The params a 2025 server gets: the modern `_meta` keys and MRTR fields have no meaning there."""
    # The session mints its own progress token and maps progress back to this request's.
    return {k: v for k, v in params.items() if k not in ("_meta", "inputResponses", "requestState")}


def _modern_capabilities(caps: dict[str, Any]) -> dict[str, Any]:
    """The upstream's capabilities as the bridge honours them: `listChanged` and `subscribe` as the
    upstream declares them (listen streams carry its notifications); no `logging` (a session log level:
    `logging/setLevel` is never forwarded) and none of its 2025 experimental or tasks capabilities."""
    out: dict[str, Any] = {}
    for name in ("tools", "prompts", "resources", "completions"):
        if isinstance(caps.get(name), dict):
            out[name] = {k: v for k, v in caps[name].items()
                         if k not in ("listChanged", "subscribe") or v is True}
    return out


def _version() -> str:
    return package_version()
