"""Lease edges the end-to-end tests do not reach (found by mutation testing, docs/mutation.md): recovering
a lapsed task whose cancellation was asked for, recovery and release leaving other tasks' records alone
(not even rewritten), a failed or released task holding no lease, a release during a store outage, and a
retry-safe task's re-run read as values (its attempt count, message and lease) up to and at max_attempts."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import pytest

from mcp_stateless.state.base import StateUnavailable
from mcp_stateless.state.memory import MemoryRecords
from mcp_stateless.tasks.host import Completed, TaskOutcome
from mcp_stateless.tasks.model import TaskRecord, new_task_id
from mcp_stateless.tasks.runtime import LOST_RUNNER, TaskRuntime
from mcp_stateless.tasks.store import NAMESPACE, TaskStore

from .test_runtime import EXT, ScriptHost


def _task(status: str = "working", owner: str | None = "dead-instance", lease_in: float = -5.0) -> TaskRecord:
    now = time.time()
    rec = TaskRecord(new_task_id(), "alice", "slow", {}, {"version": "2026-07-28", "capabilities": EXT},
                     now, now, 60_000, 50, lease_owner=owner, lease_until=now + lease_in, attempts=1)
    rec.status = status  # type: ignore[assignment]
    return rec


def _runtime(store: TaskStore) -> tuple[TaskRuntime, ScriptHost]:
    runtime = TaskRuntime(store, instance_id="me")
    host = ScriptHost([])  # not retry-safe: a lapsed task is failed, never re-run
    runtime.attach(host)
    return runtime, host


async def _version(store: TaskStore, tid: str) -> int:
    got = await store.records.get(NAMESPACE, tid)
    assert got is not None
    return got.version


async def test_a_lapsed_task_whose_cancel_was_asked_for_is_recovered_as_cancelled(store: TaskStore) -> None:
    runtime, host = _runtime(store)
    rec = _task()
    rec.cancel_requested = True
    await store.create(rec)
    got = await runtime._recover(rec.task_id)
    assert got is not None
    assert got.task_fields()["status"] == "cancelled"
    assert got.task_fields()["statusMessage"] == "Cancelled by the client"
    assert (got.attempts, host.ran, host.published) == (1, [], [rec.task_id])  # not re-run; announced once
    stored = await store.get(rec.task_id)
    assert stored is not None and (stored.status, stored.status_message) == ("cancelled", "Cancelled by the client")


async def test_a_lapsed_task_that_is_failed_holds_no_lease_and_is_announced_by_id(store: TaskStore) -> None:
    runtime, host = _runtime(store)
    rec = _task()
    await store.create(rec)
    got = await runtime._recover(rec.task_id)
    assert got is not None and got.status == "failed"
    stored = await store.get(rec.task_id)
    assert stored is not None and stored.status == "failed" and stored.lease_until == 0.0
    assert host.published == [rec.task_id]


@pytest.mark.parametrize("status,lease_in", [("working", 60.0), ("completed", -5.0), ("input_required", -5.0)])
async def test_recovering_a_task_with_a_live_lease_or_not_working_writes_nothing(
        store: TaskStore, status: str, lease_in: float) -> None:
    runtime, host = _runtime(store)
    rec = _task(status=status, lease_in=lease_in)
    await store.create(rec)
    before = await _version(store, rec.task_id)
    got = await runtime._recover(rec.task_id)
    assert got is not None and got.status == status and got.lease_owner == "dead-instance"
    assert await _version(store, rec.task_id) == before  # not even rewritten unchanged
    assert host.published == []


async def test_releasing_hands_back_only_this_instances_own_live_lease(store: TaskStore) -> None:
    runtime, _ = _runtime(store)
    mine = _task(owner="me", lease_in=60.0)
    theirs = _task(owner="other", lease_in=60.0)
    finished = _task(status="completed", owner="me", lease_in=60.0)
    for rec in (mine, theirs, finished):
        await store.create(rec)
    versions = {r.task_id: await _version(store, r.task_id) for r in (theirs, finished)}
    for rec in (mine, theirs, finished):
        await runtime._release(rec.task_id)
    got = await store.get(mine.task_id)
    assert got is not None and got.lease_until == 0.0 and got.status == "working"  # due at once for any sweep
    assert await store.lapsed(time.time()) == [mine.task_id]
    for rec in (theirs, finished):
        assert await _version(store, rec.task_id) == versions[rec.task_id]  # untouched, not rewritten
        other = await store.get(rec.task_id)
        assert other is not None and other.lease_until == rec.lease_until


class _RetrySafeHost(ScriptHost):
    def retry_safe(self, tool: str) -> bool:
        return True


RERUN_LEASE_S = 30.0  # long: the re-run's lease is read as a value, never outlived


@pytest.mark.parametrize("attempts", [1, 2])
async def test_a_lapsed_retry_safe_task_is_rerun_here_as_its_next_attempt(store: TaskStore, attempts: int) -> None:
    """Below max_attempts (3): the instance that recovers it takes the lease for a full lease, counts one more
    attempt, says so, and runs the tool again, once. Values, not a deadline: a count that stood still or a
    lease timed wrong fails here, not only as a re-run that never came."""
    runtime = TaskRuntime(store, instance_id="me", lease_s=RERUN_LEASE_S, max_attempts=3)
    host = _RetrySafeHost([Completed({"content": []})])
    runtime.attach(host)
    rec = _task()
    rec.attempts = attempts
    await store.create(rec)
    before = time.time()
    got = await runtime._recover(rec.task_id)
    after = time.time()
    try:
        assert got is not None
        message = f"re-running after a lost instance (attempt {attempts + 1})"
        assert (got.status, got.attempts, got.lease_owner, got.status_message) == (
            "working", attempts + 1, "me", message)
        assert before + RERUN_LEASE_S <= got.lease_until <= after + RERUN_LEASE_S
        stored = await store.get(rec.task_id)
        assert stored is not None
        assert (stored.attempts, stored.lease_owner, stored.lease_until) == (attempts + 1, "me", got.lease_until)

        async def done() -> bool:
            final = await store.get(rec.task_id)
            return final is not None and final.terminal

        await _until("the re-run never finished", done)
        final = await store.get(rec.task_id)
        assert final is not None and (final.status, final.attempts) == ("completed", attempts + 1)
        assert host.ran == [("slow", {})]  # run again here, exactly once
    finally:
        await runtime.aclose()


async def test_a_lapsed_retry_safe_task_at_its_last_attempt_is_failed_not_rerun(store: TaskStore) -> None:
    runtime = TaskRuntime(store, instance_id="me", lease_s=RERUN_LEASE_S, max_attempts=3)
    host = _RetrySafeHost([])
    runtime.attach(host)
    rec = _task()
    rec.attempts = 3
    await store.create(rec)
    got = await runtime._recover(rec.task_id)
    assert got is not None
    assert (got.status, got.attempts, got.error, got.lease_until) == ("failed", 3, LOST_RUNNER, 0.0)
    assert (host.ran, host.published, runtime.running) == ([], [rec.task_id], 0)


class _DownRecords(MemoryRecords):
    """A record store whose backend has gone away."""

    async def get(self, ns: str, key: str) -> Any:
        raise StateUnavailable("test engine", "connection refused")


async def test_releasing_during_a_store_outage_does_not_raise() -> None:
    # aclose() releases leases from cancelled runners; an outage then must not turn into a crash there
    runtime, _ = _runtime(TaskStore(_DownRecords()))
    await runtime._release("any-task")


class _SleepHost(ScriptHost):
    """Runs every task for `seconds`, noting the record's version just before it finishes."""

    def __init__(self, store: TaskStore, seconds: float) -> None:
        super().__init__([])
        self.store, self.seconds = store, seconds
        self.version_at_end = 0
        self.cancelled = False

    async def run(self, rec: TaskRecord) -> TaskOutcome:
        try:
            await asyncio.sleep(self.seconds)
        except asyncio.CancelledError:
            self.cancelled = True
            raise
        self.version_at_end = await _version(self.store, rec.task_id)
        return Completed({"content": []})


