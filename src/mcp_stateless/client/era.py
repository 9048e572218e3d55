"""Which era a server speaks, found by asking once: `server/discover` with the preferred modern version.

A modern server answers (or names the versions it does support); a legacy server answers with an error,
an HTTP error, or not at all, and the client falls back to the `initialize` handshake. A refusal of the
credentials (HTTP 401/403) is not an answer about the era: it is raised as `AuthenticationError`.
The outcome is kept in an `EraCache` per server, which callers may share between clients.
"""

from __future__ import annotations

import logging
from typing import Any

from ..protocol.errors import HEADER_MISMATCH, MISSING_CLIENT_CAPABILITY, UNSUPPORTED_PROTOCOL_VERSION, McpError
from ..protocol.versions import LEGACY_VERSIONS
from .errors import AuthenticationError, HttpStatusError, ServerLost, StreamBroken, UnsupportedServer
from .modern import ModernSession, pick_modern
from .session import Era

log = logging.getLogger("mcp_stateless.client")

# Errors only a modern server produces: the server is modern even though it refused this request.
_MODERN_ERRORS = frozenset({HEADER_MISMATCH, MISSING_CLIENT_CAPABILITY, UNSUPPORTED_PROTOCOL_VERSION})


class EraCache:
    """Era and version per server key (an HTTP endpoint, a stdio command line). Re-probed when it fails."""

    __slots__ = ("_known",)

    def __init__(self) -> None:
        self._known: dict[str, tuple[Era, str]] = {}

    def get(self, key: str) -> tuple[Era, str] | None:
        return self._known.get(key)

    def remember(self, key: str, era: Era, version: str) -> None:
        self._known[key] = (era, version)

    def forget(self, key: str) -> None:
        self._known.pop(key, None)


Probed = tuple[Era, str, dict[str, Any] | None]


async def probe(session: ModernSession, timeout: float) -> Probed:
    """Era, version, and the DiscoverResult when there is one (`session` has then remembered it)."""
    try:
        result = await session.send("server/discover", {}, timeout=timeout, version_retry=True)
    except McpError as e:
        if e.code not in _MODERN_ERRORS:
            log.info("server/discover answered %s (%s): falling back to the legacy handshake", e.code, e.message)
            return "legacy", LEGACY_VERSIONS[0], None
        supported = e.data.get("supported") if isinstance(e.data, dict) else None
        if e.code == UNSUPPORTED_PROTOCOL_VERSION and pick_modern(supported) is None:
            legacy = [v for v in LEGACY_VERSIONS if isinstance(supported, list) and v in supported]
            if legacy:
                return "legacy", legacy[0], None
            raise UnsupportedServer(f"no protocol version in common; the server supports {supported}") from None
        return "modern", session.version, None
    except AuthenticationError:
        raise
    except HttpStatusError as e:
        log.info("server/discover got HTTP %s: falling back to the legacy handshake", e.status)
        return "legacy", LEGACY_VERSIONS[0], None
    except (TimeoutError, StreamBroken, ServerLost) as e:
        log.info("no answer to server/discover (%s): falling back to the legacy handshake", e or "timeout")
        return "legacy", LEGACY_VERSIONS[0], None
    session.remember_discover(result)
    return "modern", session.version, result


__all__ = ["EraCache", "Probed", "probe"]
