"""Encoding one outgoing JSON-RPC message, the same way on every transport."""

from __future__ import annotations

import json
import logging
from typing import Any

import orjson

from .errors import INTERNAL_ERROR, McpError, error_response

log = logging.getLogger("mcp_stateless")

UNENCODABLE = "Internal error: the result is not JSON-serialisable"


def encode_message(message: Any) -> bytes:
    """The message as compact JSON. orjson stops at 64-bit integers, which JSON does not: such a
    message (a tool that computed 2**64) is written exactly by the standard library instead. One that
    still cannot be encoded (a handler returned something that is not JSON) becomes an
    internal-error response to the same request, so a transport always has a valid message to write."""
    try:
        return orjson.dumps(message)
    except TypeError:
        pass  # only failures pay for the second attempt: the hot path stays one orjson call
    try:
        return json.dumps(message, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()
    except (TypeError, ValueError):
        log.exception("a message could not be encoded as JSON")
        mid = message.get("id") if isinstance(message, dict) else None
        return orjson.dumps(error_response(mid, McpError(INTERNAL_ERROR, UNENCODABLE)))
