"""The client's result cache: results kept for the `ttlMs` the server gave them, keyed by method and target."""

from __future__ import annotations

import time
from typing import Any

from .events import PromptsListChanged, ResourcesListChanged, ResourceUpdated, ServerEvent, ToolsListChanged


class ResultCache:
    __slots__ = ("_entries",)

    def __init__(self) -> None:
        self._entries: dict[tuple[str, str], tuple[float, dict[str, Any]]] = {}

    def store(self, method: str, key: str, result: dict[str, Any]) -> None:
        """Keep `result` when it says how long it stays fresh (a positive integer `ttlMs`)."""
        ttl = result.get("ttlMs")
        if isinstance(ttl, int) and not isinstance(ttl, bool) and ttl > 0:
            self._entries[(method, key)] = (time.monotonic() + ttl / 1000.0, result)

    def get(self, method: str, key: str) -> dict[str, Any] | None:
        hit = self._entries.get((method, key))
        if hit is None:
            return None
        if time.monotonic() >= hit[0]:
            del self._entries[(method, key)]
            return None
        return hit[1]

    def invalidate(self, *methods: str, key: str | None = None) -> None:
        """Drop cached results of these methods (all of them when none are named), of one key if given."""
        for k in list(self._entries):
            if (not methods or k[0] in methods) and (key is None or k[1] == key):
                del self._entries[k]

    def on_event(self, ev: ServerEvent) -> None:
        """What a change notification makes stale."""
        if isinstance(ev, ToolsListChanged):
            self.invalidate("tools/list")
        elif isinstance(ev, PromptsListChanged):
            self.invalidate("prompts/list")
        elif isinstance(ev, ResourcesListChanged):
            self.invalidate("resources/list", "resources/templates/list")
        elif isinstance(ev, ResourceUpdated):
            self.invalidate("resources/read", key=ev.uri)


__all__ = ["ResultCache"]
