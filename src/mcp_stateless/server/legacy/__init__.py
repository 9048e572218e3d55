"""The 2025-era branch of a dual-era server (initialize, sessions, server->client requests).

The modern path never imports this package: a transport reaches it through the `LegacyEndpoint` seam
(`protocol.endpoint`), given a `LegacyServer(app)` by whoever builds the transport (the CLI does with
`--legacy serve`, the default). `LegacyServer` serves any `LegacyHost`, of which `App` is one.
"""

from __future__ import annotations

from .calls import close_stream
from .host import LegacyHost
from .lifecycle import legacy_capabilities
from .server import LegacyServer

__all__ = ["LegacyHost", "LegacyServer", "close_stream", "legacy_capabilities"]
