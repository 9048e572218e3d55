"""Two instances, one task: when this instance's lease lapsed and another instance took the task over, the
run here stops at its next renewal and writes nothing (no status, no result, no announcement), whatever it
was about to report. Each instance has its own connection to one shared store (the same SQLite file, the
same Redis keys), as two processes would."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest

from mcp_stateless.protocol.envelope import Request
from mcp_stateless.protocol.errors import McpError
from mcp_stateless.state import open_state
from mcp_stateless.tasks.host import Completed, NeedsInput, TaskOutcome
from mcp_stateless.tasks.model import EXTENSION_ID, TaskRecord
from mcp_stateless.tasks.runtime import TaskRuntime
from mcp_stateless.tasks.store import TaskStore
from services import RedisServer

from .test_lease_edges import _task
from .test_runtime import ScriptHost

# Every test here starts a process (a server, a client, a tool): the fast lane leaves them out.
pytestmark = pytest.mark.slow

ASK = {"ok": {"method": "elicitation/create", "params": {"mode": "form", "message": "ok?",
                                                         "requestedSchema": {"type": "object"}}}}


@pytest.fixture(params=["sqlite", "redis"])
async def two_stores(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[tuple[TaskStore, TaskStore]]:
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'tasks.db'}"
    else:
        server: RedisServer = request.getfixturevalue("redis_server")
        url = server.isolated_url()
    bundles = [open_state(url), open_state(url)]
    try:
        yield bundles[0].typed_store(TaskStore), bundles[1].typed_store(TaskStore)
    finally:
        for b in bundles:
            await b.aclose()


class _GatedHost(ScriptHost):
    """Runs every task until `gate` opens, then reports `outcome` (raises it when it is an exception)."""

    def __init__(self, outcome: TaskOutcome | Exception, *, retry_safe: bool = False) -> None:
        super().__init__([])
        self.outcome, self.safe = outcome, retry_safe
        self.gate = asyncio.Event()
        self.cancelled = self.reported = False

    def retry_safe(self, tool: str) -> bool:
        return self.safe

    async def run(self, rec: TaskRecord) -> TaskOutcome:
        try:
            await self.gate.wait()
        except asyncio.CancelledError:
            self.cancelled = True
            raise
        self.reported = True
        if isinstance(self.outcome, Exception):
            raise self.outcome
        return self.outcome


async def _until(what: str, check: Callable[[], Awaitable[bool]], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not await check():
        assert time.monotonic() < deadline, what
        await asyncio.sleep(0.02)


B_RESULT = {"content": [{"type": "text", "text": "run by b"}]}


async def _taken_over(stores: tuple[TaskStore, TaskStore], lease_a: float, outcome_a: TaskOutcome | Exception,
                      ) -> tuple[TaskRuntime, _GatedHost, TaskRuntime, _GatedHost, str]:
    """A runs a task whose lease has lapsed (as if A stalled or lost the store for a while); B's sweeper
    takes it over and re-runs it (the tool is retry-safe). Returns once the record names B."""
    store_a, store_b = stores
    a = TaskRuntime(store_a, instance_id="a", lease_s=lease_a)
    host_a = _GatedHost(outcome_a)
    a.attach(host_a)
    b = TaskRuntime(store_b, instance_id="b", lease_s=30.0, sweep_interval_s=0.02)
    host_b = _GatedHost(Completed(B_RESULT), retry_safe=True)
    b.attach(host_b)
    rec = _task(owner="a", lease_in=-5.0)
    await store_a.create(rec)
    a.spawn(rec)
    b.ensure_started()

    async def owned_by_b() -> bool:
        got = await store_a.get(rec.task_id)
        return got is not None and got.lease_owner == "b" and rec.task_id in b._running

    await _until("b never took the lapsed task over", owned_by_b)
    return a, host_a, b, host_b, rec.task_id


async def _b_finishes_it(store: TaskStore, host_b: _GatedHost, tid: str) -> TaskRecord:
    host_b.gate.set()

    async def done() -> bool:
        got = await store.get(tid)
        return got is not None and got.terminal

    await _until("b never finished", done)
    got = await store.get(tid)
    assert got is not None
    assert (got.lease_owner, got.lease_until) == (None, 0.0)  # a finished task holds no lease
    return got


async def _still_b_s(store: TaskStore, tid: str) -> None:
    got = await store.get(tid)
    assert got is not None
    assert (got.status, got.lease_owner, got.attempts, got.result, got.error, got.cancel_requested) == (
        "working", "b", 2, None, None, False)
    assert got.status_message == "re-running after a lost instance (attempt 2)"


async def test_a_run_whose_lease_was_taken_over_stops_at_its_next_renewal_and_writes_nothing(
        two_stores: tuple[TaskStore, TaskStore], caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="mcp_stateless.tasks")
    store_a, _ = two_stores
    a, host_a, b, host_b, tid = await _taken_over(two_stores, 1.5, Completed({"content": []}))  # renews every 0.5 s
    try:
        t0 = time.monotonic()

        async def a_stopped() -> bool:
            return host_a.cancelled and tid not in a._running

        await _until("the run on a kept going after b took its task over", a_stopped)
        assert time.monotonic() - t0 < 5.0  # a renewal period (0.5 s) and the store round trips
        assert not host_a.reported and host_a.published == []
        assert [(r.levelname, r.getMessage()) for r in caplog.records if r.name == "mcp_stateless.tasks"] == [
            ("WARNING", f"task {tid}: lease taken over by b; stopping the run here")]
        await _still_b_s(store_a, tid)  # a's cancelled run reported nothing: b's run goes on
        got = await _b_finishes_it(store_a, host_b, tid)
        assert (got.status, got.result, got.attempts) == ("completed", {**B_RESULT, "resultType": "complete"}, 2)
        assert host_b.published == [tid] and host_a.published == []
    finally:
        await a.aclose()
        await b.aclose()


@pytest.mark.parametrize("outcome", [
    Completed({"content": [{"type": "text", "text": "run by a"}]}),
    NeedsInput(ASK),
    McpError(-32603, "a failed"),
    RuntimeError("a crashed"),
], ids=["completed", "needs-input", "protocol-error", "crash"])
async def test_a_run_that_ends_after_losing_its_lease_leaves_the_task_to_the_new_owner(
        two_stores: tuple[TaskStore, TaskStore], outcome: TaskOutcome | Exception) -> None:
    # a's lease is long (no renewal for 10 s): its run ends before it could notice the takeover
    store_a, _ = two_stores
    a, host_a, b, host_b, tid = await _taken_over(two_stores, 30.0, outcome)
    try:
        host_a.gate.set()

        async def a_ended() -> bool:
            return host_a.reported and tid not in a._running

        await _until("the run on a never ended", a_ended)
        assert host_a.published == []  # nothing written, nothing announced
        await _still_b_s(store_a, tid)
        got = await _b_finishes_it(store_a, host_b, tid)
        assert (got.status, got.result, got.error) == ("completed", {**B_RESULT, "resultType": "complete"}, None)
        assert not host_b.cancelled
    finally:
        await a.aclose()
        await b.aclose()


class _SlowToAnnounceHost(ScriptHost):
    """Asks for input once, then completes; its first announcement waits until `announce` opens."""

    def __init__(self) -> None:
        super().__init__([NeedsInput(ASK), Completed({"content": []})])
        self.announce = asyncio.Event()
        self.gate = asyncio.Event()

    async def run(self, rec: TaskRecord) -> TaskOutcome:
        if len(self.ran) == 1:
            await self.gate.wait()  # the resumed run: still running when the parked one finally ends
        return await super().run(rec)

    async def publish(self, task_id: str) -> None:
        if not self.published:
            await self.announce.wait()
        await super().publish(task_id)


async def test_a_run_resumed_here_before_the_parked_run_ended_stays_known_as_running_here(
        two_stores: tuple[TaskStore, TaskStore]) -> None:
    # the parked run is still announcing its park when tasks/update (here) resumes the task in a new run;
    # the parked run ending must not make the runtime forget the new one (it would then be recovered, or
    # a cancel would not reach it)
    store, _ = two_stores
    runtime = TaskRuntime(store, instance_id="a")
    host = _SlowToAnnounceHost()
    runtime.attach(host)
    rec = _task(owner="a", lease_in=60.0)
    await store.create(rec)
    runtime.spawn(rec)
    first = runtime._running[rec.task_id]
    try:
        async def parked() -> bool:
            got = await store.get(rec.task_id)
            return got is not None and got.status == "input_required"

        await _until("the task never parked", parked)
        update = Request("r2", "tasks/update", {"taskId": rec.task_id, "inputResponses": {"ok": {"action": "accept"}}},
                         "2026-07-28", {"extensions": {EXTENSION_ID: {}}}, None, None, None)
        assert await runtime.update(update, "alice") == {"resultType": "complete"}
        second = runtime._running[rec.task_id]
        assert second is not first
        host.announce.set()
        await asyncio.wait_for(first, 10)
        assert runtime._running.get(rec.task_id) is second
        host.gate.set()
        await asyncio.wait_for(second, 10)
        assert rec.task_id not in runtime._running
        got = await store.get(rec.task_id)
        assert got is not None and got.status == "completed"
    finally:
        await runtime.aclose()
