"""Typed events of a listen stream, and the client's error types."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


class ClientError(Exception):
    """Something the client itself detected (a broken stream, a bad result, too many MRTR rounds)."""


class StreamBroken(ClientError):
    """The response stream ended before the response arrived: the request may or may not have run."""


class InvalidResult(ClientError):
    """The server answered with something the protocol does not allow (e.g. an unknown resultType)."""


class TooManyRounds(ClientError):
    """The server kept answering input_required beyond the client's round limit."""


class UnsupportedServer(ClientError):
    """No protocol version (modern or legacy) in common with the server."""


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


def event_for(method: str, params: dict[str, Any]) -> ListenEvent:
    if method == "notifications/resources/updated":
        return ResourceUpdated(method, params, str(params.get("uri", "")))
    cls = _TYPES.get(method, OtherNotification)
    return cls(method, params)


__all__ = [
    "Acknowledged",
    "ClientError",
    "InvalidResult",
    "ListenEnded",
    "ListenEvent",
    "OtherNotification",
    "PromptsListChanged",
    "ResourceUpdated",
    "ResourcesListChanged",
    "StreamBroken",
    "TooManyRounds",
    "ToolsListChanged",
    "UnsupportedServer",
    "event_for",
    "obj",
]
