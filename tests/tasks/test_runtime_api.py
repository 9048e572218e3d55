"""The runtime's own API, called directly (no App in between): documented defaults, the shape check of
input answers, what a new record holds, the exact errors of tasks/*, and every branch of tasks/update and
tasks/cancel with what each writes and announces (on memory, SQLite and the real Redis). Found by
mutation testing (docs/mutation.md): the end-to-end tests went through App, which fills in some fields
itself, and never cancelled a task waiting for input or one whose lease had lapsed."""

from __future__ import annotations

import asyncio
import logging
import os
import re
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from mcp_stateless.protocol.envelope import Request
from mcp_stateless.protocol.errors import McpError
from mcp_stateless.state import open_state
from mcp_stateless.state.base import StateUnavailable
from mcp_stateless.state.memory import MemoryRecords
from mcp_stateless.tasks.host import Completed, NeedsInput, TaskOutcome
from mcp_stateless.tasks.model import EXTENSION_ID, TaskRecord
from mcp_stateless.tasks.runtime import TaskRuntime, malformed_answer
from mcp_stateless.tasks.store import NAMESPACE, MemoryTaskStore, TaskStore, TaskUpdate

from .test_lease_edges import _task
from .test_lease_takeover import _SlowToAnnounceHost
from .test_runtime import ScriptHost

EXT = {"extensions": {EXTENSION_ID: {}}}
ELICIT = {"method": "elicitation/create", "params": {"mode": "form", "message": "ok?",
                                                     "requestedSchema": {"type": "object"}}}
SAMPLE = {"method": "sampling/createMessage", "params": {"messages": [], "maxTokens": 5}}
ROOTS = {"method": "roots/list", "params": {}}


def req(method: str, params: dict[str, Any], caps: dict[str, Any] | None = None) -> Request:
    return Request("r1", method, params, "2026-07-28", EXT if caps is None else caps, {"name": "c", "version": "1"},
                   None, None)


async def _version(store: TaskStore, tid: str) -> int:
    got = await store.records.get(NAMESPACE, tid)
    assert got is not None
    return got.version


