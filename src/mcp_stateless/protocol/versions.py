"""Protocol revisions (the per-request era classification is `protocol/legacy.py: era_of`), and this
package's own release, which both roles announce (`serverInfo`/`clientInfo` defaults, the Server Card)."""

from __future__ import annotations

import functools

DISTRIBUTION = "mcp-stateless"  # the one place the release number lives is pyproject.toml

MODERN_VERSIONS: tuple[str, ...] = ("2026-07-28",)
LEGACY_VERSIONS: tuple[str, ...] = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
LATEST = MODERN_VERSIONS[0]

_MODERN = frozenset(MODERN_VERSIONS)
_LEGACY = frozenset(LEGACY_VERSIONS)


def is_modern(version: str) -> bool:
    return version in _MODERN


def is_legacy(version: str) -> bool:
    return version in _LEGACY


@functools.cache
def package_version() -> str:
    """The installed release of this package ("0.0.0+unknown" for a source tree on sys.path)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(DISTRIBUTION)
    except PackageNotFoundError:
        return "0.0.0+unknown"
