"""Turning what a handler returns into the wire shape of a result."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, ClassVar

import orjson
from pydantic_core import PydanticSerializationError, to_jsonable_python

from ..protocol import errors
from ..protocol.errors import McpError
from . import content
from .registry import Resource, ResourceTemplate, Tool
from .schema import ArgumentError

CONTENT_TYPES = frozenset({"text", "image", "audio", "resource", "resource_link"})
# Values that are never a JSON object: under an object schema, refused before pydantic dumps them.
_NOT_OBJECTS = (str, bytes, bytearray, int, float, list, tuple, set, frozenset)


class ToolError(Exception):
    """Raise from a tool to return an `isError: true` result the model can act on."""


@dataclass(slots=True)
class ToolResult:
    """A tool's full answer when plain return values are not enough."""

    # An annotation `-> ToolResult` derives no outputSchema (server/schema.py): the result is as given.
    __mcp_content__: ClassVar[bool] = True

    content: list[dict[str, Any]]
    structured: Any = None
    is_error: bool = False
    meta: dict[str, Any] | None = None

    def to_wire(self) -> dict[str, Any]:
        r: dict[str, Any] = {"content": self.content}
        if self.structured is not None:
            r["structuredContent"] = self.structured
        if self.is_error:
            r["isError"] = True
        if self.meta:
            r["_meta"] = self.meta
        return r


def _is_block(v: Any) -> bool:
    return isinstance(v, dict) and v.get("type") in CONTENT_TYPES


def _all_blocks(v: Any) -> bool:
    return isinstance(v, list | tuple) and all(_is_block(b) for b in v)


def json_text(value: Any) -> str:
    """`value` as compact JSON text: models, dataclasses, sets and the like as pydantic dumps them, and
    integers beyond 64 bits exactly (JSON numbers have no size limit; orjson stops at 64 bits).
    Raises TypeError/ValueError for what has no JSON form."""
    try:
        return orjson.dumps(value, default=to_jsonable_python).decode()
    except TypeError:
        # rare (a big integer): the standard library writes any integer exactly
        return json.dumps(to_jsonable_python(value), ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def to_content(value: Any) -> list[dict[str, Any]]:
    """Unstructured content for a plain return value: text, the blocks returned, else JSON text."""
    if value is None:
        return []
    if isinstance(value, str):
        return [content.text(value)]
    if _is_block(value):
        return [value]
    if _all_blocks(value):
        return list(value)
    try:
        return [content.text(json_text(value))]
    except (TypeError, ValueError, PydanticSerializationError):
        return [content.text(str(value))]


def error_result(message: str) -> dict[str, Any]:
    return {"content": [content.text(message)], "isError": True}


def tool_result(tool: Tool, value: Any) -> dict[str, Any]:
    """The CallToolResult of what a tool returned. A tool that advertises an `outputSchema` sends
    `structuredContent` conforming to it in every result but an error one (the spec's MUST; the official
    clients refuse a result without it): a value that cannot keep that promise is `-32603`."""
    out = tool.output
    if isinstance(value, ToolResult):
        if value.structured is not None and out.check is not None:
            _check_output(tool, value.structured)
        elif value.structured is None and out.schema is not None and not value.is_error:
            raise _broken(tool, "returned a ToolResult without structured content")
        return value.to_wire()
    if out.to_structured is None:
        return {"content": to_content(value)}
    if not out.wrapped and (value is None or isinstance(value, _NOT_OBJECTS)):
        raise _broken(tool, "returned None" if value is None else f"returned a {type(value).__name__}")
    structured = out.to_structured(value)
    if out.wrapped:
        structured = {"result": structured}
    if out.check is not None:
        _check_output(tool, structured)
    elif not isinstance(structured, dict):  # a derived schema is an object: a list or a scalar cannot be it
        raise _broken(tool, f"returned a {type(value).__name__}")
    # Content blocks returned under a schema (`-> dict[str, Any]` returning `content.image(...)`) stay
    # the content; the structured copy is what keeps the schema's promise.
    blocks = [value] if _is_block(value) else list(value) if value and _all_blocks(value) else None
    return {
        "content": blocks if blocks is not None else [content.text(json_text(structured))],
        "structuredContent": structured,
    }


def _broken(tool: Tool, what: str) -> McpError:
    return McpError(errors.INTERNAL_ERROR, f"tool {tool.name!r} {what}, but its outputSchema promises structured "
                                           "content (annotate the return as content.ContentBlock or Any for content)")


def _check_output(tool: Tool, structured: Any) -> None:
    assert tool.output.check is not None
    try:
        tool.output.check(structured)
    except ArgumentError as e:
        raise McpError(
            errors.INTERNAL_ERROR, f"tool {tool.name!r} returned structuredContent that violates its outputSchema: {e}"
        ) from None


def prompt_result(value: Any, description: str | None) -> dict[str, Any]:
    if isinstance(value, dict) and "messages" in value:
        r = dict(value)
    else:
        r = {"messages": [_message(m) for m in (value if isinstance(value, list | tuple) else [value])]}
    if description and "description" not in r:
        r["description"] = description
    return r


def _message(m: Any) -> dict[str, Any]:
    if isinstance(m, dict) and "role" in m:
        return m
    if isinstance(m, str):
        return {"role": "user", "content": content.text(m)}
    if _is_block(m):
        return {"role": "user", "content": m}
    raise TypeError(f"cannot turn {type(m).__name__} into a prompt message")


def user(c: str | dict[str, Any]) -> dict[str, Any]:
    return {"role": "user", "content": content.text(c) if isinstance(c, str) else c}


def assistant(c: str | dict[str, Any]) -> dict[str, Any]:
    return {"role": "assistant", "content": content.text(c) if isinstance(c, str) else c}


_CONTENTS_KEYS = frozenset({"uri", "mimeType", "text", "blob", "_meta", "annotations"})


def _is_contents_entry(v: Any) -> bool:
    """A dict that is already a ResourceContents entry (text or blob and nothing foreign), not data."""
    return isinstance(v, dict) and (isinstance(v.get("text"), str) != isinstance(v.get("blob"), str)) \
        and v.keys() <= _CONTENTS_KEYS


def resource_contents(res: Resource | ResourceTemplate, uri: str, value: Any) -> list[dict[str, Any]]:
    """The `contents` of a read: text for a string, a blob for bytes, an entry as given, a list of
    those as several entries, and anything else (dicts, lists of data, models, numbers) as one JSON
    text entry, `application/json` unless the resource declares its own type. None: no contents."""
    mime = res.mime_type
    if isinstance(value, str):
        return [content.text_resource(uri, value, mime)]
    if isinstance(value, bytes | bytearray):
        return [content.blob_resource(uri, bytes(value), mime)]
    if _is_contents_entry(value):
        d = dict(value)
        d.setdefault("uri", uri)
        if mime and "mimeType" not in d:
            d["mimeType"] = mime
        return [d]
    if value is None:
        return []
    if isinstance(value, list | tuple) and value and all(
            isinstance(v, str | bytes | bytearray) or _is_contents_entry(v) for v in value):
        return [c for v in value for c in resource_contents(res, uri, v)]
    return [content.text_resource(uri, json_text(value), mime or "application/json")]
