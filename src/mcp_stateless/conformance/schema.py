"""Validation against the official MCP 2026-07-28 JSON schema (package data: `schemas/2026-07-28.json`).

`violations(message, definition)` lists what is wrong with a message as one of the schema's `$defs`;
`validate_server_message(message, method)` picks the definition a server-emitted message must match (an
error, the result of the method that was called, or a notification) and raises `SchemaViolation`.
`jsonschema` is imported on first use, so importing this module stays cheap.
"""

from __future__ import annotations

import functools
import json
from importlib.resources import files
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import jsonschema

SCHEMA_VERSION = "2026-07-28"
_SCHEMA_URN = f"urn:mcp-{SCHEMA_VERSION}"
_MAX_REPORTED = 5

# method -> the schema definition of its successful response
RESPONSE_DEFS: dict[str, str] = {
    "server/discover": "DiscoverResultResponse",
    "tools/list": "ListToolsResultResponse",
    "tools/call": "CallToolResultResponse",
    "prompts/list": "ListPromptsResultResponse",
    "prompts/get": "GetPromptResultResponse",
    "resources/list": "ListResourcesResultResponse",
    "resources/templates/list": "ListResourceTemplatesResultResponse",
    "resources/read": "ReadResourceResultResponse",
    "completion/complete": "CompleteResultResponse",
    "subscriptions/listen": "SubscriptionsListenResultResponse",
}
# notification method -> its schema definition
NOTIFICATION_DEFS: dict[str, str] = {
    "notifications/progress": "ProgressNotification",
    "notifications/message": "LoggingMessageNotification",
    "notifications/tools/list_changed": "ToolListChangedNotification",
    "notifications/prompts/list_changed": "PromptListChangedNotification",
    "notifications/resources/list_changed": "ResourceListChangedNotification",
    "notifications/resources/updated": "ResourceUpdatedNotification",
    "notifications/subscriptions/acknowledged": "SubscriptionsAcknowledgedNotification",
    "notifications/cancelled": "CancelledNotification",
}


class SchemaViolation(ValueError):
    """A message that does not match its schema definition. `problems`: one line per error found."""

    def __init__(self, message: Any, definition: str, problems: list[str]) -> None:
        self.message = message
        self.definition = definition
        self.problems = problems
        super().__init__(f"message is not a valid {definition}: {'; '.join(problems)}\n{message!r}")


@functools.cache
def schema_document() -> dict[str, Any]:
    """The official schema, parsed once."""
    text = files(__package__).joinpath("schemas", f"{SCHEMA_VERSION}.json").read_text(encoding="utf-8")
    doc: dict[str, Any] = json.loads(text)
    return doc


@functools.cache
def _validator(definition: str) -> jsonschema.Draft202012Validator:
    import jsonschema
    from referencing import Registry, Resource

    doc = schema_document()
    if definition not in doc["$defs"]:
        raise KeyError(f"schema has no definition {definition}")
    registry: Registry[Any] = Registry().with_resource(_SCHEMA_URN, Resource.from_contents(doc))
    return jsonschema.Draft202012Validator({"$ref": f"{_SCHEMA_URN}#/$defs/{definition}"}, registry=registry)


def violations(message: Any, definition: str) -> list[str]:
    """What is wrong with `message` as a `definition` (at most five problems, by location); [] if valid."""
    errors = sorted(_validator(definition).iter_errors(message), key=lambda e: list(e.absolute_path))
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message[:200]}" for e in errors[:_MAX_REPORTED]]


def validate_as(message: Any, definition: str) -> None:
    problems = violations(message, definition)
    if problems:
        raise SchemaViolation(message, definition, problems)


def server_message_violations(message: Any, method: str | None = None) -> list[tuple[str, list[str]]]:
    """(definition, problems) for every check a server-emitted message fails; [] if it is valid.

    An error must be a `JSONRPCErrorResponse` without a result; a result must match the response of
    `method` (when known) and `JSONRPCResultResponse`; anything else must be a known notification, since a
    2026-07-28 server sends no requests.
    """
    if not isinstance(message, dict):
        return [("JSONRPCMessage", [f"expected a JSON object, got {type(message).__name__}"])]
    checks: list[str]
    if "error" in message:
        if "result" in message:
            return [("JSONRPCErrorResponse", ["an error response must not carry a result"])]
        checks = ["JSONRPCErrorResponse"]
    elif "result" in message:
        checks = [RESPONSE_DEFS.get(method or "", "JSONRPCResultResponse"), "JSONRPCResultResponse"]
    elif "id" in message:
        return [("JSONRPCNotification", ["the server must not send requests"])]
    else:
        name = NOTIFICATION_DEFS.get(str(message.get("method")))
        if name is None:
            return [("JSONRPCNotification", [f"unknown notification method {message.get('method')!r}"])]
        checks = [name]
    found: list[tuple[str, list[str]]] = []
    for definition in dict.fromkeys(checks):
        problems = violations(message, definition)
        if problems:
            found.append((definition, problems))
    return found


def validate_server_message(message: Any, method: str | None = None) -> None:
    """Raise `SchemaViolation` for the first check a server-emitted message fails."""
    for definition, problems in server_message_violations(message, method):
        raise SchemaViolation(message, definition, problems)


__all__ = [
    "NOTIFICATION_DEFS",
    "RESPONSE_DEFS",
    "SCHEMA_VERSION",
    "SchemaViolation",
    "schema_document",
    "server_message_violations",
    "validate_as",
    "validate_server_message",
    "violations",
]
