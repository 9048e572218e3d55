"""Content blocks for tool results and prompt messages, as plain JSON-ready dicts."""

from __future__ import annotations

import base64
from typing import Annotated, Any


class _Content:
    """Marks an annotation as content: a tool annotated `-> ContentBlock` (or a list of them) returns
    content blocks and advertises no `outputSchema`; as a plain `dict[str, Any]` it would promise
    structured output, which every result must then carry."""

    __mcp_content__ = True

    def __repr__(self) -> str:
        return "content"


ContentBlock = Annotated[dict[str, Any], _Content()]


def _b64(data: bytes | str) -> str:
    return data if isinstance(data, str) else base64.b64encode(data).decode("ascii")


def _annotated(block: ContentBlock, annotations: dict[str, Any] | None, meta: dict[str, Any] | None) -> ContentBlock:
    if annotations:
        block["annotations"] = annotations
    if meta:
        block["_meta"] = meta
    return block


def text(value: str, *, annotations: dict[str, Any] | None = None, meta: dict[str, Any] | None = None) -> ContentBlock:
    return _annotated({"type": "text", "text": value}, annotations, meta)


def image(data: bytes | str, mime_type: str, *, annotations: dict[str, Any] | None = None) -> ContentBlock:
    """`data` is raw bytes or an already base64-encoded string."""
    return _annotated({"type": "image", "data": _b64(data), "mimeType": mime_type}, annotations, None)


def audio(data: bytes | str, mime_type: str, *, annotations: dict[str, Any] | None = None) -> ContentBlock:
    return _annotated({"type": "audio", "data": _b64(data), "mimeType": mime_type}, annotations, None)


def text_resource(uri: str, value: str, mime_type: str | None = "text/plain") -> dict[str, Any]:
    r: dict[str, Any] = {"uri": uri, "text": value}
    if mime_type:
        r["mimeType"] = mime_type
    return r


def blob_resource(uri: str, data: bytes | str, mime_type: str | None = None) -> dict[str, Any]:
    r: dict[str, Any] = {"uri": uri, "blob": _b64(data)}
    if mime_type:
        r["mimeType"] = mime_type
    return r


def embedded_resource(
    uri: str,
    *,
    text: str | None = None,
    blob: bytes | str | None = None,
    mime_type: str | None = None,
    annotations: dict[str, Any] | None = None,
) -> ContentBlock:
    if (text is None) == (blob is None):
        raise ValueError("an embedded resource has exactly one of text or blob")
    res = text_resource(uri, text, mime_type) if text is not None else blob_resource(uri, blob or "", mime_type)
    return _annotated({"type": "resource", "resource": res}, annotations, None)


def resource_link(
    uri: str,
    name: str,
    *,
    title: str | None = None,
    description: str | None = None,
    mime_type: str | None = None,
    size: int | None = None,
    annotations: dict[str, Any] | None = None,
) -> ContentBlock:
    block: ContentBlock = {"type": "resource_link", "uri": uri, "name": name}
    for k, v in (("title", title), ("description", description), ("mimeType", mime_type), ("size", size)):
        if v is not None:
            block[k] = v
    return _annotated(block, annotations, None)
