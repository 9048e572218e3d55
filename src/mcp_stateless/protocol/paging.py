"""Opaque pagination cursors. A cursor names the list and an offset, so one list's cursor is refused by another."""

from __future__ import annotations

import base64
import binascii

from .errors import McpError, invalid_params


def encode_cursor(kind: str, offset: int) -> str:
    return base64.urlsafe_b64encode(f"{kind}:{offset}".encode()).decode("ascii").rstrip("=")


def decode_cursor(kind: str, cursor: object) -> int:
    """Offset encoded in `cursor`, or -32602 when it is not one of ours for this list."""
    if not isinstance(cursor, str) or not cursor:
        raise invalid_params("Invalid cursor")
    try:
        text = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode("ascii")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise invalid_params("Invalid cursor") from None
    k, sep, off = text.partition(":")
    if k != kind or not sep or not off.isdigit():
        raise invalid_params("Invalid cursor")
    return int(off)


def page(kind: str, items: list[object], cursor: object, size: int) -> tuple[list[object], str | None]:
    """Slice one page; returns the items and the next cursor (None at the end)."""
    start = 0 if cursor is None else decode_cursor(kind, cursor)
    if start > len(items):
        raise McpError(-32602, "Invalid cursor")
    end = start + size
    return items[start:end], (encode_cursor(kind, end) if end < len(items) else None)
