"""Protocol revisions and the per-request era classification."""

from __future__ import annotations

MODERN_VERSIONS: tuple[str, ...] = ("2026-07-28",)
LEGACY_VERSIONS: tuple[str, ...] = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
LATEST = MODERN_VERSIONS[0]

_MODERN = frozenset(MODERN_VERSIONS)
_LEGACY = frozenset(LEGACY_VERSIONS)


def is_modern(version: str) -> bool:
    return version in _MODERN


def is_legacy(version: str) -> bool:
    return version in _LEGACY
