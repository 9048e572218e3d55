"""mcp-stateless: a fast, stateless Model Context Protocol (2026-07-28) runtime."""

from .client import Client, ClientError, SyncClient
from .protocol.caching import CacheHint
from .protocol.errors import McpError
from .protocol.mrtr import KeyRing
from .protocol.security import OriginPolicy
from .protocol.versions import LATEST as LATEST_PROTOCOL_VERSION
from .server import content
from .server.app import App
from .server.context import Context, ElicitResult, InputRequest, elicitation, roots, sampling, url_elicitation
from .server.handles import Handle, HandleEnded, HandleError, HandleExpired, HandleUnknown
from .server.registry import PromptArgument
from .server.results import ToolError, ToolResult, assistant, user
from .state import StateBundle, StateUnavailable, open_state
from .state.events import ChangeEvent, EventBus, MemoryEventBus
from .tasks.runtime import TaskRuntime
from .transports.http import HttpTransport

__version__ = "0.1.0"

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
    "PromptArgument",
    "StateBundle",
    "StateUnavailable",
    "SyncClient",
    "TaskRuntime",
    "ToolError",
    "ToolResult",
    "__version__",
    "assistant",
    "content",
    "elicitation",
    "open_state",
    "roots",
    "sampling",
    "url_elicitation",
    "user",
]
