"""Typed events of a listen stream."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .errors import ClientError as ClientError  # re-exported: client/cli.py imports it from here


@dataclass(frozen=True, slots=True)
class ListenEvent:
    """Base class of everything a listen stream yields."""

    method: str
    params: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Acknowledged(ListenEvent):
    """The server's acknowledgement: `honoured` is what it will send, `dropped` what it will not."""

    honoured: dict[str, Any] = field(default_factory=dict)
    dropped: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ToolsListChanged(ListenEvent):
    pass


@dataclass(frozen=True, slots=True)
class PromptsListChanged(ListenEvent):
    pass


@dataclass(frozen=True, slots=True)
class ResourcesListChanged(ListenEvent):
    pass


@dataclass(frozen=True, slots=True)
class ResourceUpdated(ListenEvent):
    uri: str = ""


@dataclass(frozen=True, slots=True)
class OtherNotification(ListenEvent):
    """A notification type this client has no class for (e.g. an extension's)."""


@dataclass(frozen=True, slots=True)
class ListenEnded(ListenEvent):
    """The server ended the subscription gracefully (listen result or notifications/cancelled)."""


def obj(v: Any) -> dict[str, Any]:
    """`v` when it is a JSON object, else an empty dict."""
    return v if isinstance(v, dict) else {}


_TYPES: dict[str, type[ListenEvent]] = {
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


def event_for(method: str, params: dict[str, Any]) -> ListenEvent:
    if method == "notifications/resources/updated":
        return ResourceUpdated(method, params, str(params.get("uri", "")))
    cls = _TYPES.get(method, OtherNotification)
    return cls(method, params)


__all__ = [
    "LIST_CHANGED_KEYS",
    "Acknowledged",
    "ListenEnded",
    "ListenEvent",
    "OtherNotification",
    "PromptsListChanged",
    "ResourceUpdated",
    "ResourcesListChanged",
    "ToolsListChanged",
    "event_for",
    "obj",
]
