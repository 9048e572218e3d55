"""`App`: the registry users write against, and the dispatch of validated modern requests.

Transports hand `App.handle()` a `Request` that already passed the sans-IO envelope ladder; it returns
the complete JSON-RPC response message. Nothing on `App` is keyed by connection or by earlier requests:
all that a request may continue is sealed in its `requestState` or held in a store behind a handle.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterator, Mapping
from typing import Any, TypeVar

from ..protocol import errors, paging
from ..protocol.caching import CACHEABLE_METHODS, CacheHint
from ..protocol.endpoint import KEEPALIVE, Call, ListenEnd, ListenEvent, ListenItem, Reply
from ..protocol.envelope import META_SERVER_INFO, META_SUBSCRIPTION_ID, MethodTable, Request
from ..protocol.errors import McpError
from ..protocol.headers import ParamHeader
from ..protocol.mrtr import (
    MRTR_METHODS,
    KeyRing,
    StateContext,
    check_input_responses,
    seal,
    unseal,
)
from ..protocol.principal import (
    AnonymousAuthenticator,
    Authenticator,
    PrincipalResolver,
    ResolverAuthenticator,
)
from ..protocol.versions import MODERN_VERSIONS
from ..state import HandleStore, StateBundle
from ..state.events import ChangeEvent, EventBus, MemoryEventBus, Subscription
from ..tasks.model import EXTENSION_ID as TASKS_EXTENSION
from ..tasks.runtime import REQUIRED_CAPABILITY as TASKS_REQUIRED
from ..tasks.runtime import TaskRuntime, declares_tasks
from . import handles
from .context import Context, InputRequired
from .handles import Handle
from .registry import (
    DetachMode,
    Prompt,
    PromptArgument,
    Resource,
    ResourceTemplate,
    TaskSupport,
    Tool,
    injected_params,
)
from .results import ToolError, error_result, prompt_result, resource_contents, tool_result
from .schema import ArgumentError
from .templates import UriTemplate

log = logging.getLogger("mcp_stateless")

F = TypeVar("F", bound=Callable[..., Any])

__all__ = ["App", "PrincipalResolver"]


_NO_CALL = Call()


class _Methods:
    """The methods this app answers right now: a `Container` for the envelope ladder."""

    __slots__ = ("_app",)

    _ALWAYS = frozenset({"server/discover"})

    def __init__(self, app: App) -> None:
        self._app = app

    def __contains__(self, method: object) -> bool:
        if method in self._ALWAYS:
            return True
        app = self._app
        if method in ("tools/list", "tools/call"):
            return app.declares_tools
        if method in ("prompts/list", "prompts/get"):
            return app.declares_prompts
        if method in ("resources/list", "resources/templates/list", "resources/read"):
            return app.declares_resources
        if method == "completion/complete":
            return bool(app._completions)
        if method == "subscriptions/listen":
            return app.declares_tools or app.declares_prompts or app.declares_resources
        return method in app._extra_methods


class App:
    """An MCP server application.

    ``ttl`` / ``cache`` set the cache hints of cacheable results: one `CacheHint` for every list, or a
    mapping from method (``"tools/list"``, ``"server/discover"``, …) to its hint.
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
        supported_versions: tuple[str, ...] = MODERN_VERSIONS,
        tasks: TaskRuntime | None = None,
        state: StateBundle | None = None,
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
        self.key_ring = key_ring
        self.events: EventBus = event_bus if event_bus is not None else MemoryEventBus()
        self._own_event_bus = event_bus is not None
        self.state: StateBundle | None = None
        self._handle_store: HandleStore | None = None
        if state is not None:
            self.use_state(state)
        if principal is not None and authenticator is not None:
            raise ValueError("give principal= (a resolver) or authenticator=, not both")
        # Transports use this unless they are given their own: the app's author knows its identity model.
        self.authenticator: Authenticator = (
            authenticator if authenticator is not None
            else ResolverAuthenticator(principal) if principal is not None
            else AnonymousAuthenticator()
        )
        self.mrtr_ttl_s = mrtr_ttl_s
        self.listen_keepalive_s = listen_keepalive_s
        self.supported_versions = supported_versions

        self._tools: dict[str, Tool] = {}
        self._prompts: dict[str, Prompt] = {}
        self._resources: dict[str, Resource] = {}
        self._templates: dict[str, ResourceTemplate] = {}
        self._completions: dict[tuple[str, str], Callable[..., Any]] = {}
        self._extra_methods: dict[str, Callable[[Request, str], Awaitable[dict[str, Any]]]] = {}
        self._declare: set[str] = set()
        self._listeners: set[Subscription] = set()
        self._background: set[asyncio.Task[None]] = set()
        self._closing = False
        self.table = MethodTable(_Methods(self), self._tool_headers)
        self._handlers: dict[str, Callable[[Request, Call], Awaitable[dict[str, Any]]]] = {
            "server/discover": self._discover,
            "tools/list": self._tools_list,
            "tools/call": self._tools_call,
            "prompts/list": self._prompts_list,
            "prompts/get": self._prompts_get,
            "resources/list": self._resources_list,
            "resources/templates/list": self._templates_list,
            "resources/read": self._resources_read,
            "completion/complete": self._complete,
        }
        self.tasks: TaskRuntime | None = None
        if tasks is not None:
            self.enable_tasks(tasks)

    def enable_tasks(self, runtime: TaskRuntime) -> None:
        """Serve the Tasks extension (`io.modelcontextprotocol/tasks`) with tasks kept in `runtime.store`."""
        runtime.attach(self)
        self.tasks = runtime
        self._extra_methods.update(runtime.methods())
        if self.state is not None:
            runtime.adopt_state(self.state)

    def use_state(self, bundle: StateBundle) -> None:
        """Keep handles (and change events, unless an `event_bus` was given) in `bundle`'s stores."""
        self.state = bundle
        self._handle_store = bundle.handles
        if not self._own_event_bus:
            self.events = bundle.events
        if self.tasks is not None:
            self.tasks.adopt_state(bundle)

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
    ) -> Callable[[F], F]:
        """Register a tool. The input schema comes from the signature unless `input_schema` is given.

        A plain `def` tool runs in a worker thread so that it cannot stall the event loop; one that only
        computes briefly (no I/O, no sleeping) may say `blocking=False` to be called on the loop instead,
        which saves the thread hop (the bulk of such a call's cost).

        `task="optional"` lets a client that declared the Tasks extension get a durable task (others get
        the result synchronously); `task="required"` refuses clients without it (-32021). `retry_safe=True`
        lets another instance re-run the task if the one running it dies (otherwise it is marked failed).
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
                    injectable=(Context, Handle),
                )
            )
            return fn

        return deco

    def add_tool(self, tool: Tool) -> None:
        self._tools[tool.name] = tool
        self._changed("tools")

    def remove_tool(self, name: str) -> bool:
        found = self._tools.pop(name, None) is not None
        if found:
            self._changed("tools")
        return found

    def prompt(
        self,
        name: str | None = None,
        *,
        description: str | None = None,
        title: str | None = None,
        arguments: list[PromptArgument] | None = None,
    ) -> Callable[[F], F]:
        def deco(fn: F) -> F:
            self.add_prompt(Prompt.build(fn, name=name, description=description, title=title, arguments=arguments))
            return fn

        return deco

    def add_prompt(self, prompt: Prompt) -> None:
        self._prompts[prompt.name] = prompt
        self._changed("prompts")

    def remove_prompt(self, name: str) -> bool:
        found = self._prompts.pop(name, None) is not None
        if found:
            self._changed("prompts")
        return found

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
    ) -> Callable[[F], F]:
        """Register a resource (a fixed URI) or, when `uri` contains `{…}`, a resource template."""

        def deco(fn: F) -> F:
            inj = injected_params(fn)
            desc = description if description is not None else (fn.__doc__ or "").strip() or None
            ann = dict(annotations) if annotations else None
            is_async = asyncio.iscoroutinefunction(fn)
            if "{" in uri:
                tpl = ResourceTemplate(UriTemplate(uri), name or fn.__name__, fn, inj, desc, title, mime_type, ann,
                                       cache, is_async)
                self._templates[uri] = tpl
            else:
                self._resources[uri] = Resource(uri, name or fn.__name__, fn, inj, desc, title, mime_type, size, ann,
                                                cache, is_async)
            self._changed("resources")
            return fn

        return deco

    def completion(self, *, prompt: str | None = None, resource: str | None = None) -> Callable[[F], F]:
        """Register `fn(argument, value, context) -> list[str]` for a prompt's or a template's arguments."""
        if (prompt is None) == (resource is None):
            raise ValueError("give exactly one of prompt= or resource=")
        key = ("ref/prompt", prompt) if prompt is not None else ("ref/resource", resource or "")

        def deco(fn: F) -> F:
            self._completions[key] = fn
            return fn

        return deco

    def declare(self, *capabilities: str) -> None:
        """Advertise `tools` / `prompts` / `resources` even while none is registered."""
        self._declare.update(capabilities)

    @property
    def declares_tools(self) -> bool:
        return bool(self._tools) or "tools" in self._declare

    @property
    def declares_prompts(self) -> bool:
        return bool(self._prompts) or "prompts" in self._declare

    @property
    def declares_resources(self) -> bool:
        return bool(self._resources or self._templates) or "resources" in self._declare

    def capabilities(self) -> dict[str, Any]:
        caps: dict[str, Any] = {}
        if self.declares_tools:
            caps["tools"] = {"listChanged": True}
        if self.declares_prompts:
            caps["prompts"] = {"listChanged": True}
        if self.declares_resources:
            caps["resources"] = {"subscribe": True, "listChanged": True}
        if self._completions:
            caps["completions"] = {}
        caps["logging"] = {}
        if self.tasks is not None:
            caps["extensions"] = {TASKS_EXTENSION: {}}
        return caps

    def _tool_headers(self, name: str) -> tuple[ParamHeader, ...] | None:
        tool = self._tools.get(name)
        return tool.headers if tool is not None else None

    # ------------------------------------------------------------------ change events
    def _changed(self, kind: str) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # registration at import time: nobody is listening yet
        task = loop.create_task(self.events.publish(ChangeEvent(kind)))  # type: ignore[arg-type]
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

    # ------------------------------------------------------------------ lifecycle
    def ensure_key_ring(self) -> KeyRing:
        if self.key_ring is None:
            self.key_ring = KeyRing.generate()
            log.warning(
                "no MRTR key configured: requestState is sealed with a per-process key, so an MRTR retry "
                "must reach this same process (set MCP_STATELESS_KEYS for more than one instance)"
            )
        return self.key_ring

    async def aclose(self) -> None:
        """End every open listen stream gracefully (its final result), e.g. on shutdown."""
        self._closing = True
        for sub in tuple(self._listeners):
            sub.end()
        if self.tasks is not None:
            await self.tasks.aclose()

    async def startup(self) -> None:
        """Start background work (the task lease sweeper). Transports call it; it is also started lazily."""
        self._closing = False
        if self.tasks is not None:
            self.tasks.ensure_started()

    # ------------------------------------------------------------------ dispatch
    def _hint(self, method: str) -> CacheHint:
        return self._cache.get(method, self._cache_default)

    def _finish(self, req: Request, result: dict[str, Any]) -> dict[str, Any]:
        result.setdefault("resultType", "complete")
        if result["resultType"] == "complete" and req.method in CACHEABLE_METHODS and "ttlMs" not in result:
            hint = self._hint(req.method)
            result["ttlMs"] = hint.ttl_ms
            result["cacheScope"] = hint.scope
        meta = result.get("_meta")
        if meta is None:
            result["_meta"] = {META_SERVER_INFO: self.server_info}
        else:
            meta.setdefault(META_SERVER_INFO, self.server_info)
        return {"jsonrpc": "2.0", "id": req.id, "result": result}

    async def handle(self, req: Request, call: Call = _NO_CALL) -> Reply:
        """Answer one validated request with its complete JSON-RPC response."""
        try:
            handler = self._handlers.get(req.method)
            if handler is None:
                extra = self._extra_methods.get(req.method)
                if extra is None:
                    raise errors.method_not_found(req.method)
                result = await extra(req, call.principal.id)
            else:
                result = await handler(req, call)
            return Reply(self._finish(req, result))
        except McpError as e:
            return Reply.error(req.id, e)
        except InputRequired:
            log.error("%s raised InputRequired outside an MRTR-capable method", req.method)
            return Reply.error(req.id, McpError(errors.INTERNAL_ERROR, "Internal error"))
        except Exception:
            log.exception("internal error answering %s", req.method)
            return Reply.error(req.id, McpError(errors.INTERNAL_ERROR, "Internal error"))

    async def _discover(self, req: Request, call: Call) -> dict[str, Any]:
        result: dict[str, Any] = {
            "supportedVersions": list(self.supported_versions),
            "capabilities": self.capabilities(),
        }
        if self.instructions:
            result["instructions"] = self.instructions
        return result

    def _page(self, kind: str, req: Request, items: list[Any]) -> dict[str, Any]:
        page, nxt = paging.page(kind, items, req.params.get("cursor"), self.page_size)
        out: dict[str, Any] = {kind: page}
        if nxt is not None:
            out["nextCursor"] = nxt
        return out

    async def _tools_list(self, req: Request, call: Call) -> dict[str, Any]:
        return self._page("tools", req, [t.descriptor for t in self._tools.values()])

    async def _prompts_list(self, req: Request, call: Call) -> dict[str, Any]:
        return self._page("prompts", req, [p.descriptor for p in self._prompts.values()])

    async def _resources_list(self, req: Request, call: Call) -> dict[str, Any]:
        return self._page("resources", req, [r.describe() for r in self._resources.values()])

    async def _templates_list(self, req: Request, call: Call) -> dict[str, Any]:
        return self._page("resourceTemplates", req, [t.describe() for t in self._templates.values()])

    # -- MRTR-capable methods ---------------------------------------------------------
    def _context(self, req: Request, call: Call) -> tuple[Context, StateContext | None]:
        ctx = Context(req, call.principal, call.outbox, loop=asyncio.get_running_loop())
        if req.method not in MRTR_METHODS:
            return ctx, None
        ctx.mrtr_allowed = True
        params = req.params
        responses = check_input_responses(params.get("inputResponses"))
        sctx = StateContext.of(call.principal.id, req.method, params)  # perf: digest computed only if needed
        state = params.get("requestState")
        if state is not None:
            payload = unseal(self.ensure_key_ring(), sctx, state)
            if not isinstance(payload, dict):
                raise McpError(errors.INVALID_PARAMS, "requestState is not valid")
            ctx.answers.update(payload.get("a") or {})
            ctx.state.update(payload.get("s") or {})
        ctx.answers.update(responses)
        return ctx, sctx

    def _input_required(self, ctx: Context, sctx: StateContext, exc: InputRequired) -> dict[str, Any]:
        payload = {"a": ctx.used_answers(), "s": ctx.state}
        return {
            "resultType": "input_required",
            "inputRequests": {k: r.to_wire() for k, r in exc.requests.items()},
            "requestState": seal(self.ensure_key_ring(), sctx, payload, self.mrtr_ttl_s),
        }

    async def _invoke(self, fn: Callable[..., Any], is_async: bool, kwargs: dict[str, Any]) -> Any:
        if is_async:
            return await fn(**kwargs)
        return await asyncio.to_thread(functools.partial(fn, **kwargs))

    @staticmethod
    def _inject(injected: dict[str, type], ctx: Context, kwargs: dict[str, Any]) -> None:
        for pname, typ in injected.items():
            if issubclass(typ, Context):
                kwargs[pname] = ctx

    async def run_tool(self, tool: Tool, ctx: Context, arguments: dict[str, Any]) -> dict[str, Any]:
        """Run a tool and shape its outcome as a CallToolResult (without resultType).

        Raises InputRequired (MRTR / task input), McpError (protocol failure) and CancelledError; every
        other failure becomes an `isError` result the model can act on."""
        try:
            kwargs = tool.input.bind(arguments)
        except ArgumentError as e:
            return error_result(f"Invalid arguments for tool {tool.name}: {e}")
        self._inject(tool.input.injected, ctx, kwargs)
        handles.CURRENT_STORE.set(self.handle_store)
        try:
            await handles.resolve_arguments(tool.input.injected, ctx, kwargs)
        except ToolError as e:
            return error_result(str(e))
        try:
            if tool.blocking or tool.is_async:
                value = await self._invoke(tool.fn, tool.is_async, kwargs)
            else:  # blocking=False: a quick sync tool, called right here on the loop
                value = tool.fn(**kwargs)
        except asyncio.CancelledError:
            ctx.cancelled = True
            raise
        except (McpError, InputRequired):
            raise
        except ToolError as e:
            return error_result(str(e))
        except ArgumentError as e:
            return error_result(f"Invalid arguments for tool {tool.name}: {e}")
        except Exception as e:
            log.exception("tool %s failed", tool.name)
            return error_result(f"Tool {tool.name} failed: {type(e).__name__}: {e}")
        return tool_result(tool, value)

    async def _tools_call(self, req: Request, call: Call) -> dict[str, Any]:
        params = req.params
        name = params.get("name")
        if not isinstance(name, str):
            raise errors.invalid_params("tools/call needs params.name")
        tool = self._tools.get(name)
        if tool is None:
            raise McpError(errors.INVALID_PARAMS, f"Unknown tool: {name}", {"name": name})
        arguments = params.get("arguments")
        if arguments is None:
            arguments = {}
        elif not isinstance(arguments, dict):
            raise errors.invalid_params("params.arguments must be an object")
        as_task = False
        if tool.task != "forbidden" and self.tasks is not None:
            as_task = declares_tasks(req.capabilities)
            if not as_task and tool.task == "required":
                raise errors.missing_capability(TASKS_REQUIRED, f"tool {name} runs only as a task ({TASKS_EXTENSION})")
        ctx, sctx = self._context(req, call)
        assert sctx is not None
        if as_task:
            return await self._call_as_task(tool, req, ctx, sctx, arguments)
        try:
            return await self.run_tool(tool, ctx, arguments)
        except InputRequired as exc:
            return self._input_required(ctx, sctx, exc)

    async def _call_as_task(self, tool: Tool, req: Request, ctx: Context, sctx: StateContext,
                            arguments: dict[str, Any]) -> dict[str, Any]:
        runtime = self.tasks
        assert runtime is not None
        if tool.detach == "start":
            rec = runtime.new_record(tool, req, ctx.principal.id, arguments, ctx.answers)
            created = await runtime.create(rec)
            runtime.start(rec)
            return created
        # "manual": run inline (MRTR stays synchronous) until the handler awaits ctx.detach()
        loop = asyncio.get_running_loop()
        detached: asyncio.Future[tuple[Any, dict[str, Any]]] = loop.create_future()

        async def detach() -> None:
            rec = runtime.new_record(tool, req, ctx.principal.id, arguments, ctx.answers)
            created = await runtime.create(rec)
            ctx.task_id, ctx.outbox = rec.task_id, None
            detached.set_result((rec, created))

        ctx._detach = detach
        runner = loop.create_task(self.run_tool(tool, ctx, arguments))
        try:
            await asyncio.wait((runner, detached), return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            runner.cancel()
            raise
        if detached.done():
            rec, created = detached.result()
            runtime.start(rec, runner)
            return created
        try:
            return runner.result()
        except InputRequired as exc:
            return self._input_required(ctx, sctx, exc)

    async def _prompts_get(self, req: Request, call: Call) -> dict[str, Any]:
        params = req.params
        name = params.get("name")
        prompt = self._prompts.get(name) if isinstance(name, str) else None
        if prompt is None:
            raise McpError(errors.INVALID_PARAMS, f"Unknown prompt: {name}", {"name": name})
        args = params.get("arguments") or {}
        if not isinstance(args, dict) or not all(isinstance(v, str) for v in args.values()):
            raise errors.invalid_params("prompt arguments must be an object of strings")
        missing = [a.name for a in prompt.arguments if a.required and a.name not in args]
        if missing:
            raise errors.invalid_params(f"Missing required prompt arguments: {', '.join(missing)}")
        ctx, sctx = self._context(req, call)
        known = {a.name for a in prompt.arguments}
        kwargs = {k: v for k, v in args.items() if k in known}
        self._inject(prompt.injected, ctx, kwargs)
        try:
            value = await self._invoke(prompt.fn, prompt.is_async, kwargs)
        except InputRequired as exc:
            assert sctx is not None
            return self._input_required(ctx, sctx, exc)
        return prompt_result(value, prompt.description)

    def _find_resource(self, uri: str) -> tuple[Resource | ResourceTemplate, dict[str, str]] | None:
        res = self._resources.get(uri)
        if res is not None:
            return res, {}
        for tpl in self._templates.values():
            found = tpl.template.match(uri)
            if found is not None:
                return tpl, found
        return None

    async def _resources_read(self, req: Request, call: Call) -> dict[str, Any]:
        uri = req.params.get("uri")
        if not isinstance(uri, str):
            raise errors.invalid_params("resources/read needs params.uri")
        found = self._find_resource(uri)
        if found is None:
            raise McpError(errors.INVALID_PARAMS, "Resource not found", {"uri": uri})
        res, variables = found
        ctx, sctx = self._context(req, call)
        kwargs: dict[str, Any] = dict(variables)
        self._inject(res.injected, ctx, kwargs)
        try:
            value = await self._invoke(res.fn, res.is_async, kwargs)
        except InputRequired as exc:
            assert sctx is not None
            return self._input_required(ctx, sctx, exc)
        except LookupError:
            raise McpError(errors.INVALID_PARAMS, "Resource not found", {"uri": uri}) from None
        contents = resource_contents(res, uri, value)
        if not contents:
            raise McpError(errors.INVALID_PARAMS, "Resource not found", {"uri": uri})
        result: dict[str, Any] = {"contents": contents}
        if res.cache is not None:
            result["ttlMs"] = res.cache.ttl_ms
            result["cacheScope"] = res.cache.scope
        return result

    async def _complete(self, req: Request, call: Call) -> dict[str, Any]:
        params = req.params
        ref = params.get("ref")
        argument = params.get("argument")
        if not isinstance(ref, dict) or not isinstance(argument, dict) or not isinstance(argument.get("name"), str):
            raise errors.invalid_params("completion/complete needs ref and argument.name")
        rtype = ref.get("type")
        target = ref.get("name") if rtype == "ref/prompt" else ref.get("uri")
        if rtype not in ("ref/prompt", "ref/resource") or not isinstance(target, str):
            raise errors.invalid_params("ref must be ref/prompt with name or ref/resource with uri")
        if rtype == "ref/prompt" and target not in self._prompts:
            raise McpError(errors.INVALID_PARAMS, f"Unknown prompt: {target}")
        fn = self._completions.get((rtype, target))
        values: list[str] = []
        total: int | None = None
        has_more = False
        if fn is not None:
            context = params.get("context") or {}
            ctx_args = context.get("arguments") if isinstance(context, dict) else None
            got = fn(argument["name"], argument.get("value", ""), ctx_args or {})
            if asyncio.iscoroutine(got):
                got = await got
            values = [str(v) for v in got]
        if len(values) > 100:
            total, has_more, values = len(values), True, values[:100]
        completion: dict[str, Any] = {"values": values}
        if total is not None:
            completion["total"] = total
        if has_more:
            completion["hasMore"] = True
        return {"completion": completion}

    # ------------------------------------------------------------------ listen
    def honoured_filter(self, requested: Any, capabilities: Mapping[str, Any] | None = None) -> dict[str, Any]:
        if not isinstance(requested, dict):
            raise errors.invalid_params("subscriptions/listen needs params.notifications (an object)")
        out: dict[str, Any] = {}
        for key, ok in (
            ("toolsListChanged", self.declares_tools),
            ("promptsListChanged", self.declares_prompts),
            ("resourcesListChanged", self.declares_resources),
        ):
            v = requested.get(key)
            if v is not None and not isinstance(v, bool):
                raise errors.invalid_params(f"notifications.{key} must be a boolean")
            if v and ok:
                out[key] = True
        subs = requested.get("resourceSubscriptions")
        if subs is not None:
            if not isinstance(subs, list) or not all(isinstance(u, str) for u in subs):
                raise errors.invalid_params("notifications.resourceSubscriptions must be a list of URIs")
            if self.declares_resources and subs:
                out["resourceSubscriptions"] = list(dict.fromkeys(subs))
        task_ids = requested.get("taskIds")
        if task_ids is not None:
            if not isinstance(task_ids, list) or not all(isinstance(t, str) for t in task_ids):
                raise errors.invalid_params("notifications.taskIds must be a list of task ids")
            if not declares_tasks(dict(capabilities or {})):
                raise errors.missing_capability(
                    TASKS_REQUIRED, f"taskIds subscriptions need the {TASKS_EXTENSION} extension")
            if self.tasks is not None and task_ids:
                out["taskIds"] = list(dict.fromkeys(task_ids))
        return out

    @contextlib.contextmanager
    def _subscription(self) -> Iterator[Subscription]:
        sub = self.events.subscribe()
        self._listeners.add(sub)
        try:
            yield sub
        finally:
            self._listeners.discard(sub)
            sub.close()

    async def listen(self, req: Request, call: Call = _NO_CALL) -> AsyncGenerator[ListenItem, None]:
        """One listen stream: the acknowledgement, events, a keep-alive after `listen_keepalive_s` idle,
        and on shutdown the final result (`ListenEnd`)."""
        principal = call.principal.id
        honoured = self.honoured_filter(req.params.get("notifications"), req.capabilities)
        sid = req.id
        tag = {META_SUBSCRIPTION_ID: sid}
        with self._subscription() as sub:
            ready = getattr(sub, "ready", None)
            if ready is not None:  # a shared bus: acknowledge only once events from other instances arrive
                await ready()
            yield ListenEvent({
                "jsonrpc": "2.0",
                "method": "notifications/subscriptions/acknowledged",
                "params": {"notifications": honoured, "_meta": tag},
            })
            if self._closing:
                yield self._listen_end(sid)
                return
            uris = honoured.get("resourceSubscriptions", ())
            while True:
                ev = await sub.get(self.listen_keepalive_s)
                if ev is None:
                    yield KEEPALIVE
                    continue
                if ev.kind == "end":
                    yield self._listen_end(sid)
                    return
                if ev.kind == "task":
                    task_msg = await self._task_message(ev.uri, honoured, principal, tag)
                    if task_msg is not None:
                        yield ListenEvent(task_msg)
                    continue
                msg = _event_message(ev, honoured, uris, tag)
                if msg is not None:
                    yield ListenEvent(msg)

    async def _task_message(self, task_id: str | None, honoured: dict[str, Any], principal: str,
                            tag: dict[str, Any]) -> dict[str, Any] | None:
        if self.tasks is None or task_id not in honoured.get("taskIds", ()) or task_id is None:
            return None
        try:
            rec = await self.tasks.store.get(task_id)
        except Exception:
            log.warning("task %s: could not load for a listen notification", task_id)
            return None
        if rec is None or rec.principal != principal:
            return None
        return {"jsonrpc": "2.0", "method": "notifications/tasks", "params": {**rec.detailed(), "_meta": tag}}

    def _listen_end(self, sid: Any) -> ListenEnd:
        return ListenEnd({"jsonrpc": "2.0", "id": sid,
                          "result": {"resultType": "complete", "_meta": {META_SUBSCRIPTION_ID: sid}}})


_LIST_EVENTS = {
    "tools": ("toolsListChanged", "notifications/tools/list_changed"),
    "prompts": ("promptsListChanged", "notifications/prompts/list_changed"),
    "resources": ("resourcesListChanged", "notifications/resources/list_changed"),
}


def _event_message(
    ev: ChangeEvent, honoured: dict[str, Any], uris: Any, tag: dict[str, Any]
) -> dict[str, Any] | None:
    if ev.kind == "resource_updated":
        uri = ev.uri or ""
        if not any(uri == u or uri.startswith(u.rstrip("/") + "/") for u in uris):
            return None
        return {"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": uri, "_meta": tag}}
    entry = _LIST_EVENTS.get(ev.kind)
    if entry is None or not honoured.get(entry[0]):
        return None
    return {"jsonrpc": "2.0", "method": entry[1], "params": {"_meta": tag}}
