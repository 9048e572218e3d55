"""mcp-stateless: a fast, stateless Model Context Protocol (2026-07-28) runtime.

The names below load on first use (PEP 562), so `import mcp_stateless` costs nothing and a client or a
CLI command never pays for the server stack (pydantic, jsonschema) it does not touch.
"""

# Only underscored helpers at module level: every other name here is public and listed in __all__.
import importlib as _importlib
import typing as _typing

if _typing.TYPE_CHECKING:
    from .client import Client, ClientError, SyncClient, TaskHandle
    from .observability import instrument
    from .observability.metrics import PrometheusMetrics
    from .observability.tracing import Tracing
    from .protocol.caching import CacheHint
    from .protocol.endpoint import RequestMiddleware
    from .protocol.errors import McpError
    from .protocol.mrtr import KeyRing
    from .protocol.security import OriginPolicy
    from .protocol.versions import LATEST as LATEST_PROTOCOL_VERSION
    from .server import content
    from .server.app import App
    from .server.context import Context, ElicitResult, InputRequest, elicitation, roots, sampling, url_elicitation
    from .server.handles import Handle, HandleEnded, HandleError, HandleExpired, HandleUnknown
    from .server.registry import Prompt, PromptArgument, Tool
    from .server.results import ToolError, ToolResult, assistant, user
    from .state import StateBundle, StateUnavailable, open_state
    from .state.events import ChangeEvent, EventBus, MemoryEventBus
    from .tasks.runtime import TaskRuntime
    from .transports.http import HttpTransport
    from .transports.stdio import serve_stdio

# public name -> (module relative to this package, attribute in it; None: the module itself)
_LAZY: dict[str, tuple[str, str | None]] = {
    "Client": (".client", "Client"),
    "ClientError": (".client", "ClientError"),
    "SyncClient": (".client", "SyncClient"),
    "TaskHandle": (".client", "TaskHandle"),
    "CacheHint": (".protocol.caching", "CacheHint"),
    "RequestMiddleware": (".protocol.endpoint", "RequestMiddleware"),
    "PrometheusMetrics": (".observability.metrics", "PrometheusMetrics"),
    "Tracing": (".observability.tracing", "Tracing"),
    "instrument": (".observability", "instrument"),
    "McpError": (".protocol.errors", "McpError"),
    "KeyRing": (".protocol.mrtr", "KeyRing"),
    "OriginPolicy": (".protocol.security", "OriginPolicy"),
    "LATEST_PROTOCOL_VERSION": (".protocol.versions", "LATEST"),
    "content": (".server.content", None),
    "App": (".server.app", "App"),
    "Context": (".server.context", "Context"),
    "ElicitResult": (".server.context", "ElicitResult"),
    "InputRequest": (".server.context", "InputRequest"),
    "elicitation": (".server.context", "elicitation"),
    "roots": (".server.context", "roots"),
    "sampling": (".server.context", "sampling"),
    "url_elicitation": (".server.context", "url_elicitation"),
    "ChangeEvent": (".state.events", "ChangeEvent"),
    "EventBus": (".state.events", "EventBus"),
    "MemoryEventBus": (".state.events", "MemoryEventBus"),
    "Handle": (".server.handles", "Handle"),
    "HandleEnded": (".server.handles", "HandleEnded"),
    "HandleError": (".server.handles", "HandleError"),
    "HandleExpired": (".server.handles", "HandleExpired"),
    "HandleUnknown": (".server.handles", "HandleUnknown"),
    "Prompt": (".server.registry", "Prompt"),
    "PromptArgument": (".server.registry", "PromptArgument"),
    "Tool": (".server.registry", "Tool"),
    "ToolError": (".server.results", "ToolError"),
    "ToolResult": (".server.results", "ToolResult"),
    "assistant": (".server.results", "assistant"),
    "user": (".server.results", "user"),
    "StateBundle": (".state", "StateBundle"),
    "StateUnavailable": (".state", "StateUnavailable"),
    "open_state": (".state", "open_state"),
    "TaskRuntime": (".tasks.runtime", "TaskRuntime"),
    "HttpTransport": (".transports.http", "HttpTransport"),
    "serve_stdio": (".transports.stdio", "serve_stdio"),
}

def _version() -> str:
    version: str = _importlib.import_module(".protocol.versions", __name__).package_version()
    return version


def __getattr__(name: str) -> object:
    if name == "__version__":
        value: object = _version()
    else:
        try:
            module_name, attr = _LAZY[name]
        except KeyError:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
        module = _importlib.import_module(module_name, __name__)
        value = module if attr is None else getattr(module, attr)
    globals()[name] = value  # resolved once; later lookups never reach __getattr__
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


__all__ = [
    "LATEST_PROTOCOL_VERSION",
    "App",
    "CacheHint",
    "ChangeEvent",
    "Client",
    "ClientError",
    "Context",
    "ElicitResult",
    "EventBus",
    "Handle",
    "HandleEnded",
    "HandleError",
    "HandleExpired",
    "HandleUnknown",
    "HttpTransport",
    "InputRequest",
    "KeyRing",
    "McpError",
    "MemoryEventBus",
    "OriginPolicy",
    "PrometheusMetrics",
    "Prompt",
    "PromptArgument",
    "RequestMiddleware",
    "StateBundle",
    "StateUnavailable",
    "SyncClient",
    "TaskHandle",
    "TaskRuntime",
    "Tool",
    "ToolError",
    "ToolResult",
    "Tracing",
    "__version__",
    "assistant",
    "content",
    "elicitation",
    "instrument",
    "open_state",
    "roots",
    "sampling",
    "serve_stdio",
    "url_elicitation",
    "user",
]
