"""Turning what a handler returns into the wire shape of a result."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import orjson
import pydantic

from ..protocol import errors
from ..protocol.errors import McpError
from . import content
from .registry import Resource, ResourceTemplate, Tool
from .schema import ArgumentError

CONTENT_TYPES = frozenset({"text", "image", "audio", "resource", "resource_link"})


class ToolError(Exception):
    """Raise from a tool to return an `isError: true` result the model can act on."""


@dataclass(slots=True)
class ToolResult:
    """A tool's full answer when plain return values are not enough."""

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


def to_content(value: Any) -> list[dict[str, Any]]:
    """Unstructured content for a plain return value."""
    if value is None:
        return []
    if isinstance(value, str):
        return [content.text(value)]
    if _is_block(value):
        return [value]
    if isinstance(value, list | tuple) and all(_is_block(v) for v in value):
        return list(value)
    if isinstance(value, bool | int | float):
        return [content.text(orjson.dumps(value).decode())]
    if isinstance(value, pydantic.BaseModel):
        return [content.text(value.model_dump_json())]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return [content.text(orjson.dumps(dataclasses.asdict(value)).decode())]
    try:
        return [content.text(orjson.dumps(value).decode())]
    except TypeError:
        return [content.text(str(value))]


def error_result(message: str) -> dict[str, Any]:
    return {"content": [content.text(message)], "isError": True}


def tool_result(tool: Tool, value: Any) -> dict[str, Any]:
    if isinstance(value, ToolResult):
        if value.structured is not None and tool.output.check is not None:
            _check_output(tool, value.structured)
        return value.to_wire()
    out = tool.output
    if out.to_structured is None or _is_block(value) or value is None:
        return {"content": to_content(value)}
    structured = out.to_structured(value)
    if out.check is not None:
        _check_output(tool, structured)
    return {
        "content": [content.text(orjson.dumps(structured).decode())],
        "structuredContent": structured,
    }


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


def resource_contents(res: Resource | ResourceTemplate, uri: str, value: Any) -> list[dict[str, Any]]:
    mime = res.mime_type
    if isinstance(value, str):
        return [content.text_resource(uri, value, mime)]
    if isinstance(value, bytes | bytearray):
        return [content.blob_resource(uri, bytes(value), mime)]
    if isinstance(value, dict) and ("text" in value or "blob" in value):
        d = dict(value)
        d.setdefault("uri", uri)
        if mime and "mimeType" not in d:
            d["mimeType"] = mime
        return [d]
    if isinstance(value, Iterable):
        out: list[dict[str, Any]] = []
        for v in value:
            out.extend(resource_contents(res, uri, v))
        return out
    raise TypeError(f"resource {uri!r} returned {type(value).__name__}")
