"""The per-principal count of open 2025 sessions (`Sessions.admit` / `forget`, server/legacy/sessions.py) on
the memory engine, in process: one shared record per principal holding its sessions' keys and expiries,
pruned of expired entries at each admission, living as long as its longest entry plus the grace, and
removed when its last session is forgotten. The served tests see the bound through HTTP; these pin the
record itself."""

from __future__ import annotations

import time

import orjson

from mcp_stateless.protocol.mrtr import KeyRing
from mcp_stateless.server.legacy.sessions import PRINCIPAL_NS, RECORD_GRACE_S, SealedSession, Sessions
from mcp_stateless.state.memory import MemoryRecords


class Written(MemoryRecords):
    """The memory engine, with the expiry of the last create or swap kept by key."""

    def __init__(self) -> None:
        super().__init__()
        self.expiry: dict[str, float | None] = {}

    async def create(self, ns: str, key: str, data: bytes, *, expires_at: float | None = None,
                     due: float | None = None) -> bool:
        self.expiry[key] = expires_at
        return await super().create(ns, key, data, expires_at=expires_at, due=due)

    async def swap(self, ns: str, key: str, expected_version: int, data: bytes, *,
                   expires_at: float | None = None, due: float | None = None) -> bool:
        self.expiry[key] = expires_at
        return await super().swap(ns, key, expected_version, data, expires_at=expires_at, due=due)


def session(key: str, expires_at: float, principal: str = "erin") -> SealedSession:
    return SealedSession(key, "2025-11-25", {}, None, principal, expires_at)


async def entries(records: MemoryRecords, principal: str = "erin") -> list[list[object]] | None:
    got = await records.get(PRINCIPAL_NS, principal)
    return None if got is None else orjson.loads(got.data)


async def test_admission_counts_live_sessions_up_to_the_limit_and_the_record_outlives_the_longest() -> None:
    records = Written()
    sessions = Sessions(KeyRing.generate(), records, 60)
    now = time.time()
    assert await sessions.admit(session("a", now + 100), 2)
    assert records.expiry["erin"] == now + 100 + RECORD_GRACE_S
    assert await sessions.admit(session("b", now + 50), 2)
    assert records.expiry["erin"] == now + 100 + RECORD_GRACE_S  # the longest entry's, not the last one's
    assert await entries(records) == [["a", now + 100], ["b", now + 50]]
    assert not await sessions.admit(session("c", now + 100), 2)  # at the limit: refused, nothing stored
    assert await entries(records) == [["a", now + 100], ["b", now + 50]]
    assert await entries(records, "frank") is None  # another principal has its own count
    assert await sessions.admit(session("f", now + 10, "frank"), 1)


async def test_an_expired_entry_is_pruned_at_the_next_admission() -> None:
    records = Written()
    sessions = Sessions(KeyRing.generate(), records, 60)
    now = time.time()
    await records.create(PRINCIPAL_NS, "erin", orjson.dumps([["old", now - 1], ["live", now + 30]]),
                         expires_at=now + 90)
    assert await sessions.admit(session("new", now + 20), 2)  # the lapsed one no longer counts
    assert await entries(records) == [["live", now + 30], ["new", now + 20]]
    # Entries of another shape (a record written by hand, or by a broken writer) never count.
    await records.delete(PRINCIPAL_NS, "erin")
    await records.create(PRINCIPAL_NS, "erin", orjson.dumps([["x", "soon"], [1, now + 30], ["y"], "z",
                                                              ["ok", now + 30]]), expires_at=now + 90)
    assert await sessions.admit(session("n2", now + 20), 2)
    assert await entries(records) == [["ok", now + 30], ["n2", now + 20]]
    await records.delete(PRINCIPAL_NS, "erin")
    await records.create(PRINCIPAL_NS, "erin", b"not json", expires_at=now + 90)
    assert await sessions.admit(session("n3", now + 20), 1)  # unreadable: counted as empty
    assert await entries(records) == [["n3", now + 20]]


async def test_forgetting_takes_one_session_out_and_the_last_one_removes_the_record() -> None:
    records = Written()
    sessions = Sessions(KeyRing.generate(), records, 60)
    now = time.time()
    for key, left in (("a", 100), ("b", 50)):
        assert await sessions.admit(session(key, now + left), 5)
    await sessions.forget(session("zzz", now + 10))  # not counted: nothing changes
    assert await entries(records) == [["a", now + 100], ["b", now + 50]]
    await sessions.forget(session("a", now + 100))
    assert await entries(records) == [["b", now + 50]]
    assert records.expiry["erin"] == now + 50 + RECORD_GRACE_S  # follows what is left
    await sessions.forget(session("b", now + 50))
    assert await records.get(PRINCIPAL_NS, "erin") is None
    await sessions.forget(session("b", now + 50))  # no record: nothing to do


async def test_forgetting_also_drops_the_lapsed_entries() -> None:
    records = Written()
    sessions = Sessions(KeyRing.generate(), records, 60)
    now = time.time()
    await records.create(PRINCIPAL_NS, "erin", orjson.dumps([["old", now - 1], ["a", now + 30], ["b", now + 40]]),
                         expires_at=now + 100)
    await sessions.forget(session("a", now + 30))
    assert await entries(records) == [["b", now + 40]]
