"""The endpoint seam, for code that plugs into the runtime rather than registering tools on an `App`.

- An `Endpoint` answers validated requests: a transport (HTTP, stdio, the in-memory channel) hands it each
  `Request` with the `Call` that says who is calling and how, and sends back its `Reply`, or, for
  `subscriptions/listen`, the `ListenItem`s it yields. `App` is one endpoint, `Bridge` another.
- A `RequestMiddleware` wraps what an endpoint answers on every transport at once (`call_next` is a
  `Handler`, or a `Lister` for listen streams).
- An `Authenticator` turns a request's `Credentials` into a `Principal` (or a `Challenge`); a
  `PrincipalResolver` is the short form `App(principal=...)` takes.
- `AsgiApp`, `Scope`, `Receive`, `Send` and `Message` are the ASGI types of `App.asgi()`.
"""

from .protocol.asgi import AsgiApp, Message, Receive, Scope, Send
from .protocol.endpoint import (
    KEEPALIVE,
    Call,
    Endpoint,
    Handler,
    KeepAlive,
    ListenEnd,
    ListenEvent,
    ListenItem,
    Lister,
    Outbox,
    Reply,
    RequestMiddleware,
)
from .protocol.envelope import MethodTable, Request, RequestId
from .protocol.principal import (
    ANONYMOUS,
    Authenticator,
    Challenge,
    Credentials,
    Principal,
    PrincipalResolver,
    TransportKind,
)

__all__ = [
    "ANONYMOUS",
    "KEEPALIVE",
    "AsgiApp",
    "Authenticator",
    "Call",
    "Challenge",
    "Credentials",
    "Endpoint",
    "Handler",
    "KeepAlive",
    "ListenEnd",
    "ListenEvent",
    "ListenItem",
    "Lister",
    "Message",
    "MethodTable",
    "Outbox",
    "Principal",
    "PrincipalResolver",
    "Receive",
    "Reply",
    "Request",
    "RequestId",
    "RequestMiddleware",
    "Scope",
    "Send",
    "TransportKind",
]
