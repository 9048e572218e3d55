"""JSON-RPC 2.0 messages for either role: builders, the shape tests, and decoding an error off the wire.

Role-neutral on purpose: a client builds requests and reads responses, a server does the reverse, a test
or an auditor does both, and all of them share these few rules.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .errors import INTERNAL_ERROR, McpError, error_response

Message = dict[str, Any]
RequestId = str | int


def as_request_id(value: Any) -> RequestId | None:
    """The one request-id rule: `value` when it is a JSON-RPC id (a string or an integer of any size),
    else None. `true`/`false`, floats and null are not ids; Python would otherwise match them (`True == 1`
    and `1.0 == 1` hash alike, so `{1: task}.pop(True)` finds request 1), so every lookup by an id that
    came off the wire goes through here first."""
    # perf: a bool is an int subclass; `type(...) is` keeps it out with no second test.
    t = type(value)
    return value if t is str or t is int else None


def request(id_: RequestId, method: str, params: Mapping[str, Any] | None = None) -> Message:
    msg: Message = {"jsonrpc": "2.0", "id": id_, "method": method}
    if params is not None:
        msg["params"] = dict(params)
    return msg


def notification(method: str, params: Mapping[str, Any] | None = None) -> Message:
    msg: Message = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        msg["params"] = dict(params)
    return msg


def result_response(id_: RequestId, result: Mapping[str, Any]) -> Message:
    return {"jsonrpc": "2.0", "id": id_, "result": dict(result)}


def cancelled(request_id: RequestId, reason: str) -> Message:
    """`notifications/cancelled` for a request the sender gives up on."""
    return notification("notifications/cancelled", {"requestId": request_id, "reason": reason})


def is_response(msg: Mapping[str, Any]) -> bool:
    return "id" in msg and ("result" in msg or "error" in msg) and "method" not in msg


def is_request(msg: Mapping[str, Any]) -> bool:
    return "id" in msg and isinstance(msg.get("method"), str)


def is_notification(msg: Mapping[str, Any]) -> bool:
    return "id" not in msg and isinstance(msg.get("method"), str)


def params_of(msg: Mapping[str, Any]) -> dict[str, Any]:
    """The message's params when they are an object, else an empty dict (a lenient reader's view)."""
    p = msg.get("params")
    return p if isinstance(p, dict) else {}


def error_from_wire(err: Any) -> McpError:
    """The `error` member of a response as an `McpError`; a malformed one is an internal error."""
    if not isinstance(err, dict):
        return McpError(INTERNAL_ERROR, "malformed error response")
    code = err.get("code")
    if not isinstance(code, int) or isinstance(code, bool):
        code = INTERNAL_ERROR
    return McpError(code, str(err.get("message", "")), err.get("data"))


__all__ = [
    "Message",
    "RequestId",
    "as_request_id",
    "cancelled",
    "error_from_wire",
    "error_response",
    "is_notification",
    "is_request",
    "is_response",
    "notification",
    "params_of",
    "request",
    "result_response",
]