LEASE_S = 0.3  # renewed every 0.1 s


async def _started(store: TaskStore, seconds: float) -> tuple[TaskRuntime, _SleepHost, str]:
    runtime = TaskRuntime(store, instance_id="me", lease_s=LEASE_S)
    host = _SleepHost(store, seconds)
    runtime.attach(host)
    rec = _task(owner="me", lease_in=LEASE_S)
    await store.create(rec)
    runtime.spawn(rec)
    return runtime, host, rec.task_id


async def test_a_running_task_keeps_its_lease_alive_every_third_of_it_and_no_other_instance_takes_it(
        store: TaskStore) -> None:
    runs = 1.2  # four leases long
    runtime, host, tid = await _started(store, runs)
    rival = TaskRuntime(store, instance_id="rival", lease_s=LEASE_S, sweep_interval_s=0.02)
    rival.attach(ScriptHost([]))  # would fail the task (not retry-safe) the moment its lease lapsed
    rival.ensure_started()
    start_version = await _version(store, tid)
    try:
        deadline = time.monotonic() + 10
        while (got := await store.get(tid)) is None or not got.terminal:
            assert time.monotonic() < deadline
            assert got is not None and got.lease_owner == "me"
            # never lapsed by more than a renewal period, and never more than one lease ahead: a renewal
            # that extended the old deadline instead of now would push a dead runner's recovery far out
            assert time.time() - LEASE_S / 3 < got.lease_until <= time.time() + LEASE_S
            await asyncio.sleep(0.02)
    finally:
        await rival.aclose()
        await runtime.aclose()
    assert (got.status, got.attempts, got.result) == ("completed", 1, {"content": [], "resultType": "complete"})
    renewals = host.version_at_end - start_version
    # a renewal at most every lease_s/3 (sleeps are never shorter), and at least one per lease
    assert runs / LEASE_S <= renewals <= runs / (LEASE_S / 3) + 1


