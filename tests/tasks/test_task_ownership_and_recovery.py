"""A task belongs to its principal on listen streams too, and `tasks/get` alone recovers a task whose lease
lapsed (no sweep needed): a retry-safe task is re-run, any other is failed, in that very answer."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from mcp_stateless import App
from mcp_stateless.protocol.endpoint import KEEPALIVE, Call, ListenEvent, ListenItem
from mcp_stateless.protocol.principal import Principal
from mcp_stateless.tasks.model import TaskRecord, new_task_id
from mcp_stateless.tasks.store import MemoryTaskStore

from .test_runtime import EXT, call, make_app, poll, request


async def _drain(stream: Any, into: list[ListenItem]) -> None:
    async for item in stream:
        into.append(item)


async def test_another_principals_listen_stream_gets_none_of_a_tasks_notifications() -> None:
    app, _ = make_app(MemoryTaskStore())
    app.listen_keepalive_s = 0.05
    tid = (await call(app, "tools/call", {"name": "slow", "arguments": {"seconds": 0.3}}))["result"]["taskId"]
    streams = {who: app.listen(request(app, "subscriptions/listen", {"notifications": {"taskIds": [tid]}},
                                       id_=f"L-{who}"), Call(Principal(who)))
               for who in ("alice", "bob")}
    for stream in streams.values():
        ack = await anext(stream)
        assert isinstance(ack, ListenEvent)
        assert ack.message["params"]["notifications"] == {"taskIds": [tid]}
    got: dict[str, list[ListenItem]] = {"alice": [], "bob": []}
    readers = [asyncio.create_task(_drain(streams[w], got[w])) for w in got]
    try:
        await poll(app, tid, {"completed"})
        deadline = time.monotonic() + 5
        while not any(isinstance(i, ListenEvent) for i in got["alice"]):
            assert time.monotonic() < deadline, "the owner's stream never heard of its task"
            await asyncio.sleep(0.02)
        await asyncio.sleep(0.3)  # bob's stream has had every chance to receive the same event
    finally:
        for r in readers:
            r.cancel()
        await asyncio.gather(*readers, return_exceptions=True)
        for stream in streams.values():
            await stream.aclose()
    owner = [i for i in got["alice"] if isinstance(i, ListenEvent)]
    assert [(m.message["method"], m.message["params"]["taskId"], m.message["params"]["status"]) for m in owner][-1] \
        == ("notifications/tasks", tid, "completed")
    assert got["bob"] and all(i is KEEPALIVE for i in got["bob"])  # alive, and told nothing


def _orphan(tool: str) -> TaskRecord:
    """A task whose instance died: working, with a lease that ran out."""
    now = time.time() - 10
    return TaskRecord(new_task_id(), "alice", tool, {"seconds": 0}, {"version": "2026-07-28", "capabilities": EXT},
                      now, now, 60_000, 50, lease_owner="dead-instance", lease_until=now + 1, attempts=1)


async def _app_without_sweeps(store: MemoryTaskStore) -> tuple[App, dict[str, Any]]:
    app, seen = make_app(store, sweep_interval_s=3600.0)
    await app.startup()
    await asyncio.sleep(0.05)  # the sweeper's first pass (over an empty store) is over; the next is an hour away
    return app, seen


async def test_tasks_get_recovers_a_lapsed_retry_safe_task_by_re_running_it() -> None:
    store = MemoryTaskStore()
    app, seen = await _app_without_sweeps(store)
    try:
        orphan = _orphan("slow")
        await store.create(orphan)
        first = (await call(app, "tasks/get", {"taskId": orphan.task_id}))["result"]
        assert first["status"] in ("working", "completed")
        rec = await store.get(orphan.task_id)
        assert app.tasks is not None and rec is not None
        assert (rec.attempts, rec.lease_owner) == (2, app.tasks.instance_id)  # this instance took it over
        done = await poll(app, orphan.task_id, {"completed", "failed"})
        assert done["status"] == "completed" and done["result"]["content"] == [{"type": "text", "text": "slept 0.0"}]
        assert seen["runs"] == 1
    finally:
        await app.aclose()


async def test_tasks_get_fails_a_lapsed_task_that_is_not_safe_to_repeat_in_that_answer() -> None:
    store = MemoryTaskStore()
    app, _ = await _app_without_sweeps(store)
    try:
        orphan = _orphan("fragile")
        await store.create(orphan)
        first = (await call(app, "tasks/get", {"taskId": orphan.task_id}))["result"]
        assert first["status"] == "failed"
        assert first["error"] == {"code": -32603, "message": "The server instance running this task stopped "
                                  "before it finished; start it again."}
    finally:
        await app.aclose()


async def test_tasks_get_from_another_principal_neither_sees_nor_recovers_a_lapsed_task() -> None:
    store = MemoryTaskStore()
    app, seen = await _app_without_sweeps(store)
    try:
        orphan = _orphan("slow")
        await store.create(orphan)
        r = await call(app, "tasks/get", {"taskId": orphan.task_id}, principal="bob")
        assert r["error"]["code"] == -32602 and r["error"]["message"] == f"Unknown or expired task: {orphan.task_id}"
        rec = await store.get(orphan.task_id)
        assert rec is not None and rec.status == "working" and rec.attempts == 1 and seen["runs"] == 0
    finally:
        await app.aclose()
