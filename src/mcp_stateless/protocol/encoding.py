"""Encoding one outgoing JSON-RPC message, the same way on every transport."""

from __future__ import annotations

import logging
from typing import Any

import orjson

from .errors import INTERNAL_ERROR, McpError, error_response

log = logging.getLogger("mcp_stateless")

UNENCODABLE = "Internal error: the result is not JSON-serialisable"


def encode_message(message: Any) -> bytes:
    """The message as compact JSON. One that cannot be encoded (a handler returned something that is
    not JSON) becomes an internal-error response to the same request, so a transport always has a
    valid message to write."""
    try:
        return orjson.dumps(message)
    except TypeError:
        log.exception("a message could not be encoded as JSON")
        mid = message.get("id") if isinstance(message, dict) else None
        return orjson.dumps(error_response(mid, McpError(INTERNAL_ERROR, UNENCODABLE)))
