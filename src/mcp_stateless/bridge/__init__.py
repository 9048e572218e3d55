"""`mcp-stateless bridge`: a stateless 2026-07-28 front for an unmodified 2025-era server (docs/bridge.md).

`Bridge` (endpoint.py) is an `Endpoint` the transports serve unchanged; its upstream sessions live in
`UpstreamPool` (pool.py).
"""

from .endpoint import Bridge
from .pool import UpstreamPool, pool_key

__all__ = ["Bridge", "UpstreamPool", "pool_key"]
