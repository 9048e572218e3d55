"""The MCP client: `Client` (async) and `SyncClient`, over Streamable HTTP or stdio, modern or legacy era."""

from .channels import ChannelError, HttpStatusError, ServerLost
from .core import ERA_CACHE, Client, Subscription
from .events import (
    Acknowledged,
    ClientError,
    InvalidResult,
    ListenEnded,
    ListenEvent,
    OtherNotification,
    PromptsListChanged,
    ResourcesListChanged,
    ResourceUpdated,
    StreamBroken,
    ToolsListChanged,
    TooManyRounds,
    UnsupportedServer,
)
from .handlers import Handlers
from .sync import SyncClient
from .tasks import TaskCancelled, TaskHandle

__all__ = [
    "ERA_CACHE",
    "Acknowledged",
    "ChannelError",
    "Client",
    "ClientError",
    "Handlers",
    "HttpStatusError",
    "InvalidResult",
    "ListenEnded",
    "ListenEvent",
    "OtherNotification",
    "PromptsListChanged",
    "ResourceUpdated",
    "ResourcesListChanged",
    "ServerLost",
    "StreamBroken",
    "Subscription",
    "SyncClient",
    "TaskCancelled",
    "TaskHandle",
    "TooManyRounds",
    "ToolsListChanged",
    "UnsupportedServer",
]
