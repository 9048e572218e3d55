"""Protected Resource Metadata (RFC 9728): the document and the well-known paths it is served at."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit

WELL_KNOWN = "/.well-known/oauth-protected-resource"


def well_known_paths(resource: str) -> tuple[str, ...]:
    """The root well-known path and, when the resource URI has a path, the path-suffixed form
    (``https://h/mcp`` → ``/.well-known/oauth-protected-resource/mcp``), which clients try first."""
    path = urlsplit(resource).path.rstrip("/")
    return (WELL_KNOWN + path, WELL_KNOWN) if path else (WELL_KNOWN,)


def metadata_url(resource: str) -> str:
    """The URL a 401 points clients at (the most specific form)."""
    parts = urlsplit(resource)
    return f"{parts.scheme}://{parts.netloc}{well_known_paths(resource)[0]}"


def protected_resource_metadata(resource: str, issuers: Sequence[str], scopes: Sequence[str]) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "resource": resource,
        "authorization_servers": list(issuers),
        "bearer_methods_supported": ["header"],
    }
    if scopes:
        doc["scopes_supported"] = list(scopes)
    return doc
