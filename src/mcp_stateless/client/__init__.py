"""The MCP client: `Client` (async) and `SyncClient`, over Streamable HTTP, stdio or in memory, modern or legacy era.

OAuth for protected servers is `mcp_stateless.client.oauth.OAuth`, passed as `Client(url, auth=...)`."""

from .auth import Auth, BearerToken, HttpRequest
from .channels import Channel, HttpChannel, StdioChannel
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
    OtherNotification,
    PromptsListChanged,
    ResourcesListChanged,
    ResourceUpdated,
    ServerEvent,
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
    "HttpChannel",
    "HttpRequest",
    "HttpStatusError",
    "InvalidResult",
    "ListenEnded",
    "MemoryChannel",
    "OAuthError",
    "OtherNotification",
    "PromptsListChanged",
    "RequestTimeout",
    "ResourceUpdated",
    "ResourcesListChanged",
    "ServerError",
    "ServerEvent",
    "ServerLost",
    "Session",
    "StdioChannel",
    "StreamBroken",
    "Subscription",
    "SyncClient",
    "TaskCancelled",
    "TaskHandle",
    "TooManyRounds",
    "ToolsListChanged",
    "UnsupportedServer",
]
