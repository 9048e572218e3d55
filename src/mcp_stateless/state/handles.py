"""The records behind application handles, as a typed store on a `RecordStore`."""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import orjson

from .base import RecordStore, Versioned

NAMESPACE = "h"
_RETRIES = 50  # swaps lost to a concurrent `touch` of the same record: re-read and try again


@dataclasses.dataclass(slots=True)
class HandleRecord:
    """What a store keeps behind one handle. `key` is a digest of the handle, never the handle itself."""

    key: str
    principal: str
    kind: str
    data: dict[str, Any]
    version: int
    created_at: float
    expires_at: float
    purge_at: float
    ended: bool = False


def _encode(rec: HandleRecord) -> bytes:
    return orjson.dumps({"p": rec.principal, "k": rec.kind, "d": rec.data, "v": rec.version, "c": rec.created_at,
                         "e": rec.expires_at, "g": rec.purge_at, "x": rec.ended})


def _decode(key: str, raw: bytes) -> HandleRecord:
    d = orjson.loads(raw)
    return HandleRecord(key, d["p"], d["k"], d["d"], d["v"], d["c"], d["e"], d["g"], d["x"])


class HandleStore:
    """Handle records: the record lives until its `purge_at` (its TTL in the record store); `expires_at`
    and `ended` are policy, decided above, so `get` returns records whatever their expiry.

    `version` is the handle's own version: `swap` succeeds only while it equals `expected_version` and
    then stores version + 1. `touch` extends the expiry without bumping it (a use is not an update), so
    a swap that loses a race to a touch re-reads and retries while the handle's version still matches.
    """

    def __init__(self, records: RecordStore) -> None:
        self.records = records

    async def create(self, record: HandleRecord) -> bool:
        """Insert; False (and no change) if the key exists."""
        return await self.records.create(NAMESPACE, record.key, _encode(record), expires_at=record.purge_at)

    async def _load(self, key: str) -> tuple[Versioned, HandleRecord] | None:
        got = await self.records.get(NAMESPACE, key)
        return None if got is None else (got, _decode(key, got.data))

    async def get(self, key: str) -> HandleRecord | None:
        loaded = await self._load(key)
        return None if loaded is None else loaded[1]

    async def swap(self, key: str, expected_version: int, data: dict[str, Any], expires_at: float,
                   purge_at: float, ended: bool) -> bool:
        """Replace data/expiry/ended and bump the version iff the version is still `expected_version`."""
        for _ in range(_RETRIES):
            loaded = await self._load(key)
            if loaded is None or loaded[1].version != expected_version:
                return False
            stored, rec = loaded
            new = dataclasses.replace(rec, data=data, version=expected_version + 1, expires_at=expires_at,
                                      purge_at=purge_at, ended=ended)
            if await self.records.swap(NAMESPACE, key, stored.version, _encode(new), expires_at=purge_at):
                return True
        return False

    async def touch(self, key: str, expires_at: float, purge_at: float) -> None:
        """Extend a live, un-ended record's expiry (sliding TTL) without bumping its version; never
        shortens it. Best effort: a touch that keeps losing races gives up (the use still happened)."""
        for _ in range(_RETRIES):
            loaded = await self._load(key)
            if loaded is None:
                return
            stored, rec = loaded
            if rec.ended or rec.expires_at >= expires_at or rec.expires_at <= time.time():
                return
            new = dataclasses.replace(rec, expires_at=expires_at, purge_at=max(rec.purge_at, purge_at))
            if await self.records.swap(NAMESPACE, key, stored.version, _encode(new), expires_at=new.purge_at):
                return

    async def delete(self, key: str) -> bool:
        return await self.records.delete(NAMESPACE, key)

    async def purge(self, now: float) -> int:
        """Remove records whose `purge_at` has passed; returns how many (engines with native expiry
        may return 0)."""
        return await self.records.purge(now)
