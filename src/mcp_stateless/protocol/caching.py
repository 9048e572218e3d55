"""Cache hints (`ttlMs`, `cacheScope`) for cacheable results."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from .methods import CACHEABLE_METHODS as CACHEABLE_METHODS  # re-exported; the table is protocol/methods.py

CacheScope = Literal["public", "private"]


@dataclass(frozen=True, slots=True)
class CacheHint:
    ttl_ms: int = 0
    scope: CacheScope = "public"

    def __post_init__(self) -> None:
        if not isinstance(self.ttl_ms, int) or self.ttl_ms < 0:
            raise ValueError("ttl_ms must be an integer >= 0")
        if self.scope not in ("public", "private"):
            raise ValueError('cacheScope must be "public" or "private"')

    def private(self) -> CacheHint:
        return CacheHint(self.ttl_ms, "private")
