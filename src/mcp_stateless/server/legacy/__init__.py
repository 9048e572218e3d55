"""The 2025-era branch of a dual-era server (initialize, sessions, server->client requests).

The modern path never imports this package: a transport reaches it through the `LegacyEndpoint` seam
(`protocol.endpoint`), given a `LegacyServer(app)` by whoever builds the transport (the CLI does with
`--legacy serve`, the default).
"""

from __future__ import annotations

from .server import LegacyServer, close_stream, legacy_capabilities

__all__ = ["LegacyServer", "close_stream", "legacy_capabilities"]
