"""In-memory stores: for tests and single-process use only (nothing is shared, nothing survives a restart)."""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import orjson

from ..server.events import MemoryEventBus
from .base import HandleRecord, StateBundle


def _copy(data: dict[str, Any]) -> dict[str, Any]:
    # A JSON round trip: the same guarantee as the other backends (JSON only, no shared references).
    value: dict[str, Any] = orjson.loads(orjson.dumps(data))
    return value


class MemoryHandleStore:
    def __init__(self) -> None:
        self._records: dict[str, HandleRecord] = {}
        self._ops = 0

    def _maybe_purge(self) -> None:
        self._ops += 1
        if self._ops % 256 == 0:
            self._purge(time.time())

    def _purge(self, now: float) -> int:
        dead = [k for k, r in self._records.items() if r.purge_at <= now]
        for k in dead:
            del self._records[k]
        return len(dead)

    async def create(self, record: HandleRecord) -> bool:
        self._maybe_purge()
        if record.key in self._records:
            return False
        self._records[record.key] = dataclasses.replace(record, data=_copy(record.data))
        return True

    async def get(self, key: str) -> HandleRecord | None:
        rec = self._records.get(key)
        if rec is None or rec.purge_at <= time.time():
            return None
        return dataclasses.replace(rec, data=_copy(rec.data))

    async def swap(self, key: str, expected_version: int, data: dict[str, Any], expires_at: float,
                   purge_at: float, ended: bool) -> bool:
        rec = self._records.get(key)
        if rec is None or rec.version != expected_version:
            return False
        self._records[key] = dataclasses.replace(rec, data=_copy(data), version=rec.version + 1,
                                                 expires_at=expires_at, purge_at=purge_at, ended=ended)
        return True

    async def touch(self, key: str, expires_at: float, purge_at: float) -> None:
        rec = self._records.get(key)
        if rec is None or rec.ended or rec.expires_at >= expires_at or rec.expires_at <= time.time():
            return
        rec.expires_at = expires_at
        rec.purge_at = max(rec.purge_at, purge_at)

    async def delete(self, key: str) -> bool:
        return self._records.pop(key, None) is not None

    async def purge(self, now: float) -> int:
        return self._purge(now)

    async def aclose(self) -> None:
        return None


class MemoryBus(MemoryEventBus):
    """`MemoryEventBus` with the bundle's lifecycle."""

    async def aclose(self) -> None:
        return None


def open_bundle(url: str = "memory://") -> StateBundle:
    return StateBundle(url, MemoryHandleStore(), MemoryBus())
