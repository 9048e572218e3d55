"""Client-side channels: move JSON-RPC messages to a server and hand back the messages of one exchange.

A channel knows nothing about eras or MRTR. `exchange()` sends one request and returns an `Exchange`, an async
iterator over the messages that belong to it (notifications, then the response); closing an unfinished exchange
cancels the request (HTTP: the connection closes; stdio: `notifications/cancelled`). Messages that belong to no
exchange (legacy server→client requests on stdio, unrouted notifications) go to `on_unsolicited`.
"""

from .base import Channel, Exchange, Message, Restarted, Unsolicited
from .http import HttpChannel, HttpExchange
from .stdio import StdioChannel, StdioExchange

__all__ = [
    "Channel",
    "Exchange",
    "HttpChannel",
    "HttpExchange",
    "Message",
    "Restarted",
    "StdioChannel",
    "StdioExchange",
    "Unsolicited",
]