async def _until(what: str, check: Callable[[], Awaitable[bool]], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not await check():
        assert time.monotonic() < deadline, what
        await asyncio.sleep(0.01)


# ------------------------------------------------------------------ construction


def test_the_documented_defaults() -> None:
    rt = TaskRuntime()
    assert (rt.ttl_ms, rt.poll_interval_ms, rt.lease_s, rt.sweep_interval_s, rt.max_attempts) == (
        3_600_000, 250, 6.0, 1.0, 3)
    assert isinstance(rt.store, MemoryTaskStore)
    assert re.fullmatch(rf"{os.getpid()}-[0-9a-f]{{8}}", rt.instance_id), rt.instance_id
    assert TaskRuntime().instance_id != rt.instance_id
    with pytest.raises(AssertionError, match=r"not attached to a host \(App.enable_tasks\)"):
        _ = rt.host


async def test_a_runtime_built_with_its_own_store_keeps_it_when_the_app_adopts_state() -> None:
    own = MemoryTaskStore()
    bundle = open_state("memory://")
    try:
        kept = TaskRuntime(own)
        kept.adopt_state(bundle)
        assert kept.store is own
        adopted = TaskRuntime()
        adopted.adopt_state(bundle)
        assert adopted.store is not own and isinstance(adopted.store, TaskStore)
        assert adopted.store.records is bundle.records
    finally:
        await bundle.aclose()


@pytest.mark.parametrize("request_, answer, malformed", [
    (ELICIT, {"action": "accept", "content": {"ok": True}}, False),
    (ELICIT, {"action": "decline"}, False),
    (ELICIT, {"action": "cancel"}, False),
    (ELICIT, {"action": "maybe"}, True),
    (ELICIT, {"action": "accept", "content": "yes"}, True),
    (ELICIT, "accept", True),
    (SAMPLE, {"role": "assistant", "content": {"type": "text", "text": "hi"}}, False),
    (SAMPLE, {"role": "assistant", "content": [{"type": "text", "text": "hi"}]}, False),
    (SAMPLE, {"content": {"type": "text", "text": "hi"}}, True),
    (SAMPLE, {"role": "assistant", "content": "hi"}, True),
    (ROOTS, {"roots": [{"uri": "file:///a"}, {"uri": "file:///b", "name": "b"}]}, False),
    (ROOTS, {"roots": []}, False),
    (ROOTS, {"roots": "file:///a"}, True),
    (ROOTS, {"roots": [{"name": "a"}]}, True),
    (ROOTS, {"roots": [{"uri": 5}]}, True),
    (ROOTS, {"roots": ["file:///a"]}, True),
    ({"method": "x/unknown"}, {"anything": 1}, False),
    ({"method": "x/unknown"}, [1], True),
    ("not a request", {"action": "maybe"}, False),
    (None, {}, False),
], ids=lambda v: repr(v)[:40])
def test_which_answers_are_malformed(request_: Any, answer: Any, malformed: bool) -> None:
    assert malformed_answer(request_, answer) is malformed


def test_a_new_record_holds_the_request_the_answers_and_this_instances_lease() -> None:
    rt = TaskRuntime(instance_id="me", lease_s=9.0, ttl_ms=5000, poll_interval_ms=70)
    answers = {"k": {"action": "accept"}}
    t0 = time.time()
    rec = rt.new_record("tool", req("tools/call", {}), "alice", {"a": 1}, answers)
    t1 = time.time()
    answers["later"] = {"action": "decline"}  # the record keeps its own copy
    assert (rec.tool, rec.principal, rec.arguments, rec.ttl_ms, rec.poll_interval_ms) == (
        "tool", "alice", {"a": 1}, 5000, 70)
    assert rec.request_meta == {"version": "2026-07-28", "capabilities": EXT,
                                "clientInfo": {"name": "c", "version": "1"}}
    assert (rec.answers, rec.asked) == ({"k": {"action": "accept"}}, ["k"])
    assert (rec.status, rec.lease_owner, rec.attempts, rec.input_requests) == ("working", "me", 1, {})
    assert t0 <= rec.created_at == rec.updated_at <= t1
    assert rec.lease_until == rec.created_at + 9.0


# ------------------------------------------------------------------ tasks/get and the errors every method shares


@pytest.mark.parametrize("method", ["tasks/get", "tasks/update", "tasks/cancel"])
async def test_the_exact_errors_of_the_tasks_methods(method: str) -> None:
    rt = TaskRuntime(MemoryTaskStore())
    rt.attach(ScriptHost([]))
    call = rt.methods()[method]
    rec = _task(owner="elsewhere", lease_in=60.0)
    await rt.store.create(rec)
    try:
        with pytest.raises(McpError) as e:
            await call(req(method, {"taskId": rec.task_id}, caps={}), "alice")
        assert (e.value.code, e.value.message, e.value.data) == (
            -32021, f"{method} needs the {EXTENSION_ID} extension", {"requiredCapabilities": EXT})
        with pytest.raises(McpError) as e:
            await call(req(method, {"taskId": 7}), "alice")
        assert (e.value.code, e.value.message, e.value.data) == (-32602, f"{method} needs params.taskId", None)
        for tid, who in (("tsk_unknown", "alice"), (rec.task_id, "bob")):  # bob's view: alice's task does not exist
            with pytest.raises(McpError) as e:
                await call(req(method, {"taskId": tid, "inputResponses": {}}), who)
            assert (e.value.code, e.value.message, e.value.data) == (
                -32602, f"Unknown or expired task: {tid}", {"taskId": tid})
    finally:
        await rt.aclose()


async def test_get_answers_a_complete_result_with_the_task() -> None:
    rt = TaskRuntime(MemoryTaskStore())
    rt.attach(ScriptHost([]))
    rec = _task(status="completed", owner=None, lease_in=0.0)
    rec.result = {"content": [], "resultType": "complete"}
    await rt.store.create(rec)
    got = await rt.get(req("tasks/get", {"taskId": rec.task_id}), "alice")
    assert got == {"resultType": "complete", **rec.detailed()}
    assert got["result"] == {"content": [], "resultType": "complete"}
    await rt.aclose()


class _CountingRecords(MemoryRecords):
    def __init__(self) -> None:
        super().__init__()
        self.reads = 0

    async def get(self, ns: str, key: str) -> Any:
        self.reads += 1
        return await super().get(ns, key)


@pytest.mark.parametrize("status,owner,lease_in", [
    ("completed", None, 0.0), ("input_required", None, 0.0), ("working", "elsewhere", 60.0)])
async def test_get_reads_the_store_once_unless_a_lapsed_lease_needs_recovering(
        status: str, owner: str | None, lease_in: float) -> None:
    records = _CountingRecords()
    rt = TaskRuntime(TaskStore(records))
    rt.attach(ScriptHost([]))
    rec = _task(status=status, owner=owner, lease_in=lease_in)
    await rt.store.create(rec)
    records.reads = 0
    await rt.get(req("tasks/get", {"taskId": rec.task_id}), "alice")
    assert records.reads == 1
    await rt.aclose()


# ------------------------------------------------------------------ tasks/update


class _Gated(ScriptHost):
    """Asks for `first` on the first run; later runs wait for `gate`, then complete."""

    def __init__(self, first: dict[str, dict[str, Any]]) -> None:
        super().__init__([NeedsInput(first), Completed({"content": []})])
        self.gate = asyncio.Event()

    async def run(self, rec: TaskRecord) -> TaskOutcome:
        if self.ran:
            await self.gate.wait()
        return await super().run(rec)


async def _parked(store: TaskStore, asked: dict[str, dict[str, Any]]) -> tuple[TaskRuntime, _Gated, str]:
    rt = TaskRuntime(store, instance_id="me", lease_s=20.0)
    host = _Gated(asked)
    rt.attach(host)
    rec = _task(owner="me", lease_in=20.0)
    await store.create(rec)
    rt.spawn(rec)

    async def waiting() -> bool:
        got = await store.get(rec.task_id)
        return got is not None and got.status == "input_required"

    await _until("never parked", waiting)
    got = await store.get(rec.task_id)
    assert got is not None
    assert (got.status_message, got.input_requests, got.lease_owner, got.lease_until) == (
        "Waiting for input", asked, None, 0.0)
    await asyncio.sleep(0.05)  # the parked run has ended
    return rt, host, rec.task_id


def _update(tid: str, responses: Any) -> Request:
    return req("tasks/update", {"taskId": tid, "inputResponses": responses})


async def test_update_needs_an_object_of_responses(store: TaskStore) -> None:
    rt, _, tid = await _parked(store, {"a": ELICIT})
    try:
        for bad in (None, [], "x"):
            with pytest.raises(McpError) as e:
                await rt.update(_update(tid, bad), "alice")
            assert (e.value.code, e.value.message) == (-32602, "tasks/update needs params.inputResponses (an object)")
    finally:
        await rt.aclose()


async def test_an_update_answering_nothing_pending_writes_nothing(store: TaskStore) -> None:
    rt, host, tid = await _parked(store, {"a": ELICIT})
    try:
        before = await _version(store, tid)
        published = list(host.published)
        assert await rt.update(_update(tid, {"unknown": {"action": "accept"}}), "alice") == {"resultType": "complete"}
        assert await rt.update(_update(tid, {}), "alice") == {"resultType": "complete"}
        assert await _version(store, tid) == before and host.published == published
        assert len(host.ran) == 1
    finally:
        await rt.aclose()


async def test_answering_one_of_two_pending_inputs_keeps_waiting_and_runs_nothing(store: TaskStore) -> None:
    rt, host, tid = await _parked(store, {"a": ELICIT, "b": ELICIT})
    try:
        before = await _version(store, tid)
        await rt.update(_update(tid, {"a": {"action": "accept", "content": {"ok": True}}}), "alice")
        got = await store.get(tid)
        assert got is not None and got.status == "input_required" and list(got.input_requests) == ["b"]
        assert got.answers == {"a": {"action": "accept", "content": {"ok": True}}}
        assert await _version(store, tid) == before + 1
        await asyncio.sleep(0.1)
        assert len(host.ran) == 1 and tid not in rt._running
    finally:
        await rt.aclose()


async def test_the_last_answer_resumes_the_task_here_under_a_fresh_lease(store: TaskStore) -> None:
    rt, host, tid = await _parked(store, {"a": ELICIT})
    try:
        t0 = time.time()
        await rt.update(_update(tid, {"a": {"action": "decline"}}), "alice")
        t1 = time.time()
        got = await store.get(tid)
        assert got is not None
        assert (got.status, got.status_message, got.lease_owner, got.input_requests) == (
            "working", "Resuming with the answers", "me", {})
        assert t0 + 20.0 <= got.lease_until <= t1 + 20.0
        assert tid in rt._running
        host.gate.set()

        async def completed() -> bool:
            got = await store.get(tid)
            return got is not None and got.status == "completed"

        await _until("the resumed run never completed", completed)
        assert host.ran == [("slow", {}), ("slow", {"a": {"action": "decline"}})]
    finally:
        await rt.aclose()


class _Interfering(TaskStore):
    """A task store on which another instance writes `interference` once, just before the next update's
    read (between a tasks/* method's first read and its write)."""

    interference: Callable[[TaskRecord], bool] | None = None

    async def update(self, task_id: str, mutate: Callable[[TaskRecord], bool]) -> TaskUpdate | None:
        interference, self.interference = self.interference, None
        if interference is not None:
            await super().update(task_id, interference)
        return await super().update(task_id, mutate)


def _re_ask_as_roots(r: TaskRecord) -> bool:
    r.input_requests = {"a": ROOTS}
    return True


def _lapse(r: TaskRecord) -> bool:
    r.lease_until = time.time() - 1  # its instance died just now
    return True


async def test_an_answer_that_became_malformed_for_a_re_asked_key_is_not_kept(store: TaskStore) -> None:
    store = _Interfering(store.records)
    rt, host, tid = await _parked(store, {"a": ELICIT})
    try:
        store.interference = _re_ask_as_roots
        await rt.update(_update(tid, {"a": {"action": "accept", "content": {"ok": True}}}), "alice")
        got = await store.get(tid)
        assert got is not None and got.status == "input_required"
        assert (got.input_requests, got.answers) == ({"a": ROOTS}, {})
        assert len(host.ran) == 1
    finally:
        await rt.aclose()


# ------------------------------------------------------------------ tasks/cancel


async def _cancel(rt: TaskRuntime, tid: str) -> None:
    assert await rt.cancel(req("tasks/cancel", {"taskId": tid}), "alice") == {"resultType": "complete"}


async def test_cancelling_a_task_waiting_for_input_ends_it_at_once(store: TaskStore) -> None:
    rt, host, tid = await _parked(store, {"a": ELICIT})
    try:
        published = len(host.published)
        await _cancel(rt, tid)
        got = await store.get(tid)
        assert got is not None
        assert (got.status, got.status_message, got.input_requests, got.lease_owner, got.lease_until,
                got.cancel_requested) == ("cancelled", "Cancelled by the client", {}, None, 0.0, False)
        assert host.published[published:] == [tid]
    finally:
        await rt.aclose()


async def test_cancelling_a_task_whose_lease_lapses_during_the_cancel_ends_it_at_once(store: TaskStore) -> None:
    # the lease was live when tasks/cancel read the task (else it would have recovered it first) and has
    # lapsed when it writes: nobody runs it any more, so the cancel ends it itself
    store = _Interfering(store.records)
    rt = TaskRuntime(store, instance_id="me")
    host = ScriptHost([])
    rt.attach(host)
    rec = _task(owner="dead", lease_in=60.0)
    rec.input_requests = {"stale": ELICIT}
    await store.create(rec)
    store.interference = _lapse
    await _cancel(rt, rec.task_id)
    got = await store.get(rec.task_id)
    assert got is not None
    assert (got.status, got.status_message, got.input_requests, got.lease_owner, got.lease_until,
            got.cancel_requested) == ("cancelled", "Cancelled by the client", {}, None, 0.0, False)
    assert host.published == [rec.task_id]
    await rt.aclose()


async def test_cancelling_a_task_running_elsewhere_asks_its_instance_and_announces_nothing_yet(
        store: TaskStore) -> None:
    rt = TaskRuntime(store, instance_id="me")
    host = ScriptHost([])
    rt.attach(host)
    rec = _task(owner="elsewhere", lease_in=60.0)
    await store.create(rec)
    before = await _version(store, rec.task_id)
    await _cancel(rt, rec.task_id)
    got = await store.get(rec.task_id)
    assert got is not None
    assert (got.status, got.cancel_requested, got.lease_owner) == ("working", True, "elsewhere")
    assert await _version(store, rec.task_id) == before + 1
    assert host.published == []  # the running instance announces the end when its run stops
    await rt.aclose()


async def test_cancelling_a_finished_task_writes_and_announces_nothing(store: TaskStore) -> None:
    rt = TaskRuntime(store, instance_id="me")
    host = ScriptHost([])
    rt.attach(host)
    rec = _task(status="completed", owner=None, lease_in=0.0)
    await store.create(rec)
    before = await _version(store, rec.task_id)
    await _cancel(rt, rec.task_id)
    assert await _version(store, rec.task_id) == before
    got = await store.get(rec.task_id)
    assert got is not None and (got.status, got.cancel_requested) == ("completed", False)
    assert host.published == []
    await rt.aclose()


class _Forever(ScriptHost):
    def __init__(self) -> None:
        super().__init__([])
        self.cancelled_at = 0.0

    async def run(self, rec: TaskRecord) -> TaskOutcome:
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            self.cancelled_at = time.monotonic()
            raise
        raise AssertionError("never cancelled")


@pytest.mark.parametrize("lease_in", [30.0, -5.0], ids=["live-lease", "renewal-late"])
async def test_cancelling_a_task_running_here_stops_it_at_once(store: TaskStore, lease_in: float) -> None:
    # not at the next renewal (10 s away): the runner is cancelled in place, and it reports the end
    rt = TaskRuntime(store, instance_id="me", lease_s=30.0)
    host = _Forever()
    rt.attach(host)
    rec = _task(owner="me", lease_in=lease_in)
    await store.create(rec)
    rt.spawn(rec)
    await asyncio.sleep(0.05)
    try:
        t0 = time.monotonic()
        await _cancel(rt, rec.task_id)

        async def cancelled() -> bool:
            got = await store.get(rec.task_id)
            return got is not None and got.status == "cancelled"

        await _until("the local run was not stopped", cancelled, timeout=5.0)
        assert 0 < host.cancelled_at - t0 < 2.0
        got = await store.get(rec.task_id)
        assert got is not None and got.status_message == "Cancelled by the client"
        assert host.published == [rec.task_id]  # announced once, by the run that stopped
    finally:
        await rt.aclose()


async def test_cancelling_a_task_whose_run_is_still_announcing_its_park_ends_it_at_once(store: TaskStore) -> None:
    # waiting for input, though its run has not quite ended here: the task is over, not asked to stop
    rt = TaskRuntime(store, instance_id="me")
    host = _SlowToAnnounceHost()
    rt.attach(host)
    rec = _task(owner="me", lease_in=60.0)
    await store.create(rec)
    rt.spawn(rec)
    try:
        async def parked() -> bool:
            got = await store.get(rec.task_id)
            return got is not None and got.status == "input_required"

        await _until("the task never parked", parked)
        assert rec.task_id in rt._running  # still announcing
        await _cancel(rt, rec.task_id)
        got = await store.get(rec.task_id)
        assert got is not None
        assert (got.status, got.status_message, got.cancel_requested) == ("cancelled", "Cancelled by the client", False)
    finally:
        host.announce.set()
        await rt.aclose()


class _BusDown(ScriptHost):
    async def publish(self, task_id: str) -> None:
        raise RuntimeError("the bus is down")


async def test_a_failing_announcement_does_not_fail_the_task_or_the_runtime(
        store: TaskStore, caplog: pytest.LogCaptureFixture) -> None:
    # listeners miss the change (they re-read on their next poll); the record is what counts
    caplog.set_level(logging.DEBUG, logger="mcp_stateless.tasks")
    rt = TaskRuntime(store, instance_id="me")
    host = _BusDown([Completed({"content": []})])
    rt.attach(host)
    rec = _task(owner="me", lease_in=60.0)
    await store.create(rec)
    rt.spawn(rec)
    run = rt._running[rec.task_id]
    await asyncio.wait_for(run, 10)
    assert run.exception() is None
    got = await store.get(rec.task_id)
    assert got is not None and (got.status, got.result) == ("completed", {"content": [], "resultType": "complete"})
    assert [r.getMessage() for r in caplog.records if r.name == "mcp_stateless.tasks"] == []
    await rt.aclose()


class _DownRecords(MemoryRecords):
    down = False

    async def get(self, ns: str, key: str) -> Any:
        if self.down:
            raise StateUnavailable("test engine", "connection refused")
        return await super().get(ns, key)


class _Ending(ScriptHost):
    """Ends its run in one of four ways; "store-down" cuts the store off first."""

    def __init__(self, records: _DownRecords, ending: str) -> None:
        super().__init__([])
        self.records, self.ending = records, ending

    async def run(self, rec: TaskRecord) -> TaskOutcome:
        if self.ending == "tool-outage":  # the tool's own store call failed
            raise StateUnavailable("test engine", "connection refused")
        if self.ending in ("store-down", "crash-store-down"):
            self.records.down = True
        if self.ending.startswith("crash"):
            raise RuntimeError("boom")
        return Completed({"content": []})


@pytest.mark.parametrize("ending", ["store-down", "tool-outage", "crash", "crash-store-down"])
async def test_a_run_that_cannot_report_or_crashes_says_so_in_the_log(
        ending: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="mcp_stateless.tasks")
    records = _DownRecords()
    store = TaskStore(records)
    rt = TaskRuntime(store, instance_id="me")
    rt.attach(_Ending(records, ending))
    rec = _task(owner="me", lease_in=60.0)
    await store.create(rec)
    rt.spawn(rec)
    run = rt._running[rec.task_id]
    await asyncio.wait_for(run, 10)
    assert run.exception() is None  # handled and logged, not left to the event loop
    records.down = False
    logged = [(r.levelname, r.getMessage()) for r in caplog.records if r.name == "mcp_stateless.tasks"]
    got = await store.get(rec.task_id)
    assert got is not None
    outage = StateUnavailable("test engine", "connection refused")
    lapses = ("ERROR", f"task {rec.task_id}: store unavailable, lease will lapse: {outage}")
    crashed = ("ERROR", f"task {rec.task_id} crashed")
    if ending == "crash":
        assert logged == [crashed]
        assert (got.status, got.error) == ("failed", {"code": -32603, "message": "Internal error"})
        crash = next(r for r in caplog.records if r.getMessage() == crashed[1])
        assert crash.exc_info is not None and isinstance(crash.exc_info[1], RuntimeError)
    else:  # nothing written: the lease lapses and whichever instance notices re-runs or fails the task
        assert logged == ([crashed] if ending == "crash-store-down" else []) + [lapses]
        assert (got.status, got.lease_owner, got.error) == ("working", "me", None)
    await rt.aclose()


def test_a_record_from_another_version_of_the_runtime_loads() -> None:
    """Instances of two versions share a store while a deployment rolls: a record without a newer field gets its
    default, and a field only a newer version knows is skipped rather than failing the load."""
    from mcp_stateless.tasks.model import TaskRecord, new_task_id

    now = time.time()
    rec = TaskRecord(new_task_id(), "alice", "slow", {}, {"version": "2026-07-28"}, now, now, None, 250,
                     principal_scopes=["tools:read"])
    older = {k: v for k, v in rec.to_dict().items() if k != "principal_scopes"}
    assert TaskRecord.from_dict(older).principal_scopes == []
    newer = {**rec.to_dict(), "a_field_from_the_future": {"x": 1}}
    assert TaskRecord.from_dict(newer) == rec
