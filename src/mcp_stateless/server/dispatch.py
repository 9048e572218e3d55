"""Answering one validated request: the method handlers, and the envelope every result gets (result
type, cache hints, server info) or the JSON-RPC error it becomes."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Any, Protocol

from ..protocol import errors, paging
from ..protocol.caching import CACHEABLE_METHODS
from ..protocol.endpoint import Call, Reply
from ..protocol.envelope import META_SERVER_INFO, Request
from ..protocol.errors import InsufficientScope, McpError
from ..tasks.model import EXTENSION_ID as TASKS_EXTENSION
from ..tasks.runtime import REQUIRED_CAPABILITY as TASKS_REQUIRED
from ..tasks.runtime import declares_tasks
from . import invoke, taskcalls
from .context import InputRequired
from .registry import Converters
from .results import ToolError, prompt_result, resource_contents
from .schema import ArgumentError

if TYPE_CHECKING:
    from .app import App

log = logging.getLogger("mcp_stateless")

MethodHandler = Callable[[Request, Call], Awaitable[dict[str, Any]]]


class _Scoped(Protocol):
    @property
    def scopes(self) -> frozenset[str]: ...


def no_task_runtime(tool: str) -> str:
    return (f"tool {tool!r} is registered with task='required' but the app has no task runtime: give "
            "App(tasks=TaskRuntime()) or call app.enable_tasks() before serving")


def _convert(converters: Converters, kwargs: dict[str, Any]) -> None:
    """Strings from the wire to the declared parameter types (ArgumentError if one does not fit)."""
    for name, convert in converters.items():
        if name in kwargs:
            kwargs[name] = convert(kwargs[name])


class Dispatcher:
    """The method handlers of one app (its registrations and settings are read at each request)."""

    def __init__(self, app: App) -> None:
        self.app = app
        self.handlers: dict[str, MethodHandler] = {
            "server/discover": self.discover,
            "tools/list": self.tools_list,
            "tools/call": self.tools_call,
            "prompts/list": self.prompts_list,
            "prompts/get": self.prompts_get,
            "resources/list": self.resources_list,
            "resources/templates/list": self.templates_list,
            "resources/read": self.resources_read,
            "completion/complete": self.complete,
        }

    async def handle(self, req: Request, call: Call) -> Reply:
        try:
            handler = self.handlers.get(req.method)
            if handler is None:
                extra = self.app.catalog.extra_methods.get(req.method)
                if extra is None:
                    raise errors.method_not_found(req.method)
                result = await extra(req, call.principal.id)
            else:
                result = await handler(req, call)
            return Reply(self._complete(req, result))
        except McpError as e:
            return Reply.error(req.id, e)
        except InputRequired:
            log.error("%s raised InputRequired outside an MRTR-capable method", req.method)
            return Reply.error(req.id, McpError(errors.INTERNAL_ERROR, "Internal error"))
        except Exception:
            log.exception("internal error answering %s", req.method)
            return Reply.error(req.id, McpError(errors.INTERNAL_ERROR, "Internal error"))

    def _complete(self, req: Request, result: dict[str, Any]) -> dict[str, Any]:
        app = self.app
        result.setdefault("resultType", "complete")
        if result["resultType"] == "complete" and req.method in CACHEABLE_METHODS and "ttlMs" not in result:
            hint = app.cache_hint(req.method)
            result["ttlMs"] = hint.ttl_ms
            result["cacheScope"] = hint.scope
        meta = result.get("_meta")
        if meta is None:
            result["_meta"] = {META_SERVER_INFO: app.server_info}
        else:
            meta.setdefault(META_SERVER_INFO, app.server_info)
        return {"jsonrpc": "2.0", "id": req.id, "result": result}

    # -- lists ------------------------------------------------------------------------------
    async def discover(self, req: Request, call: Call) -> dict[str, Any]:
        app = self.app
        result: dict[str, Any] = {
            "supportedVersions": list(app.supported_versions),
            "capabilities": app.capabilities(),
        }
        if app.instructions:
            result["instructions"] = app.instructions
        return result

    def _page(self, kind: str, req: Request, items: list[Any]) -> dict[str, Any]:
        page, nxt = paging.page(kind, items, req.params.get("cursor"), self.app.page_size)
        out: dict[str, Any] = {kind: page}
        if nxt is not None:
            out["nextCursor"] = nxt
        return out

    def _visible(self, kind: str, req: Request, call: Call, entries: Iterable[_Scoped],
                 describe: Callable[[Any], dict[str, Any]]) -> dict[str, Any]:
        """A list page of what the caller's scopes allow. A list that depends on the caller's scopes
        is marked ``cacheScope: "private"``: a shared cache must not hand it to another principal."""
        scoped = False
        shown: list[dict[str, Any]] = []
        for entry in entries:
            if entry.scopes:
                scoped = True
                if not call.principal.has_scopes(entry.scopes):
                    continue
            shown.append(describe(entry))
        result = self._page(kind, req, shown)
        if scoped:
            result["ttlMs"] = self.app.cache_hint(req.method).ttl_ms
            result["cacheScope"] = "private"
        return result

    async def tools_list(self, req: Request, call: Call) -> dict[str, Any]:
        return self._visible("tools", req, call, self.app.catalog.tools.values(), lambda t: t.descriptor)

    async def prompts_list(self, req: Request, call: Call) -> dict[str, Any]:
        return self._visible("prompts", req, call, self.app.catalog.prompts.values(), lambda p: p.descriptor)

    async def resources_list(self, req: Request, call: Call) -> dict[str, Any]:
        return self._visible("resources", req, call, self.app.catalog.resources.values(), lambda r: r.describe())

    async def templates_list(self, req: Request, call: Call) -> dict[str, Any]:
        return self._visible("resourceTemplates", req, call, self.app.catalog.templates.values(),
                             lambda t: t.describe())

    # -- MRTR-capable methods ---------------------------------------------------------------
    async def tools_call(self, req: Request, call: Call) -> dict[str, Any]:
        app = self.app
        params = req.params
        name = params.get("name")
        if not isinstance(name, str):
            raise errors.invalid_params("tools/call needs params.name")
        tool = app.catalog.tools.get(name)
        if tool is None:
            raise McpError(errors.INVALID_PARAMS, f"Unknown tool: {name}", {"name": name})
        if tool.scopes and not call.principal.has_scopes(tool.scopes):
            raise InsufficientScope(f"tool {name}", tool.scopes)
        arguments = params.get("arguments")
        if arguments is None:
            arguments = {}
        elif not isinstance(arguments, dict):
            raise errors.invalid_params("params.arguments must be an object")
        as_task = False
        if tool.task != "forbidden" and app.tasks is None and tool.task == "required":
            # served without startup() (which refuses this): never run a task-only tool synchronously
            log.error("%s", no_task_runtime(tool.name))
            raise McpError(errors.INTERNAL_ERROR, no_task_runtime(tool.name))
        if tool.task != "forbidden" and app.tasks is not None:
            as_task = declares_tasks(req.capabilities)
            if not as_task and tool.task == "required":
                raise errors.missing_capability(TASKS_REQUIRED, f"tool {name} runs only as a task ({TASKS_EXTENSION})")
        ctx, sctx = app.rounds.open(req, call, app.handle_store)
        if as_task:
            assert app.tasks is not None
            return await taskcalls.call_as_task(app.tasks, app.rounds, tool, req, ctx, sctx, arguments)
        try:
            return await invoke.run_tool(tool, ctx, arguments)
        except InputRequired as exc:
            return app.rounds.input_required(ctx, sctx, exc)

    async def prompts_get(self, req: Request, call: Call) -> dict[str, Any]:
        app = self.app
        params = req.params
        name = params.get("name")
        prompt = app.catalog.prompts.get(name) if isinstance(name, str) else None
        if prompt is None:
            raise McpError(errors.INVALID_PARAMS, f"Unknown prompt: {name}", {"name": name})
        if prompt.scopes and not call.principal.has_scopes(prompt.scopes):
            raise InsufficientScope(f"prompt {prompt.name}", prompt.scopes)
        args = params.get("arguments") or {}
        if not isinstance(args, dict) or not all(isinstance(v, str) for v in args.values()):
            raise errors.invalid_params("prompt arguments must be an object of strings")
        missing = [a.name for a in prompt.arguments if a.required and a.name not in args]
        if missing:
            raise errors.invalid_params(f"Missing required prompt arguments: {', '.join(missing)}")
        ctx, sctx = app.rounds.open(req, call, app.handle_store)
        known = {a.name for a in prompt.arguments}
        kwargs = {k: v for k, v in args.items() if k in known}
        data = {"name": prompt.name}
        try:
            _convert(prompt.convert, kwargs)
        except ArgumentError as e:
            raise McpError(errors.INVALID_PARAMS, f"Invalid arguments for prompt {prompt.name}: {e}", data) from None
        invoke.inject(prompt.injected, ctx, kwargs)
        try:
            value = await invoke.call_handler(prompt.fn, prompt.is_async, kwargs)
        except (McpError, asyncio.CancelledError):
            raise
        except InputRequired as exc:
            return app.rounds.input_required(ctx, sctx, exc)
        except LookupError as e:
            raise McpError(errors.INVALID_PARAMS, f"Prompt {prompt.name}: not found: {e}", data) from None
        except (ToolError, ValueError) as e:
            raise McpError(errors.INVALID_PARAMS, str(e) or f"Invalid arguments for prompt {prompt.name}",
                           data) from None
        return prompt_result(value, prompt.description)

    async def resources_read(self, req: Request, call: Call) -> dict[str, Any]:
        app = self.app
        uri = req.params.get("uri")
        if not isinstance(uri, str):
            raise errors.invalid_params("resources/read needs params.uri")
        found = app.catalog.find_resource(uri)
        data = {"uri": uri}
        if found is None:
            raise McpError(errors.INVALID_PARAMS, "Resource not found", data)
        res, variables = found
        if res.scopes and not call.principal.has_scopes(res.scopes):
            raise InsufficientScope(f"resource {uri}", res.scopes)
        kwargs: dict[str, Any] = dict(variables)
        try:
            _convert(res.convert, kwargs)
        except ArgumentError as e:
            raise McpError(errors.INVALID_PARAMS, f"Invalid resource URI: {e}", data) from None
        ctx, sctx = app.rounds.open(req, call, app.handle_store)
        invoke.inject(res.injected, ctx, kwargs)
        try:
            value = await invoke.call_handler(res.fn, res.is_async, kwargs)
        except (McpError, asyncio.CancelledError):
            raise
        except InputRequired as exc:
            return app.rounds.input_required(ctx, sctx, exc)
        except (LookupError, FileNotFoundError):
            raise McpError(errors.INVALID_PARAMS, "Resource not found", data) from None
        except (ToolError, ValueError) as e:
            raise McpError(errors.INVALID_PARAMS, str(e) or "Invalid resource request", data) from None
        contents = resource_contents(res, uri, value)
        if not contents:
            raise McpError(errors.INVALID_PARAMS, "Resource not found", data)
        result: dict[str, Any] = {"contents": contents}
        if res.cache is not None:
            result["ttlMs"] = res.cache.ttl_ms
            result["cacheScope"] = res.cache.scope
        return result

    async def complete(self, req: Request, call: Call) -> dict[str, Any]:
        params = req.params
        ref = params.get("ref")
        argument = params.get("argument")
        if not isinstance(ref, dict) or not isinstance(argument, dict) or not isinstance(argument.get("name"), str):
            raise errors.invalid_params("completion/complete needs ref and argument.name")
        rtype = ref.get("type")
        target = ref.get("name") if rtype == "ref/prompt" else ref.get("uri")
        if rtype not in ("ref/prompt", "ref/resource") or not isinstance(target, str):
            raise errors.invalid_params("ref must be ref/prompt with name or ref/resource with uri")
        value = argument.get("value", "")
        if not isinstance(value, str):
            raise errors.invalid_params("completion/complete needs argument.value (a string)")
        context = params.get("context") or {}
        ctx_args = context.get("arguments") if isinstance(context, dict) else None
        if ctx_args is not None and (not isinstance(ctx_args, dict) or not all(
                isinstance(v, str) for v in ctx_args.values())):
            raise errors.invalid_params("completion/complete context.arguments must be an object of strings")
        catalog = self.app.catalog
        if rtype == "ref/prompt" and target not in catalog.prompts:
            raise McpError(errors.INVALID_PARAMS, f"Unknown prompt: {target}")
        # A completion lists values of a prompt's or resource's arguments: it needs the same scopes as using it.
        scoped: _Scoped | None
        if rtype == "ref/prompt":
            scoped = catalog.prompts[target]
        else:
            scoped = catalog.resources.get(target) or catalog.templates.get(target)
            if scoped is None:
                found = catalog.find_resource(target)
                scoped = found[0] if found is not None else None
        if scoped is not None and scoped.scopes and not call.principal.has_scopes(scoped.scopes):
            kind = "prompt" if rtype == "ref/prompt" else "resource"
            raise InsufficientScope(f"{kind} {target}", scoped.scopes)
        fn = catalog.completions.get((rtype, target))
        values: list[str] = []
        total: int | None = None
        has_more = False
        if fn is not None:
            try:
                got = fn(argument["name"], value, ctx_args or {})
                if asyncio.iscoroutine(got):
                    got = await got
            except (McpError, asyncio.CancelledError):
                raise
            except (ToolError, ValueError) as e:  # as for prompts and resources: the request was wrong
                raise McpError(errors.INVALID_PARAMS, str(e) or "Invalid completion request") from None
            values = [str(v) for v in got]
        if len(values) > 100:
            total, has_more, values = len(values), True, values[:100]
        completion: dict[str, Any] = {"values": values}
        if total is not None:
            completion["total"] = total
        if has_more:
            completion["hasMore"] = True
        return {"completion": completion}