async def test_renewal_leaves_a_lease_another_instance_holds_alone(store: TaskStore) -> None:
    runtime, _, tid = await _started(store, 2.0)
    try:
        await asyncio.sleep(0.05)
        until = time.time() + 60

        def steal(r: TaskRecord) -> bool:
            r.lease_owner, r.lease_until = "other", until
            return True

        assert await store.update(tid, steal) is not None
        before = await _version(store, tid)
        await asyncio.sleep(LEASE_S + 0.05)  # three renewal periods
        got = await store.get(tid)
        assert got is not None and (got.lease_owner, got.lease_until) == ("other", until)
        assert await _version(store, tid) == before  # not even rewritten unchanged
    finally:
        await runtime.aclose()


async def _until(what: str, check: Any, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not await check():
        assert time.monotonic() < deadline, what
        await asyncio.sleep(0.02)


async def test_a_cancel_asked_on_another_instance_stops_the_runner_here_at_the_next_renewal(
        store: TaskStore) -> None:
    runtime, host, tid = await _started(store, 30.0)
    try:
        def ask(r: TaskRecord) -> bool:
            r.cancel_requested = True
            return True

        assert await store.update(tid, ask) is not None
        t0 = time.monotonic()

        async def cancelled() -> bool:
            got = await store.get(tid)
            return got is not None and got.status == "cancelled"

        await _until("the runner was never stopped", cancelled)
        assert time.monotonic() - t0 < 2.0  # a renewal period (0.1 s), not the 30 s run
        got = await store.get(tid)
        assert got is not None and got.status_message == "Cancelled by the client" and host.cancelled
    finally:
        await runtime.aclose()


async def test_a_task_finished_elsewhere_or_gone_stops_the_runner_here(store: TaskStore) -> None:
    runtime, host, tid = await _started(store, 30.0)
    other_runtime, other_host, other_tid = await _started(store, 30.0)
    try:
        def fail(r: TaskRecord) -> bool:
            r.lease_owner, r.lease_until = None, 0.0
            r.touch("failed")
            return True

        assert await store.update(tid, fail) is not None
        assert await store.records.delete(NAMESPACE, other_tid)

        async def both_stopped() -> bool:
            return host.cancelled and other_host.cancelled

        await _until("a runner kept running a task that is over", both_stopped)
        got = await store.get(tid)
        assert got is not None and got.status == "failed"  # what the other instance decided stands
        assert await store.get(other_tid) is None
    finally:
        await runtime.aclose()
        await other_runtime.aclose()


class _FlakyRecords(MemoryRecords):
    """A record store whose backend can be switched off and on."""

    down = False

    async def get(self, ns: str, key: str) -> Any:
        if self.down:
            raise StateUnavailable("test engine", "connection refused")
        return await super().get(ns, key)


async def test_renewal_outlives_a_store_outage() -> None:
    records = _FlakyRecords()
    store = TaskStore(records)
    runtime, host, tid = await _started(store, 30.0)
    try:
        await asyncio.sleep(0.05)
        records.down = True
        await asyncio.sleep(0.25)  # two renewals fail
        records.down = False
        await asyncio.sleep(LEASE_S + 0.1)  # longer than a lease: only renewals since the outage keep it
        got = await store.get(tid)
        assert got is not None and got.status == "working" and got.lease_until > time.time()
        assert not host.cancelled
    finally:
        await runtime.aclose()


class _CountingStore(TaskStore):
    """A task store that counts the sweeper's scans and can fail them."""

    def __init__(self) -> None:
        super().__init__(MemoryRecords())
        self.scans = 0
        self.fail_with: Exception | None = None

    async def lapsed(self, now: float, limit: int = 100) -> list[str]:
        self.scans += 1
        if self.fail_with is not None:
            raise self.fail_with
        return await super().lapsed(now, limit)


def _sweeping(store: TaskStore, interval: float) -> tuple[TaskRuntime, ScriptHost]:
    runtime = TaskRuntime(store, instance_id="me", sweep_interval_s=interval)
    host = ScriptHost([])
    runtime.attach(host)
    runtime.ensure_started()
    return runtime, host


async def test_the_sweeper_alone_recovers_a_lapsed_task(store: TaskStore) -> None:
    # nothing asks tasks/get (which recovers by itself): only the sweep can notice the lapsed lease
    orphan = _task()
    await store.create(orphan)
    runtime, host = _sweeping(store, 0.02)
    try:
        async def failed() -> bool:
            got = await store.get(orphan.task_id)
            return got is not None and got.status == "failed"

        await _until("the sweeper never recovered the lapsed task", failed)
        assert host.published == [orphan.task_id]
    finally:
        await runtime.aclose()


async def test_the_sweeper_leaves_a_task_running_here_alone_even_if_its_lease_looks_lapsed(
        store: TaskStore) -> None:
    runtime = TaskRuntime(store, instance_id="me", lease_s=30.0, sweep_interval_s=0.02)  # no renewal soon
    host = _SleepHost(store, 0.4)
    runtime.attach(host)
    rec = _task(owner="me", lease_in=-5.0)
    await store.create(rec)
    runtime.spawn(rec)
    runtime.ensure_started()
    try:
        async def over() -> bool:
            got = await store.get(rec.task_id)
            return got is not None and got.terminal

        await _until("the task never finished", over)
        got = await store.get(rec.task_id)
        assert got is not None and (got.status, got.attempts) == ("completed", 1)
    finally:
        await runtime.aclose()


async def test_the_sweeper_scans_once_per_interval() -> None:
    store = _CountingStore()
    runtime, _ = _sweeping(store, 0.1)
    await asyncio.sleep(0.35)
    await runtime.aclose()
    assert 2 <= store.scans <= 5  # 0.35 s / 0.1 s, never more (sleeps are never shorter)


async def test_the_sweeper_logs_a_store_outage_or_a_failure_and_keeps_sweeping(
        caplog: pytest.LogCaptureFixture) -> None:
    store = _CountingStore()
    orphan = _task()
    await store.create(orphan)
    outage = StateUnavailable("test engine", "connection refused")
    store.fail_with = outage
    caplog.set_level(logging.WARNING, logger="mcp_stateless.tasks")
    runtime, _ = _sweeping(store, 0.02)
    try:
        await _until("no scan", lambda: _true_after(lambda: store.scans >= 2))
        store.fail_with = RuntimeError("a bug")
        start = store.scans
        await _until("no scan", lambda: _true_after(lambda: store.scans >= start + 2))
        store.fail_with = None

        async def failed() -> bool:
            got = await store.get(orphan.task_id)
            return got is not None and got.status == "failed"

        await _until("the sweeper stopped after the errors", failed)
    finally:
        await runtime.aclose()
    texts = [(r.levelname, r.getMessage()) for r in caplog.records if r.name == "mcp_stateless.tasks"]
    warned = f"task sweep paused until the state store is reachable (readiness reports it too): {outage}"
    assert texts.count(("WARNING", warned)) == 1  # one warning for the outage, however many sweeps it lasted
    assert ("ERROR", "task sweep failed") in texts
    crash = next(r for r in caplog.records if r.getMessage() == "task sweep failed")
    assert crash.exc_info is not None and isinstance(crash.exc_info[1], RuntimeError)


async def _true_after(check: Any) -> bool:
    return bool(check())


class _StubbornHost(ScriptHost):
    """A tool that ignores the first cancellation and keeps working for `seconds`."""

    def __init__(self, seconds: float) -> None:
        super().__init__([])
        self.seconds = seconds
        self.ignored = False

    async def run(self, rec: TaskRecord) -> TaskOutcome:
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            self.ignored = True
        await asyncio.sleep(self.seconds)
        return Completed({"content": []})


async def test_closing_waits_two_seconds_at_most_for_a_runner_that_ignores_cancellation() -> None:
    store = TaskStore(MemoryRecords())
    runtime = TaskRuntime(store, instance_id="me")
    host = _StubbornHost(10.0)
    runtime.attach(host)
    rec = _task(owner="me", lease_in=60.0)
    await store.create(rec)
    runtime.spawn(rec)
    await asyncio.sleep(0.05)
    t0 = time.monotonic()
    await runtime.aclose()
    waited = time.monotonic() - t0
    stuck = list(runtime._running.values())
    for t in stuck:
        t.cancel()
    await asyncio.gather(*stuck, return_exceptions=True)
    assert host.ignored and stuck  # it was still running when aclose gave up on it
    assert 1.9 <= waited < 2.9
