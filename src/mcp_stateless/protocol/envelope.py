"""The per-message validation ladder of the 2026-07-28 revision, as pure code.

`classify()` takes one decoded JSON-RPC message plus, on HTTP, its headers, and returns a decision:
a validated `Request`, a `Notification`, or a `Rejection` carrying the HTTP status and the error.
Nothing here reads anything but its arguments, so no request can see what an earlier one left behind.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Mapping
from dataclasses import dataclass
from typing import Any

from . import errors
from .encoding import decode_exact
from .errors import McpError
from .headers import NAME_PARAM, ParamHeader, check_param_headers, decode_header_value
from .jsonrpc import RequestId as RequestId  # re-exported: the seam and the transports name it from here
from .jsonrpc import as_request_id
from .meta import (
    META_CLIENT_CAPABILITIES,
    META_CLIENT_INFO,
    META_LOG_LEVEL,
    META_PROGRESS_TOKEN,
    META_PROTOCOL_VERSION,
)
from .meta import META_SERVER_INFO as META_SERVER_INFO  # re-exported: the server imports the keys from here
from .meta import META_SUBSCRIPTION_ID as META_SUBSCRIPTION_ID
from .versions import MODERN_VERSIONS, is_legacy

LOG_LEVELS: tuple[str, ...] = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")
LOG_LEVEL_RANK: dict[str, int] = {name: i for i, name in enumerate(LOG_LEVELS)}


@dataclass(slots=True)
class Request:
    """A modern request that passed the envelope ladder."""

    id: RequestId
    method: str
    params: dict[str, Any]
    version: str
    capabilities: dict[str, Any]
    client_info: dict[str, Any] | None
    log_level: str | None
    progress_token: str | int | None


@dataclass(slots=True)
class Notification:
    method: str
    params: dict[str, Any]


@dataclass(slots=True)
class Rejection:
    """Answer without dispatching. `error` None means an empty body (e.g. a refused notification)."""

    status: int
    id: RequestId | None
    error: McpError | None

    def body(self) -> dict[str, Any] | None:
        if self.error is None:
            return None
        return errors.error_response(self.id, self.error)


Decision = Request | Notification | Rejection


def reject(id_: RequestId | None, err: McpError) -> Rejection:
    return Rejection(errors.http_status_for(err.code), id_, err)


def parse(body: bytes | str) -> Any:
    """Decode one message; raises McpError(-32700) on invalid JSON or UTF-8."""
    try:
        return decode_exact(body)
    except ValueError:  # orjson's JSONDecodeError, bad UTF-8, or an integer of more digits than Python reads
        raise McpError(errors.PARSE_ERROR, "Parse error: the body is not valid JSON") from None


class MethodTable:
    """What the core needs to know about the application: its methods and tools' header annotations."""

    __slots__ = ("methods", "param_headers")

    def __init__(
        self,
        methods: Container[str],
        param_headers: Callable[[str], tuple[ParamHeader, ...] | None] = lambda _name: None,
    ) -> None:
        self.methods = methods
        self.param_headers = param_headers


