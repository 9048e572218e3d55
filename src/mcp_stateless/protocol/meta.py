"""The `_meta` keys of the 2026-07-28 revision, and the per-request `_meta` every modern request carries.

A modern request is self-contained: its `_meta` names the protocol version, the client's capabilities and
(optionally) the client's identity, so a server needs nothing from an earlier request to answer it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

META_PROTOCOL_VERSION = "io.modelcontextprotocol/protocolVersion"
META_CLIENT_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
META_CLIENT_INFO = "io.modelcontextprotocol/clientInfo"
META_LOG_LEVEL = "io.modelcontextprotocol/logLevel"
META_SERVER_INFO = "io.modelcontextprotocol/serverInfo"
META_SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"
META_PROGRESS_TOKEN = "progressToken"
META_IDEMPOTENCY_KEY = "dev.mcp-stateless/idempotencyKey"


def request_meta(
    version: str,
    capabilities: Mapping[str, Any],
    client_info: Mapping[str, Any] | None = None,
    *,
    base: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """`_meta` for one modern request: `base` (what the caller put there, e.g. a progress token) with the
    version, capabilities and client info set on top, so a caller cannot send a request that lies about them."""
    meta: dict[str, Any] = dict(base or {})
    meta[META_PROTOCOL_VERSION] = version
    meta[META_CLIENT_CAPABILITIES] = capabilities
    if client_info is not None:
        meta[META_CLIENT_INFO] = client_info
    return meta


__all__ = [
    "META_CLIENT_CAPABILITIES",
    "META_CLIENT_INFO",
    "META_IDEMPOTENCY_KEY",
    "META_LOG_LEVEL",
    "META_PROGRESS_TOKEN",
    "META_PROTOCOL_VERSION",
    "META_SERVER_INFO",
    "META_SUBSCRIPTION_ID",
    "request_meta",
]
