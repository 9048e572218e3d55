"""The ASGI callable types shared by the HTTP transport and the apps that hand it routes and middleware."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any, TypeAlias

Scope: TypeAlias = MutableMapping[str, Any]
Message: TypeAlias = MutableMapping[str, Any]
Receive: TypeAlias = Callable[[], Awaitable[Message]]
Send: TypeAlias = Callable[[Message], Awaitable[None]]
AsgiApp: TypeAlias = Callable[[Scope, Receive, Send], Awaitable[None]]
# Wraps an ASGI app in another (Starlette's and most ASGI middleware classes fit: `Cls(app)`).
Middleware: TypeAlias = Callable[[AsgiApp], AsgiApp]

__all__ = ["AsgiApp", "Message", "Middleware", "Receive", "Scope", "Send"]