def classify(
    message: Any,
    headers: Mapping[str, str] | None,
    table: MethodTable,
    supported_versions: tuple[str, ...] = MODERN_VERSIONS,
) -> Decision:
    """Run the validation ladder on one decoded message. `headers` is None off HTTP (stdio)."""
    # (2) JSON-RPC shape
    if not isinstance(message, dict):
        if isinstance(message, list):
            return reject(None, McpError(errors.INVALID_REQUEST, "Batches are not supported"))
        return reject(None, McpError(errors.INVALID_REQUEST, "A JSON-RPC message must be an object"))
    has_id = "id" in message
    raw_id = message.get("id")
    id_ = as_request_id(raw_id)
    if message.get("jsonrpc") != "2.0":
        return reject(id_, McpError(errors.INVALID_REQUEST, 'jsonrpc must be "2.0"'))
    method = message.get("method")
    if not isinstance(method, str):
        if "result" in message or "error" in message:
            return reject(id_, McpError(errors.INVALID_REQUEST, "Clients must not send responses"))
        return reject(id_, McpError(errors.INVALID_REQUEST, "method must be a string"))
    params = message.get("params")
    if params is None and "params" not in message:
        params = {}
    if not isinstance(params, dict):
        return reject(id_, McpError(errors.INVALID_REQUEST, "params must be an object"))

    if not has_id:
        return Notification(method, params)
    if id_ is None:
        return reject(None, McpError(errors.INVALID_REQUEST, "id must be a string or an integer"))

    # (3) per-request _meta
    meta = params.get("_meta")
    if not isinstance(meta, dict):
        if method == "initialize":
            return _legacy_initialize(id_, params, supported_versions)
        return reject(id_, errors.invalid_params("params._meta is missing"))
    version = meta.get(META_PROTOCOL_VERSION)
    if not isinstance(version, str):
        return reject(id_, errors.invalid_params(f"params._meta is missing {META_PROTOCOL_VERSION}"))
    caps = meta.get(META_CLIENT_CAPABILITIES)
    if not isinstance(caps, dict):
        return reject(id_, errors.invalid_params(f"params._meta is missing {META_CLIENT_CAPABILITIES}"))
    info = meta.get(META_CLIENT_INFO)
    if info is not None and not isinstance(info, dict):
        return reject(id_, errors.invalid_params(f"{META_CLIENT_INFO} must be an object"))
    level = meta.get(META_LOG_LEVEL)
    if level is not None and level not in LOG_LEVEL_RANK:
        return reject(id_, errors.invalid_params(f"{META_LOG_LEVEL} must be one of {', '.join(LOG_LEVELS)}"))
    token = meta.get(META_PROGRESS_TOKEN)
    if token is not None and as_request_id(token) is None:
        return reject(id_, errors.invalid_params("progressToken must be a string or an integer"))

    # (4) headers mirror the body
    if headers is not None:
        err = _check_headers(headers, method, params, version, table)
        if err is not None:
            return reject(id_, err)

    # (5) version
    if version not in supported_versions:
        return reject(
            id_,
            McpError(
                errors.UNSUPPORTED_PROTOCOL_VERSION,
                "Unsupported protocol version",
                {"supported": list(supported_versions), "requested": version},
            ),
        )

    # (6) method
    if method not in table.methods:
        return reject(id_, errors.method_not_found(method))

    return Request(id_, method, params, version, caps, info, level, token)


def _check_headers(
    headers: Mapping[str, str], method: str, params: dict[str, Any], version: str, table: MethodTable
) -> McpError | None:
    hv = headers.get("mcp-protocol-version")
    if hv is None:
        return errors.header_mismatch("MCP-Protocol-Version header is missing")
    if hv.strip(" \t") != version:
        return errors.header_mismatch(
            f"MCP-Protocol-Version header {hv.strip()!r} does not match params._meta protocolVersion {version!r}"
        )
    hm = headers.get("mcp-method")
    if hm is None:
        return errors.header_mismatch("Mcp-Method header is missing")
    if hm.strip(" \t") != method:
        return errors.header_mismatch(f"Mcp-Method header {hm.strip()!r} does not match method {method!r}")
    name_key = NAME_PARAM.get(method)
    if name_key is not None:
        body_name = params.get(name_key)
        hn = headers.get("mcp-name")
        if isinstance(body_name, str):
            if hn is None:
                return errors.header_mismatch("Mcp-Name header is missing")
            try:
                decoded = decode_header_value(hn, "Mcp-Name")
            except McpError as e:
                return e
            if decoded != body_name:
                return errors.header_mismatch(
                    f"Mcp-Name header {decoded!r} does not match params.{name_key} {body_name!r}"
                )
        if method == "tools/call" and isinstance(body_name, str):
            specs = table.param_headers(body_name)
            if specs:
                return check_param_headers(specs, params.get("arguments") or {}, headers)
    return None


def _legacy_initialize(id_: RequestId, params: dict[str, Any], supported: tuple[str, ...]) -> Rejection:
    requested = params.get("protocolVersion")
    era = "a legacy" if isinstance(requested, str) and is_legacy(requested) else "an"
    return reject(
        id_,
        McpError(
            errors.METHOD_NOT_FOUND,
            f"initialize is not supported: {era} initialize handshake reached a server that speaks MCP "
            f"{', '.join(supported)} only (send per-request _meta instead)",
            {"supported": list(supported), "requested": requested if isinstance(requested, str) else None},
        ),
    )
