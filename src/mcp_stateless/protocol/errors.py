"""JSON-RPC / MCP error codes, the one exception type that carries them, and the HTTP status table."""

from __future__ import annotations

from typing import Any

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
HEADER_MISMATCH = -32020
MISSING_CLIENT_CAPABILITY = -32021
UNSUPPORTED_PROTOCOL_VERSION = -32022

# The rows the 2026-07-28 Streamable HTTP transport mandates, plus the conventional mapping for the rest.
_HTTP_STATUS: dict[int, int] = {
    PARSE_ERROR: 400,
    INVALID_REQUEST: 400,
    INVALID_PARAMS: 400,
    HEADER_MISMATCH: 400,
    MISSING_CLIENT_CAPABILITY: 400,
    UNSUPPORTED_PROTOCOL_VERSION: 400,
    METHOD_NOT_FOUND: 404,
}


def http_status_for(code: int) -> int:
    """HTTP status of a response carrying a JSON-RPC error with this code."""
    return _HTTP_STATUS.get(code, 200)


class McpError(Exception):
    """A protocol-level failure: becomes a JSON-RPC error response (never an `isError` result)."""

    __slots__ = ("code", "data", "message")

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data

    def to_error(self) -> dict[str, Any]:
        err: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            err["data"] = self.data
        return err

    def __repr__(self) -> str:
        return f"McpError({self.code}, {self.message!r})"


def invalid_params(message: str, data: Any = None) -> McpError:
    return McpError(INVALID_PARAMS, message, data)


def method_not_found(method: str) -> McpError:
    return McpError(METHOD_NOT_FOUND, f"Method not found: {method}")


def header_mismatch(message: str) -> McpError:
    return McpError(HEADER_MISMATCH, message)


def missing_capability(required: dict[str, Any], message: str | None = None) -> McpError:
    names = ", ".join(sorted(required))
    return McpError(
        MISSING_CLIENT_CAPABILITY,
        message or f"This request needs the client capability: {names}",
        {"requiredCapabilities": required},
    )


def error_response(id_: Any, err: McpError) -> dict[str, Any]:
    """A JSON-RPC error; without a readable request id the `id` member is omitted (the 2026-07-28 schema
    allows only a string or an integer there, never null)."""
    msg: dict[str, Any] = {"jsonrpc": "2.0"}
    if id_ is not None:
        msg["id"] = id_
    msg["error"] = err.to_error()
    return msg


class InsufficientScope(McpError):
    """The caller is authenticated but lacks `scopes` for what it asked (a tool, prompt or resource).

    Off HTTP it is an ordinary -32600 error; the HTTP transport answers it with 403 and
    ``WWW-Authenticate: Bearer error="insufficient_scope", scope="…"`` so the client can step up."""

    __slots__ = ("scopes",)

    def __init__(self, what: str, scopes: frozenset[str]) -> None:
        needed = sorted(scopes)
        super().__init__(INVALID_REQUEST, f"Insufficient scope: {what} needs {' '.join(needed)}",
                         {"requiredScopes": needed})
        self.scopes = scopes
