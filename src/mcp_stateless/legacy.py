"""The 2025 era, served on purpose: what an application imports to keep 2025-03-26 / 2025-06-18 /
2025-11-25 clients (and, with the HTTP+SSE transport, 2024-11-05 ones) working beside modern ones.

`LegacyServer(app)` is the 2025 branch for any `LegacyHost` (an `App` is one); hand it to
`HttpTransport(app, legacy=...)` or `serve_stdio(..., legacy=...)` (`mcp-stateless serve` and `App.asgi()` do
so by default). `parse_retirement("2027-01-31")` gives the `Retirement` after which 2025 exchanges are
refused. A tool that must end its 2025 client's SSE stream early calls `close_stream(ctx)`.

The modern path never imports this module.
"""

from .protocol.retirement import Retirement
from .protocol.retirement import parse as parse_retirement
from .server.legacy import LegacyHost, LegacyServer, close_stream, legacy_capabilities

__all__ = ["LegacyHost", "LegacyServer", "Retirement", "close_stream", "legacy_capabilities", "parse_retirement"]
