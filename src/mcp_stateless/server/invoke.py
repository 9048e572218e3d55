"""Calling a handler: injection of the `Context`, resolution of handle arguments, the thread hop for
plain functions, and the shape of a tool's outcome."""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable
from typing import Any

from ..protocol.errors import McpError
from . import handles
from .context import Context, InputRequired
from .registry import Tool
from .results import ToolError, error_result, tool_result
from .schema import ArgumentError

log = logging.getLogger("mcp_stateless")


async def call_handler(fn: Callable[..., Any], is_async: bool, kwargs: dict[str, Any]) -> Any:
    """Await an async handler; run a plain one in a worker thread so it cannot stall the loop."""
    if is_async:
        return await fn(**kwargs)
    return await asyncio.to_thread(functools.partial(fn, **kwargs))


def inject(injected: dict[str, type], ctx: Context, kwargs: dict[str, Any]) -> None:
    for pname, typ in injected.items():
        if issubclass(typ, Context):
            kwargs[pname] = ctx


async def bind(injected: dict[str, type], ctx: Context, kwargs: dict[str, Any]) -> None:
    """Inject the context and resolve every handle-typed argument (a `HandleError` if one is unusable)."""
    inject(injected, ctx, kwargs)
    await handles.resolve_arguments(injected, ctx, kwargs)


async def run_tool(tool: Tool, ctx: Context, arguments: dict[str, Any]) -> dict[str, Any]:
    """Run a tool and shape its outcome as a CallToolResult (without resultType).

    Raises InputRequired (MRTR / task input), McpError (protocol failure) and CancelledError; every
    other failure becomes an `isError` result the model can act on."""
    try:
        kwargs = tool.input.bind(arguments)
    except ArgumentError as e:
        return error_result(f"Invalid arguments for tool {tool.name}: {e}")
    injected = tool.input.injected
    if injected:  # perf: most tools take neither a context nor a handle
        try:
            await bind(injected, ctx, kwargs)
        except ToolError as e:
            return error_result(str(e))
    try:
        if tool.blocking or tool.is_async:
            value = await call_handler(tool.fn, tool.is_async, kwargs)
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
