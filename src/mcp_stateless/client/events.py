"""Typed events of a listen stream."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .errors import ClientError as ClientError  # re-exported: client/cli.py imports it from here


@dataclass(frozen=True, slots=True)
class ServerEvent:
    """What a server sent on a listen stream: the base class of every event `Client.listen()` yields
    (the server-side counterpart is `mcp_stateless.endpoint.ListenEvent`)."""

    method: str
    params: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Acknowledged(ServerEvent):
    """The server's acknowledgement: `honoured` is what it will send, `dropped` what it will not."""

    honoured: dict[str, Any] = field(default_factory=dict)
    dropped: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ToolsListChanged(ServerEvent):
    pass


@dataclass(frozen=True, slots=True)
class PromptsListChanged(ServerEvent):
    pass


@dataclass(frozen=True, slots=True)
class ResourcesListChanged(ServerEvent):
    pass


@dataclass(frozen=True, slots=True)
class ResourceUpdated(ServerEvent):
    uri: str = ""


@dataclass(frozen=True, slots=True)
class OtherNotification(ServerEvent):
    """A notification type this client has no class for (e.g. an extension's)."""


@dataclass(frozen=True, slots=True)
class ListenEnded(ServerEvent):
    """The server ended the subscription gracefully (listen result or notifications/cancelled)."""


def obj(v: Any) -> dict[str, Any]:
    """`v` when it is a JSON object, else an empty dict."""
    return v if isinstance(v, dict) else {}


_TYPES: dict[str, type[ServerEvent]] = {
    "notifications/tools/list_changed": ToolsListChanged,
    "notifications/prompts/list_changed": PromptsListChanged,
    "notifications/resources/list_changed": ResourcesListChanged,
}

# The filter key of `subscriptions/listen` that asks for each list-changed notification.
LIST_CHANGED_KEYS: dict[str, str] = {
    "notifications/tools/list_changed": "toolsListChanged",
    "notifications/prompts/list_changed": "promptsListChanged",
    "notifications/resources/list_changed": "resourcesListChanged",
}


def event_for(method: str, params: dict[str, Any]) -> ServerEvent:
    if method == "notifications/resources/updated":
        return ResourceUpdated(method, params, str(params.get("uri", "")))
    cls = _TYPES.get(method, OtherNotification)
    return cls(method, params)


__all__ = [
    "LIST_CHANGED_KEYS",
    "Acknowledged",
    "ListenEnded",
    "OtherNotification",
    "PromptsListChanged",
    "ResourceUpdated",
    "ResourcesListChanged",
    "ServerEvent",
    "ToolsListChanged",
    "event_for",
    "obj",
]
