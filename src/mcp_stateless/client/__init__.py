"""The MCP client: `Client` (async) and `SyncClient`, over Streamable HTTP, stdio or in memory, modern or legacy era.

OAuth for protected servers is `mcp_stateless.client.oauth.OAuth`, passed as `Client(url, auth=...)`."""

from .auth import Auth, BearerToken, HttpRequest
from .channels import Channel
from .core import Client, Subscription
from .era import EraCache
from .errors import (
    AuthenticationError,
    ChannelError,
    ClientError,
    HttpStatusError,
    InvalidResult,
    OAuthError,
    RequestTimeout,
    ServerError,
    ServerLost,
    StreamBroken,
    TaskCancelled,
    TooManyRounds,
    UnsupportedServer,
)
from .events import (
    Acknowledged,
    ListenEnded,
    ListenEvent,
    OtherNotification,
    PromptsListChanged,
    ResourcesListChanged,
    ResourceUpdated,
    ToolsListChanged,
)
from .handlers import Handlers
from .memory import MemoryChannel
from .session import Session
from .sync import SyncClient
from .tasks import TaskHandle

__all__ = [
    "Acknowledged",
    "Auth",
    "AuthenticationError",
    "BearerToken",
    "Channel",
    "ChannelError",
    "Client",
    "ClientError",
    "EraCache",
    "Handlers",
    "HttpRequest",
    "HttpStatusError",
    "InvalidResult",
    "ListenEnded",
    "ListenEvent",
    "MemoryChannel",
    "OAuthError",
    "OtherNotification",
    "PromptsListChanged",
    "RequestTimeout",
    "ResourceUpdated",
    "ResourcesListChanged",
    "ServerError",
    "ServerLost",
    "Session",
    "StreamBroken",
    "Subscription",
    "SyncClient",
    "TaskCancelled",
    "TaskHandle",
    "TooManyRounds",
    "ToolsListChanged",
    "UnsupportedServer",
]
