"""Server->client requests of 2025 sessions: answered on another instance through the asking process's one
inbox topic (subscribed once, not once per request), taken once, and never from another session."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import orjson
import pytest

from mcp_stateless.protocol.errors import McpError
from mcp_stateless.protocol.legacy import LegacyResponse
from mcp_stateless.server.legacy.peer import ID_PREFIX, PENDING_NS, Inbox, Peer, answer_topic, reply_topic
from mcp_stateless.server.legacy.sessions import SealedSession
from mcp_stateless.state import Bus, StateBundle, TopicSubscription
from mcp_stateless.state.memory import MemoryRecords, open_bundle


class CountingBus:
    """The memory bus, with the topics subscribed counted (what a Redis Cluster pays a confirmation for)."""

    def __init__(self, inner: Bus) -> None:
        self.inner = inner
        self.subscribed: list[str] = []

    async def publish(self, topic: str, payload: bytes) -> None:
        await self.inner.publish(topic, payload)

    def subscribe(self, topic: str) -> TopicSubscription:
        self.subscribed.append(topic)
        return self.inner.subscribe(topic)

    async def aclose(self) -> None:
        await self.inner.aclose()


def session(key: str, principal: str = "alice") -> SealedSession:
    return SealedSession(key=key, version="2025-11-25", capabilities={"elicitation": {}}, client_info=None,
                         principal=principal, expires_at=time.time() + 60)


def instance(state: StateBundle, bus: Bus, timeout_s: float = 5.0) -> Peer:
    return Peer(state.records, bus, timeout_s, Inbox(bus))


async def asked(peer: Peer, who: SealedSession, method: str = "elicitation/create"
                ) -> tuple[asyncio.Task[dict[str, Any]], dict[str, Any]]:
    sent: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    task = asyncio.create_task(peer.ask(who, method, {"message": "name?"}, sent.put_nowait))
    return task, await asyncio.wait_for(sent.get(), 5)


async def test_answers_on_another_instance_reach_the_asker_through_one_subscription() -> None:
    state = open_bundle()
    bus = CountingBus(state.bus)
    a, b = instance(state, bus), instance(state, state.bus)
    s = session("s1")
    for n in range(3):
        task, request = await asked(a, s)
        assert request["method"] == "elicitation/create" and request["id"].startswith(ID_PREFIX)
        assert await b.answer(s, LegacyResponse(request["id"], {"action": "accept", "content": {"n": n}}, None))
        assert await asyncio.wait_for(task, 5) == {"action": "accept", "content": {"n": n}}
    assert bus.subscribed == [f"legacy-inbox:{a.inbox.name}"]  # three asks, one subscription
    assert await state.records.get(PENDING_NS, request["id"]) is None  # taken: the record is gone


async def test_concurrent_asks_each_get_their_own_answer() -> None:
    state = open_bundle()
    a, b = instance(state, state.bus), instance(state, state.bus)
    s = session("s1")
    (t1, r1), (t2, r2) = await asked(a, s), await asked(a, s)
    assert await b.answer(s, LegacyResponse(r2["id"], {"v": 2}, None))
    assert await b.answer(s, LegacyResponse(r1["id"], {"v": 1}, None))
    assert await asyncio.wait_for(t1, 5) == {"v": 1}
    assert await asyncio.wait_for(t2, 5) == {"v": 2}


async def test_an_answer_is_taken_once_and_never_from_another_session_of_the_same_principal() -> None:
    state = open_bundle()
    a, b = instance(state, state.bus), instance(state, state.bus)
    mine, other = session("s1"), session("s2")  # one principal, two sessions
    task, request = await asked(a, mine)
    assert not await b.answer(other, LegacyResponse(request["id"], {"stolen": True}, None))
    assert not task.done()
    assert await b.answer(mine, LegacyResponse(request["id"], {"ok": True}, None))
    assert not await b.answer(mine, LegacyResponse(request["id"], {"again": True}, None))
    assert await asyncio.wait_for(task, 5) == {"ok": True}


async def test_an_error_answer_raises_with_the_clients_code() -> None:
    state = open_bundle()
    a, b = instance(state, state.bus), instance(state, state.bus)
    s = session("s1")
    task, request = await asked(a, s, "sampling/createMessage")
    assert await b.answer(s, LegacyResponse(request["id"], None, {"code": -1, "message": "declined"}))
    with pytest.raises(McpError) as raised:
        await asyncio.wait_for(task, 5)
    assert raised.value.code == -1
    assert str(raised.value) == "the client answered sampling/createMessage with an error: declined"


async def test_an_unanswered_ask_times_out_and_forgets_its_record() -> None:
    state = open_bundle()
    a = instance(state, state.bus, timeout_s=0.2)
    task, request = await asked(a, session("s1"))
    with pytest.raises(McpError) as raised:
        await asyncio.wait_for(task, 5)
    assert raised.value.code == -32603
    assert str(raised.value) == "the client did not answer elicitation/create within 0.2s"
    assert await state.records.get(PENDING_NS, request["id"]) is None
    assert request["id"] not in a.inbox._waiters


async def test_an_id_of_an_earlier_release_is_answered_on_its_own_topic() -> None:
    state = open_bundle()
    old = ID_PREFIX + "AAAAAAAAAAAAAAAAAAAA"  # no inbox in it: minted by a per-request-topic instance
    assert answer_topic(old) == reply_topic(old) == f"legacy-reply:{old}"
    sub = state.bus.subscribe(reply_topic(old))
    await sub.ready()
    await state.records.create(PENDING_NS, old, b"s1", expires_at=time.time() + 60)
    assert await instance(state, state.bus).answer(session("s1"), LegacyResponse(old, {"ok": 1}, None))
    assert orjson.loads(await sub.get(5) or b"null") == {"id": old, "result": {"ok": 1}}
    sub.close()


class Written(MemoryRecords):
    """The memory engine, with creates (key, expiry) and deletes kept."""

    def __init__(self) -> None:
        super().__init__()
        self.created: dict[str, float | None] = {}
        self.deleted: list[tuple[str, str]] = []

    async def create(self, ns: str, key: str, data: bytes, *, expires_at: float | None = None,
                     due: float | None = None) -> bool:
        self.created[key] = expires_at
        return await super().create(ns, key, data, expires_at=expires_at, due=due)

    async def delete(self, ns: str, key: str) -> bool:
        self.deleted.append((ns, key))
        return await super().delete(ns, key)


async def test_the_request_sent_is_exact_and_its_record_lives_the_timeout() -> None:
    state = open_bundle()
    records = Written()
    a = Peer(records, state.bus, 30.0, Inbox(state.bus))
    s = session("s1")
    sent: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    t0 = time.time()
    task = asyncio.create_task(a.ask(s, "roots/list", None, sent.put_nowait))
    request = await asyncio.wait_for(sent.get(), 5)
    assert request == {"jsonrpc": "2.0", "id": request["id"], "method": "roots/list"}  # no params: none sent
    assert request["id"].startswith(ID_PREFIX)
    expires = records.created[request["id"]]
    assert expires is not None and t0 + 30.0 <= expires <= time.time() + 30.0
    got = await records.get(PENDING_NS, request["id"])
    assert got is not None and got.data == b"s1"  # whose it is: only that session's answer is taken
    assert await a.answer(s, LegacyResponse(request["id"], {"roots": []}, None))
    assert await asyncio.wait_for(task, 5) == {"roots": []}
    with_params = asyncio.create_task(a.ask(s, "elicitation/create", {"message": "m"}, sent.put_nowait))
    second = await asyncio.wait_for(sent.get(), 5)
    assert second == {"jsonrpc": "2.0", "id": second["id"], "method": "elicitation/create",
                      "params": {"message": "m"}}
    assert await a.answer(s, LegacyResponse(second["id"], None, {"code": -32000, "message": "no", "data": {"x": 1}}))
    with pytest.raises(McpError) as raised:
        await asyncio.wait_for(with_params, 5)
    assert (raised.value.code, raised.value.message, raised.value.data) == (
        -32000, "the client answered elicitation/create with an error: no", {"x": 1})


async def test_an_error_answer_without_code_or_message_is_an_internal_error() -> None:
    state = open_bundle()
    a = instance(state, state.bus)
    s = session("s1")
    task, request = await asked(a, s)
    await state.bus.publish(answer_topic(request["id"]), orjson.dumps({"id": request["id"], "error": {}}))
    with pytest.raises(McpError) as raised:
        await asyncio.wait_for(task, 5)
    assert (raised.value.code, raised.value.message, raised.value.data) == (
        -32603, "the client answered elicitation/create with an error: ", None)


async def test_an_unanswered_ask_deletes_its_pending_record() -> None:
    state = open_bundle()
    records = Written()
    a = Peer(records, state.bus, 0.1, Inbox(state.bus))
    task, request = await asked(a, session("s1"))
    with pytest.raises(McpError):
        await asyncio.wait_for(task, 5)
    assert records.deleted == [(PENDING_NS, request["id"])]


async def test_what_is_not_an_answer_on_the_inbox_topic_is_skipped_and_the_inbox_reads_on() -> None:
    state = open_bundle()
    a = instance(state, state.bus)
    s = session("s1")
    task, request = await asked(a, s)
    topic = answer_topic(request["id"])
    for junk in (b"not json", b"[1]", orjson.dumps({"id": 5}), orjson.dumps({"id": "mcps-unknown.x"})):
        await state.bus.publish(topic, junk)
    await asyncio.sleep(0.05)
    assert not task.done()
    assert await a.answer(s, LegacyResponse(request["id"], {"action": "accept"}, None))
    assert await asyncio.wait_for(task, 5) == {"action": "accept"}
