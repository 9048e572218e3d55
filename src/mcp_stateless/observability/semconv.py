"""What the OpenTelemetry MCP semantic conventions record about one request, as pure functions.

Metrics and spans describe a request with the same words: its method, its target (the tool or prompt
it names), the protocol version, the transport, the era, and how it ended. Label values stay bounded:
a target is named only when it is registered (anything else is `OTHER`, semconv's fallback value),
methods and versions passed the envelope ladder before reaching an endpoint, and error types are
JSON-RPC codes. Nothing here is per user or per argument.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from ..protocol.endpoint import Reply
from ..protocol.envelope import Request

OTHER = "_OTHER"
TOOL_ERROR = "tool_error"  # semconv: a CallToolResult with isError: true
CANCELLED = "cancelled"  # the client went away or cancelled before the reply
RESULT_TYPES = frozenset({"complete", "input_required", "task"})

TargetKind = Literal["tool", "prompt"]
# (kind, name) -> is it registered? Answered by the app (`instrument` wires `app.catalog`).
Known = Callable[[TargetKind, str], bool]

NETWORK_TRANSPORT = {"http": "tcp", "stdio": "pipe", "memory": "inproc"}


def everything_known(kind: TargetKind, name: str) -> bool:
    return True


def target_of(req: Request, known: Known) -> tuple[str, str]:
    """(tool name, prompt name) for the labels: "" when the method names none, `OTHER` when the name is
    not registered (so a client cannot mint label values)."""
    method = req.method
    if method == "tools/call":
        name = req.params.get("name")
        return (name if isinstance(name, str) and known("tool", name) else OTHER), ""
    if method == "prompts/get":
        name = req.params.get("name")
        return "", (name if isinstance(name, str) and known("prompt", name) else OTHER)
    return "", ""


def outcome(reply: Reply) -> tuple[str, str]:
    """(error type, result type) of a reply. An MRTR round that asks for input is not an error: its
    result type is ``input_required`` and its error type empty; a tool result with ``isError`` is
    ``tool_error``; a JSON-RPC error is its code."""
    if reply.error_code is not None:
        return str(reply.error_code), "error"
    result: Any = reply.message.get("result")
    if not isinstance(result, dict):
        return OTHER, "error"
    rtype = result.get("resultType", "complete")
    if rtype not in RESULT_TYPES:
        rtype = OTHER
    return (TOOL_ERROR if result.get("isError") is True else ""), rtype


def error_message(reply: Reply) -> str | None:
    """The JSON-RPC error message (a span's status description), if the reply is an error."""
    err = reply.message.get("error")
    if isinstance(err, dict) and isinstance(err.get("message"), str):
        return str(err["message"])
    return None
