"""The MCP Server Card (SEP-2127): this server's published compatibility contract, as pure code.

A Server Card is a static JSON document a client reads before it connects: who the server is, where its
remotes are, and which protocol versions each one speaks. It is served at `<endpoint>/server-card` (the
location the SEP reserves; it deliberately defines no `.well-known` one) as
`application/mcp-server-card+json`, with the CORS and caching headers the SEP asks for. What the card
format has no field for - the enabled extensions, whether the 2025 era is served and until when - goes
under our own `_meta` key, `dev.mcp-stateless/compatibility`.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from .legacy import SSE_VERSIONS
from .retirement import Retirement

SCHEMA_URL = "https://static.modelcontextprotocol.io/schemas/v1/server-card.schema.json"
MEDIA_TYPE = "application/mcp-server-card+json"
SUFFIX = "/server-card"
META_KEY = "dev.mcp-stateless/compatibility"
BRIDGE_META_KEY = "dev.mcp-stateless/bridge"  # what a bridge fronts (the card's name is its upstream's)
# The card's own limits (SEP-2127 schema): description 1..100 characters, name 3..200 in reverse-DNS form.
_DESCRIPTION_MAX = 100
_NAME = re.compile(r"^[a-zA-Z0-9.-]+/[a-zA-Z0-9._-]+$")
_NAMESPACE = "dev.mcp-stateless.local"  # for apps whose name has no namespace of its own
ORIGIN_VARIABLE = "origin"  # the URL template variable when the card is printed without a known URL
ORIGIN_TEMPLATE = "{" + ORIGIN_VARIABLE + "}"

CORS_HEADERS: tuple[tuple[str, str], ...] = (
    ("access-control-allow-origin", "*"),
    ("access-control-allow-methods", "GET"),
    ("access-control-allow-headers", "Content-Type, If-None-Match"),
    ("access-control-expose-headers", "ETag"),
)
CACHE_CONTROL = "public, max-age=3600"

RemoteType = Literal["streamable-http", "sse"]


@dataclass(frozen=True, slots=True)
class CardIdentity:
    """What the app says about itself (`App.card_identity()`)."""

    name: str
    version: str
    description: str
    title: str | None = None
    extensions: tuple[str, ...] = ()
    bridge: Mapping[str, Any] | None = None  # set by `mcp-stateless bridge`: the upstream it fronts


@dataclass(frozen=True, slots=True)
class Compatibility:
    """What the transports serve: the modern versions, the legacy ones (empty when 2025 clients are
    refused or retired), whether the 2024-11-05 HTTP+SSE transport is on (and its versions), and the
    legacy retirement date (ISO 8601, or None)."""

    modern_versions: tuple[str, ...]
    legacy_versions: tuple[str, ...] = ()
    sse_versions: tuple[str, ...] = ()
    legacy_until: str | None = None
    legacy_retired: bool = False


def compatibility(modern_versions: tuple[str, ...], legacy_versions: tuple[str, ...], sse: bool,
                  until: Retirement | None, now: float) -> Compatibility:
    """What a server with these settings serves at `now`: `legacy_versions` empty when 2025 clients are
    refused; `sse` whether the 2024-11-05 transport is on; `until` the legacy retirement, if any."""
    return Compatibility(
        modern_versions=modern_versions,
        legacy_versions=legacy_versions,
        sse_versions=SSE_VERSIONS if sse and legacy_versions else (),
        legacy_until=until.text() if until is not None and legacy_versions else None,
        legacy_retired=until is not None and until.retired(now),
    )


def card_name(app_name: str) -> str:
    """The reverse-DNS `namespace/name` a card needs: the app's own name when it already has that form,
    else the name under a local namespace (with every character the format refuses replaced by `-`)."""
    if _NAME.match(app_name) and 3 <= len(app_name) <= 200:
        return app_name
    local = re.sub(r"[^a-zA-Z0-9._-]", "-", app_name).strip("-") or "server"
    return f"{_NAMESPACE}/{local}"[:200]


def describe(app_name: str, title: str | None, instructions: str | None) -> str:
    """A description within the card's 100 characters: the first line of the instructions, else a
    sentence naming the server."""
    text = (instructions or "").strip().splitlines()[0].strip() if (instructions or "").strip() else ""
    if not text:
        text = f"{title or app_name}: an MCP server"
    return text if len(text) <= _DESCRIPTION_MAX else text[: _DESCRIPTION_MAX - 1].rstrip() + "\u2026"


def server_card(identity: CardIdentity, compat: Compatibility, url: str | None) -> dict[str, Any]:
    """The card. `url`: the Streamable HTTP endpoint's absolute URL (the 2024-11-05 SSE stream is a GET
    on the same URL), or a template such as `"{origin}/mcp"` when it is not known (None: `"{origin}"`);
    the `{origin}` variable is then described in the remotes."""
    target = url if url is not None else ORIGIN_TEMPLATE
    variables = None if ORIGIN_TEMPLATE not in target else {ORIGIN_VARIABLE: {
        "description": "The scheme and host this server is reached at, e.g. https://mcp.example.com",
        "isRequired": True}}
    streamable = [*compat.modern_versions, *([] if compat.legacy_retired else compat.legacy_versions)]
    remotes: list[dict[str, Any]] = [_remote("streamable-http", target, streamable, variables)]
    if compat.sse_versions and not compat.legacy_retired:
        remotes.append(_remote("sse", target, list(compat.sse_versions), variables))
    card: dict[str, Any] = {
        "$schema": SCHEMA_URL,
        "name": identity.name,
        "version": identity.version,
        "description": identity.description,
    }
    if identity.title:
        card["title"] = identity.title[:100]
    card["remotes"] = remotes
    card["_meta"] = {META_KEY: {
        "extensions": sorted(identity.extensions),
        "modernVersions": list(compat.modern_versions),
        "legacy": {
            "served": bool(compat.legacy_versions) and not compat.legacy_retired,
            "versions": [] if compat.legacy_retired else list(compat.legacy_versions),
            "sse": bool(compat.sse_versions) and not compat.legacy_retired,
            "until": compat.legacy_until,
        },
    }}
    if identity.bridge is not None:
        card["_meta"][BRIDGE_META_KEY] = dict(identity.bridge)
    return card


def _remote(kind: RemoteType, url: str, versions: Sequence[str], variables: dict[str, Any] | None) -> dict[str, Any]:
    remote: dict[str, Any] = {"type": kind, "url": url, "supportedProtocolVersions": list(versions)}
    if variables:
        remote["variables"] = variables
    return remote


def etag(body: bytes) -> str:
    """A strong validator for one encoding of the card (the SEP leaves its form open)."""
    return f'"{hashlib.sha256(body).hexdigest()[:32]}"'


def not_modified(if_none_match: str | None, tag: str) -> bool:
    """Whether an `If-None-Match` header matches `tag` (RFC 9110: weak comparison, `*` matches)."""
    if not if_none_match:
        return False
    wanted = {t.strip().removeprefix("W/") for t in if_none_match.split(",")}
    return "*" in wanted or tag in wanted


def markdown(card: dict[str, Any]) -> str:
    """The card as a README section: identity, one row per remote, the compatibility contract."""
    meta = card.get("_meta", {}).get(META_KEY, {})
    legacy = meta.get("legacy", {})
    lines = [f"## {card.get('title') or card['name']} {card['version']}", "", card["description"], "",
             f"Server Card name: `{card['name']}`", "", "| transport | URL | protocol versions |",
             "|---|---|---|"]
    for remote in card.get("remotes", []):
        versions = ", ".join(remote.get("supportedProtocolVersions", []))
        lines.append(f"| {remote['type']} | `{remote['url']}` | {versions} |")
    lines.append("")
    if legacy.get("served"):
        until = legacy.get("until")
        lines.append("2025-era clients (`initialize`) are served" + (
            f" until {until}; their responses carry `Deprecation` and `Sunset` headers." if until else "."))
    else:
        lines.append("2025-era clients are not served: only the 2026-07-28 revision is.")
    extensions = meta.get("extensions") or []
    lines.append("")
    lines.append("Extensions: " + (", ".join(f"`{e}`" for e in extensions) if extensions else "none") + ".")
    return "\n".join(lines) + "\n"
