"""`App`: what users write against (registration, change notifications, tasks, state) and the
`Endpoint` transports serve.

The work is done by one module each: `catalog` (what is registered and the capabilities that follow),
`dispatch` (the method handlers), `rounds` (MRTR), `invoke` (calling handlers), `listen` (listen
streams) and `taskcalls` (tools run as tasks). Nothing on `App` is keyed by connection or by earlier
requests: all that a request may continue is sealed in its `requestState` or held in a store behind a
handle.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from ..protocol.asgi import AsgiApp, Middleware
from ..protocol.caching import CacheHint
from ..protocol.card import CardIdentity, card_name, describe
from ..protocol.endpoint import Call, Handler, ListenItem, Lister, Reply, RequestMiddleware
from ..protocol.envelope import MethodTable, Request
from ..protocol.errors import McpError
from ..protocol.mrtr import KeyRing
from ..protocol.principal import (
    AnonymousAuthenticator,
    Authenticator,
    PrincipalResolver,
    ResolverAuthenticator,
)
from ..protocol.versions import MODERN_VERSIONS
from ..state import HandleStore, StateBundle
from ..state.events import ChangeEvent, EventBus
from ..tasks.model import EXTENSION_ID as TASKS_EXTENSION
from ..tasks.runtime import TaskRuntime
from .catalog import Catalog, ListKind
from .context import Context
from .dispatch import Dispatcher, no_task_runtime
from .handles import Handle
from .lifespan import Lifespan, LifespanRunner
from .listen import DEFAULT_MAX_SUBSCRIPTIONS, Listeners
from .registry import DetachMode, Prompt, PromptArgument, TaskSupport, Tool, build_resource
from .rounds import Rounds
from .taskcalls import AppToolHost

__all__ = ["App", "PrincipalResolver"]

if TYPE_CHECKING:
    from ..transports.http import HttpTransport

F = TypeVar("F", bound=Callable[..., Any])
A = TypeVar("A", bound=AsgiApp)

_NO_CALL = Call()


class App:
    """An MCP server application.

    ``ttl`` / ``cache`` set the cache hints of cacheable results: one `CacheHint` for every list, or a
    mapping from method (``"tools/list"``, ``"server/discover"``, …) to its hint. ``principal`` (a
    ``(headers) -> id`` function) or ``authenticator`` says who is calling; transports apply it unless
    they are given their own. ``listen_max_subscriptions`` caps the ``resourceSubscriptions`` (and the
    ``taskIds``) of one listen stream; a larger filter is refused with -32602. ``request_middleware``
    wraps every request and listen stream on every transport, first given outermost (see
    `add_request_middleware`; `add_middleware` is for ASGI middleware around HTTP).

    ``lifespan``: an async context manager factory called with the app (e.g. an ``@asynccontextmanager``
    function) for what the process opens once and shares between requests; what it yields is
    ``ctx.lifespan`` in every handler. It is entered once per process, when the first transport or
    in-memory client starts the app, and exited when the last one closes it.
    """

    def __init__(
        self,
        name: str,
        version: str = "0.1.0",
        *,
        title: str | None = None,
        instructions: str | None = None,
        cache: CacheHint | Mapping[str, CacheHint] | None = None,
        page_size: int = 100,
        key_ring: KeyRing | None = None,
        event_bus: EventBus | None = None,
        principal: PrincipalResolver | None = None,
        authenticator: Authenticator | None = None,
        mrtr_ttl_s: float = 600.0,
        listen_keepalive_s: float = 15.0,
        listen_max_subscriptions: int = DEFAULT_MAX_SUBSCRIPTIONS,
        supported_versions: tuple[str, ...] = MODERN_VERSIONS,
        tasks: TaskRuntime | None = None,
        state: StateBundle | None = None,
        lifespan: Lifespan | None = None,
        request_middleware: Sequence[RequestMiddleware] = (),
    ) -> None:
        self.name = name
        self.version = version
        self.instructions = instructions
        self.server_info: dict[str, Any] = {"name": name, "version": version}
        if title:
            self.server_info["title"] = title
        self.page_size = page_size
        self._cache_default = CacheHint(60_000, "public")
        self._cache: dict[str, CacheHint] = {"server/discover": CacheHint(3_600_000, "public"),
                                             "resources/read": CacheHint(0, "public")}
        if isinstance(cache, CacheHint):
            self._cache_default = cache
            self._cache = {"server/discover": cache, "resources/read": cache}
        elif cache is not None:
            self._cache.update(cache)
        if principal is not None and authenticator is not None:
            raise ValueError("give principal= (a resolver) or authenticator=, not both")
        # Transports use this unless they are given their own: the app's author knows its identity model.
        self.authenticator: Authenticator = (
            authenticator if authenticator is not None
            else ResolverAuthenticator(principal) if principal is not None
            else AnonymousAuthenticator()
        )
        self.supported_versions = supported_versions
        self.catalog = Catalog(self._changed)
        self.lifespan = LifespanRunner(lifespan)
        self.rounds = Rounds(key_ring, mrtr_ttl_s, self.lifespan)
        self.listeners = Listeners(self.catalog, listen_keepalive_s, event_bus, listen_max_subscriptions)
        self._own_event_bus = event_bus is not None
        self._events_base = self.listeners.events
        self._event_taps: dict[str, Callable[[EventBus], EventBus]] = {}
        self._dispatch = Dispatcher(self)
        self.request_middleware: list[RequestMiddleware] = []
        self._handle: Handler = self._dispatch.handle
        self._listen: Lister = self.listeners.stream
        for m in request_middleware:
            self.add_request_middleware(m)
        self._background: set[asyncio.Task[None]] = set()
        self.table = MethodTable(self.catalog.methods, self.catalog.tool_headers)
        self.state: StateBundle | None = None
        self._handle_store: HandleStore | None = None
        self.tasks: TaskRuntime | None = None
        # What HTTP serving adds around the MCP endpoint (`serve`, `asgi()`): exact-path routes and middleware.
        self.http_routes: dict[str, AsgiApp] = {}
        self.http_middleware: list[Middleware] = []
        if state is not None:
            self.use_state(state)
        if tasks is not None:
            self.enable_tasks(tasks)

    # ------------------------------------------------------------------ settings kept by a part
    @property
    def key_ring(self) -> KeyRing | None:
        return self.rounds.key_ring

    @key_ring.setter
    def key_ring(self, ring: KeyRing | None) -> None:
        self.rounds.key_ring = ring

    @property
    def mrtr_ttl_s(self) -> float:
        return self.rounds.ttl_s

    @mrtr_ttl_s.setter
    def mrtr_ttl_s(self, seconds: float) -> None:
        self.rounds.ttl_s = seconds

    @property
    def listen_keepalive_s(self) -> float:
        return self.listeners.keepalive_s

    @listen_keepalive_s.setter
    def listen_keepalive_s(self, seconds: float) -> None:
        self.listeners.keepalive_s = seconds

    def ensure_key_ring(self) -> KeyRing:
        """The MRTR key ring; a per-process one is generated (with a warning) when none is configured."""
        return self.rounds.keys()

    @property
    def events(self) -> EventBus:
        return self.listeners.events

    def cache_hint(self, method: str) -> CacheHint:
        return self._cache.get(method, self._cache_default)

    # ------------------------------------------------------------------ tasks and state
    def enable_tasks(self, runtime: TaskRuntime) -> None:
        """Serve the Tasks extension (`io.modelcontextprotocol/tasks`) with tasks kept in `runtime.store`."""
        runtime.attach(AppToolHost(self.catalog, lambda: self.handle_store, lambda: self.events, self.lifespan))
        self.tasks = self.listeners.tasks = runtime
        self.catalog.add_extension(TASKS_EXTENSION, runtime.methods())
        if self.state is not None:
            runtime.adopt_state(self.state)

    def use_state(self, bundle: StateBundle) -> None:
        """Keep handles (and change events, unless an `event_bus` was given) in `bundle`'s stores."""
        self.state = bundle
        self._handle_store = bundle.handles
        if not self._own_event_bus:
            self._events_base = bundle.events
            self._apply_event_taps()
        if self.tasks is not None:
            self.tasks.adopt_state(bundle)

    def tap_events(self, name: str, wrap: Callable[[EventBus], EventBus]) -> None:
        """Publish every change event through `wrap(bus)` (kept when `use_state` changes the bus; a second
        tap of the same `name` replaces the first): how an extension sees each event once, on the instance
        that published it (the 2025 branch logs them for its GET streams' resumption)."""
        self._event_taps[name] = wrap
        self._apply_event_taps()

    def _apply_event_taps(self) -> None:
        events = self._events_base
        for wrap in self._event_taps.values():
            events = wrap(events)
        self.listeners.events = events

    @property
    def handle_store(self) -> HandleStore:
        """Where handles live: the state bundle's store, or (no state configured) this process's memory."""
        if self._handle_store is None:
            from ..state.memory import MemoryHandleStore

            self._handle_store = MemoryHandleStore()
        return self._handle_store

    # ------------------------------------------------------------------ registration
    def tool(
        self,
        name: str | None = None,
        *,
        description: str | None = None,
        title: str | None = None,
        input_schema: Mapping[str, Any] | None = None,
        output_schema: Mapping[str, Any] | None = None,
        annotations: Mapping[str, Any] | None = None,
        icons: list[dict[str, Any]] | None = None,
        meta: Mapping[str, Any] | None = None,
        task: TaskSupport = "forbidden",
        detach: DetachMode = "start",
        retry_safe: bool = False,
        blocking: bool = True,
        scopes: Sequence[str] = (),
    ) -> Callable[[F], F]:
        """Register a tool. The input schema comes from the signature unless `input_schema` is given.

        A plain `def` tool runs in a worker thread so that it cannot stall the event loop; one that only
        computes briefly (no I/O, no sleeping) may say `blocking=False` to be called on the loop instead,
        which saves the thread hop (the bulk of such a call's cost).

        `task="optional"` lets a client that declared the Tasks extension get a durable task (others get
        the result synchronously); `task="required"` refuses clients without it (-32021). `retry_safe=True`
        lets another instance re-run the task if the one running it dies (otherwise it is marked failed).
        `scopes`: OAuth scopes the caller's token must carry to list and call it (see docs/auth.md).
        """

        def deco(fn: F) -> F:
            self.add_tool(
                Tool.build(
                    fn,
                    name=name,
                    description=description,
                    title=title,
                    input_schema=input_schema,
                    output_schema=output_schema,
                    annotations=annotations,
                    icons=icons,
                    meta=meta,
                    task=task,
                    detach=detach,
                    retry_safe=retry_safe,
                    blocking=blocking,
                    scopes=scopes,
                    injectable=(Context, Handle),
                )
            )
            return fn

        return deco

    def add_tool(self, tool: Tool) -> None:
        self.catalog.add_tool(tool)

    def remove_tool(self, name: str) -> bool:
        return self.catalog.remove_tool(name)

    def prompt(
        self,
        name: str | None = None,
        *,
        description: str | None = None,
        title: str | None = None,
        arguments: list[PromptArgument] | None = None,
        scopes: Sequence[str] = (),
    ) -> Callable[[F], F]:
        def deco(fn: F) -> F:
            self.add_prompt(Prompt.build(fn, name=name, description=description, title=title, arguments=arguments,
                                         scopes=scopes))
            return fn

        return deco

    def add_prompt(self, prompt: Prompt) -> None:
        self.catalog.add_prompt(prompt)

    def remove_prompt(self, name: str) -> bool:
        return self.catalog.remove_prompt(name)

    def resource(
        self,
        uri: str,
        *,
        name: str | None = None,
        description: str | None = None,
        title: str | None = None,
        mime_type: str | None = None,
        size: int | None = None,
        annotations: Mapping[str, Any] | None = None,
        cache: CacheHint | None = None,
        scopes: Sequence[str] = (),
    ) -> Callable[[F], F]:
        """Register a resource (a fixed URI) or, when `uri` contains `{…}`, a resource template."""

        def deco(fn: F) -> F:
            self.catalog.add_resource(build_resource(uri, fn, name=name, description=description, title=title,
                                                     mime_type=mime_type, size=size, annotations=annotations,
                                                     cache=cache, scopes=scopes))
            return fn

        return deco

    def remove_resource(self, uri_or_template: str) -> bool:
        """Remove a resource (by URI) or a resource template (by its template string)."""
        return self.catalog.remove_resource(uri_or_template)

    def completion(self, *, prompt: str | None = None, resource: str | None = None) -> Callable[[F], F]:
        """Register `fn(argument, value, context) -> list[str]` for a prompt's or a template's arguments."""
        if (prompt is None) == (resource is None):
            raise ValueError("give exactly one of prompt= or resource=")
        key = ("ref/prompt", prompt) if prompt is not None else ("ref/resource", resource or "")

        def deco(fn: F) -> F:
            self.catalog.completions[key] = fn
            return fn

        return deco

    def declare(self, *capabilities: str) -> None:
        """Advertise `tools` / `prompts` / `resources` even while none is registered."""
        self.catalog.declared.update(capabilities)

    @property
    def declares_tools(self) -> bool:
        return self.catalog.declares_tools

    @property
    def declares_prompts(self) -> bool:
        return self.catalog.declares_prompts

    @property
    def declares_resources(self) -> bool:
        return self.catalog.declares_resources

    def capabilities(self) -> dict[str, Any]:
        return self.catalog.capabilities()

    def card_identity(self) -> CardIdentity:
        """Who this app is, for its Server Card (SEP-2127): the transports read it at `<endpoint>/server-card`
        and `mcp-stateless contract` prints it."""
        title = self.server_info.get("title")
        return CardIdentity(card_name(self.name), self.version, describe(self.name, title, self.instructions),
                            title, tuple(sorted(self.capabilities().get("extensions", {}))))
    # ------------------------------------------------------------------ middleware
    def add_request_middleware(self, middleware: RequestMiddleware) -> None:
        """Wrap every request and listen stream, on every transport, from now on; a later middleware runs
        inside the earlier ones (the first added sees a request first and its reply last)."""
        self.request_middleware.append(middleware)
        handle: Handler = self._dispatch.handle
        listen: Lister = self.listeners.stream
        for m in reversed(self.request_middleware):
            # perf: a partial adds no coroutine of its own to each request
            handle = functools.partial(m.handle, call_next=handle)
            listen = functools.partial(m.listen, call_next=listen)
        self._handle, self._listen = handle, listen

    # ------------------------------------------------------------------ change events
    def _changed(self, kind: ListKind) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # registration at import time: nobody is listening yet
        task = loop.create_task(self.events.publish(ChangeEvent(kind)))
        self._background.add(task)  # keep a reference until it is done
        task.add_done_callback(self._background.discard)

    async def notify_tools_changed(self) -> None:
        await self.events.publish(ChangeEvent("tools"))

    async def notify_prompts_changed(self) -> None:
        await self.events.publish(ChangeEvent("prompts"))

    async def notify_resources_changed(self) -> None:
        await self.events.publish(ChangeEvent("resources"))

    async def notify_resource_updated(self, uri: str) -> None:
        await self.events.publish(ChangeEvent("resource_updated", uri))

    # ------------------------------------------------------------------ HTTP serving
    def route(self, path: str) -> Callable[[A], A]:
        """Answer `path` (exact, any method) with an ASGI app beside the MCP endpoint, wherever this app is
        served over HTTP (`mcp-stateless serve --http`, `app.asgi()`): `@app.route("/version")` on an
        `async def (scope, receive, send)`, or `app.route("/hello")(some_asgi_app)`."""
        if not path.startswith("/"):
            raise ValueError(f"a route path starts with '/': {path!r}")

        def deco(handler: A) -> A:
            self.http_routes[path] = handler
            return handler

        return deco

    def add_middleware(self, middleware: Middleware) -> None:
        """Wrap every HTTP request (routes included) in `middleware(asgi_app) -> asgi_app`; the first
        added is outermost. Starlette's middleware classes fit with `functools.partial(Cls, **options)`."""
        self.http_middleware.append(middleware)

    def asgi(self, *, path: str | None = "/mcp", **options: Any) -> HttpTransport:
        """This app as an ASGI application, assembled as `mcp-stateless serve --http` assembles it
        (`server.compose.http_transport`): modern and 2025 clients, the Server Card, `/healthz` and
        `/readyz`, its routes and middleware, and `/metrics` with `metrics=True`. For uvicorn, or to mount
        in FastAPI/Starlette (`api.mount("/mcp", app.asgi())`: the mount point is the endpoint; see
        docs/serving.md). `options` are `http_transport`'s (legacy="reject", origin_policy, max_body, ...)."""
        from .compose import http_transport

        return http_transport(self, path=path, **options)

    async def readiness(self) -> list[str]:
        """Why this process should not get traffic yet (empty: ready): not started, the state store
        unreachable, or a shared store without an MRTR key."""
        reasons: list[str] = []
        if self.lifespan.users == 0:
            reasons.append("not started")
        if self.state is not None:
            try:
                await self.state.records.get("readiness", "probe")
            except McpError as e:
                reasons.append(f"state store unreachable: {e.message}")
            if self.state.shared and self.key_ring is None:
                reasons.append("no MRTR key configured for a state store shared by several instances")
        return reasons

    # ------------------------------------------------------------------ the Endpoint
    async def startup(self) -> None:
        """Enter the lifespan (first start only) and start background work (the task lease sweeper).
        Transports and the in-memory client call it, each pairing it with one `aclose()`."""
        if self.tasks is None:
            for tool in self.catalog.tools.values():
                if tool.task == "required":
                    raise RuntimeError(no_task_runtime(tool.name))
        await self.lifespan.start(self)
        self.listeners.closing = False
        if self.tasks is not None:
            self.tasks.ensure_started()

    async def drain(self) -> None:
        """Begin shutting down: every open listen stream ends gracefully (its final result) and this
        instance's task runners hand their leases back; requests still running go on."""
        self.listeners.end_all()
        if self.tasks is not None:
            await self.tasks.aclose()

    async def aclose(self) -> None:
        """Close what `startup()` opened: once the last user closes, drain, exit the lifespan and release
        what the app's authenticator holds (an OAuth authenticator's connections to its issuers)."""
        if not self.lifespan.release():
            return
        await self.drain()
        await self.lifespan.exit()
        # Optional: the Authenticator protocol is one method; only some hold connections.
        release = getattr(self.authenticator, "aclose", None)
        if release is not None:
            await release()

    async def handle(self, req: Request, call: Call = _NO_CALL) -> Reply:
        """Answer one validated request with its complete JSON-RPC response."""
        return await self._handle(req, call)

    def listen(self, req: Request, call: Call = _NO_CALL) -> AsyncGenerator[ListenItem, None]:
        """One listen stream: the acknowledgement, events, a keep-alive after `listen_keepalive_s` idle,
        and on shutdown the final result (`ListenEnd`)."""
        return self._listen(req, call)

    def honoured_filter(self, requested: Any, capabilities: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The part of a listen filter this app honours (raises McpError for a malformed one)."""
        return self.listeners.honoured_filter(requested, capabilities)

