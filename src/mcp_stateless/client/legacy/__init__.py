"""The legacy (2024-11-05 … 2025-11-25) client path: the `initialize` handshake, sessions, server→client
requests, and the 2024-11-05 HTTP+SSE transport. `Client` only reaches it after a deliberate fallback (or a
pinned legacy version)."""

from .session import LegacySession

__all__ = ["LegacySession"]
