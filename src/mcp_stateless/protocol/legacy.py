"""Which era a message belongs to, and the 2025-era rules a dual-era server needs, as pure code.

A dual-era endpoint decides per message, from its body, never from a header alone: a request carrying
the 2026-07-28 `_meta` envelope is modern (an `Mcp-Session-Id` on it is ignored); `initialize`, a
request or notification of a legacy session (one that bears `Mcp-Session-Id`), a JSON-RPC *response*
(the answer to a server->client request), and GET/DELETE with a session id are legacy. Everything else
is modern and gets the modern ladder's errors.

The HTTP transport asks `era_of` only for what the modern ladder did not accept (a rejection or a
notification) and for non-POST methods, so the modern JSON path pays nothing for the legacy branch.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from . import errors, jsonrpc
from .envelope import Rejection, RequestId, reject
from .errors import McpError
from .jsonrpc import as_request_id
from .meta import META_PROTOCOL_VERSION
from .versions import is_modern

Era = Literal["modern", "legacy"]

SESSION_HEADER = "mcp-session-id"  # lower-cased, as transports hand headers over
VERSION_HEADER = "mcp-protocol-version"
# The 2025 revisions a legacy session may negotiate, newest first (2024-11-05 is HTTP+SSE only).
SERVED_VERSIONS: tuple[str, ...] = ("2025-11-25", "2025-06-18", "2025-03-26")
# What the 2024-11-05 HTTP+SSE transport may negotiate: the revision it was defined for, and the later
# ones (clients that fell back to it still speak theirs).
SSE_VERSIONS: tuple[str, ...] = (*SERVED_VERSIONS, "2024-11-05")
# The 2025 transport's code for "this session does not exist (any more)", sent with HTTP 404.
SESSION_NOT_FOUND = -32001


def _has_modern_envelope(message: dict[str, Any]) -> bool:
    params = message.get("params")
    if not isinstance(params, dict):
        return False
    meta = params.get("_meta")
    return isinstance(meta, dict) and META_PROTOCOL_VERSION in meta


def is_response(message: Any) -> bool:
    """A JSON-RPC response (result or error with an id, no method) of any decoded value: only legacy
    clients send them."""
    return isinstance(message, dict) and jsonrpc.is_response(message)


def declares_modern(headers: Mapping[str, str]) -> bool:
    """`MCP-Protocol-Version` names a modern revision: the request is modern whatever else it carries
    (a stray `Mcp-Session-Id` included)."""
    version = headers.get(VERSION_HEADER)
    return version is not None and is_modern(version)


def era_of(http_method: str, message: Any, headers: Mapping[str, str] | None) -> Era:
    """The era of one HTTP exchange (`message` is None for GET/DELETE). `headers` None: stdio."""
    session = headers is not None and SESSION_HEADER in headers
    if http_method != "POST":
        # A 2025 session's GET/DELETE; one that names a modern version is modern (POST only: 405).
        return ("legacy" if headers is not None and session and http_method in ("GET", "DELETE")
                and not declares_modern(headers) else "modern")
    if not isinstance(message, dict):
        return "modern"  # batches and junk get the modern ladder's errors
    if _has_modern_envelope(message):
        return "modern"
    if message.get("method") == "initialize" or is_response(message):
        return "legacy"
    return "legacy" if session else "modern"


def stdio_era(message: Any) -> Era:
    """The era a stdio process speaks, picked by its first message (the spec lets a server do so)."""
    if isinstance(message, dict) and not _has_modern_envelope(message) and (
            message.get("method") == "initialize" or is_response(message)):
        return "legacy"
    return "modern"


def negotiate(requested: Any, served: tuple[str, ...] = SERVED_VERSIONS) -> str:
    """The version a legacy `initialize` settles on: the client's if served, else our newest."""
    return requested if isinstance(requested, str) and requested in served else served[0]


@dataclass(slots=True)
class LegacyRequest:
    id: RequestId
    method: str
    params: dict[str, Any]


@dataclass(slots=True)
class LegacyNotification:
    method: str
    params: dict[str, Any]


@dataclass(slots=True)
class LegacyResponse:
    """A client's answer to a server->client request: `result` or `error` (exactly one is set)."""

    id: RequestId
    result: dict[str, Any] | None
    error: dict[str, Any] | None


LegacyDecision = LegacyRequest | LegacyNotification | LegacyResponse | Rejection


def classify(message: Any) -> LegacyDecision:
    """The JSON-RPC shape ladder of the 2025 revisions (no envelope: a session carries what `_meta`
    would). Errors are the same codes the modern ladder uses."""
    if not isinstance(message, dict):
        what = "Batches are not supported" if isinstance(message, list) else "A JSON-RPC message must be an object"
        return reject(None, McpError(errors.INVALID_REQUEST, what))
    raw_id = message.get("id")
    id_ = as_request_id(raw_id)
    if message.get("jsonrpc") != "2.0":
        return reject(id_, McpError(errors.INVALID_REQUEST, 'jsonrpc must be "2.0"'))
    if is_response(message):
        if id_ is None:
            return reject(None, McpError(errors.INVALID_REQUEST, "a response id must be a string or an integer"))
        result, error = message.get("result"), message.get("error")
        if "result" in message and "error" in message:
            return reject(id_, McpError(errors.INVALID_REQUEST, "a response has a result or an error, not both"))
        if result is not None and not isinstance(result, dict):
            return reject(id_, McpError(errors.INVALID_REQUEST, "result must be an object"))
        if error is not None and not (isinstance(error, dict) and isinstance(error.get("code"), int)):
            return reject(id_, McpError(errors.INVALID_REQUEST, "error must be an object with an integer code"))
        return LegacyResponse(id_, result if "result" in message else None, error)
    method = message.get("method")
    if not isinstance(method, str):
        return reject(id_, McpError(errors.INVALID_REQUEST, "method must be a string"))
    params = message.get("params")
    if params is None:
        params = {}
    if not isinstance(params, dict):
        return reject(id_, McpError(errors.INVALID_REQUEST, "params must be an object"))
    if "id" not in message:
        return LegacyNotification(method, params)
    if id_ is None:
        return reject(None, McpError(errors.INVALID_REQUEST, "id must be a string or an integer"))
    return LegacyRequest(id_, method, params)


def session_not_found(why: str = "Session not found") -> McpError:
    """The client must start a new session with `initialize`."""
    return McpError(SESSION_NOT_FOUND, why)


def session_required() -> McpError:
    return McpError(errors.INVALID_REQUEST, "Bad Request: Mcp-Session-Id header is required (send initialize first)")


def requested_version(message: Any, headers: Mapping[str, str] | None) -> str | None:
    """The 2025 version a legacy exchange asks for: `initialize`'s `protocolVersion`, else the header."""
    if isinstance(message, dict) and message.get("method") == "initialize":
        params = message.get("params")
        wanted = params.get("protocolVersion") if isinstance(params, dict) else None
        if isinstance(wanted, str):
            return wanted
    return None if headers is None else headers.get(VERSION_HEADER)


def request_id(message: Any) -> RequestId | None:
    """The id of a message, when it is a valid one (for an error that must echo it)."""
    raw = message.get("id") if isinstance(message, dict) else None
    return as_request_id(raw)
