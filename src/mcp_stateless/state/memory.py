"""The in-memory engine: for tests and single-process use only (nothing is shared, nothing survives a
restart). Every operation completes without awaiting, so each one is atomic on its event loop."""

from __future__ import annotations

import dataclasses
import time

from .base import StateBundle, Versioned
from .events import ChangeEventBus, Fanout, QueueSubscription
from .handles import HandleStore


@dataclasses.dataclass(slots=True)
class _Entry:
    data: bytes
    version: int
    expires_at: float | None
    due: float | None

    def live(self, now: float) -> bool:
        return self.expires_at is None or self.expires_at > now


class MemoryRecords:
    def __init__(self) -> None:
        self._entries: dict[tuple[str, str], _Entry] = {}
        self._ops = 0

    def _live(self, ns: str, key: str) -> _Entry | None:
        entry = self._entries.get((ns, key))
        return entry if entry is not None and entry.live(time.time()) else None

    async def create(self, ns: str, key: str, data: bytes, *, expires_at: float | None = None,
                     due: float | None = None) -> bool:
        self._ops += 1
        if self._ops % 256 == 0:
            await self.purge(time.time())
        if self._live(ns, key) is not None:
            return False
        self._entries[(ns, key)] = _Entry(data, 1, expires_at, due)
        return True

    async def get(self, ns: str, key: str) -> Versioned | None:
        entry = self._live(ns, key)
        return None if entry is None else Versioned(entry.data, entry.version)

    async def swap(self, ns: str, key: str, expected_version: int, data: bytes, *,
                   expires_at: float | None = None, due: float | None = None) -> bool:
        entry = self._live(ns, key)
        if entry is None or entry.version != expected_version:
            return False
        self._entries[(ns, key)] = _Entry(data, expected_version + 1, expires_at, due)
        return True

    async def delete(self, ns: str, key: str) -> bool:
        return self._entries.pop((ns, key), None) is not None

    async def due_by(self, ns: str, before: float, limit: int = 100) -> list[str]:
        now = time.time()
        due = sorted((e.due, k) for (n, k), e in self._entries.items()
                     if n == ns and e.due is not None and e.due < before and e.live(now))
        return [k for _, k in due[:limit]]

    async def purge(self, now: float) -> int:
        dead = [k for k, e in self._entries.items() if not e.live(now)]
        for k in dead:
            del self._entries[k]
        return len(dead)

    async def aclose(self) -> None:
        return None


class MemoryBus:
    def __init__(self) -> None:
        self._fanout = Fanout()

    async def publish(self, topic: str, payload: bytes) -> None:
        self._fanout.deliver(topic, payload)

    def subscribe(self, topic: str) -> QueueSubscription[bytes]:
        return self._fanout.subscribe(topic)

    async def aclose(self) -> None:
        return None


class MemoryHandleStore(HandleStore):
    """Handles in this process's memory (an App without configured state)."""

    def __init__(self) -> None:
        super().__init__(MemoryRecords())


def open_bundle(url: str = "memory://") -> StateBundle:
    records, bus = MemoryRecords(), MemoryBus()
    return StateBundle(url, records, bus, HandleStore(records), ChangeEventBus(bus))
