"""Compare-and-set races across instances on the shared engines (real SQLite file, real Redis): a task's
side effects (running its handler) happen exactly as often as the committed record says, however many
concurrent requests raced to cause them."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from mcp_stateless import App, Context, TaskRuntime
from mcp_stateless.state import open_state
from mcp_stateless.tasks.model import TaskRecord, new_task_id
from services import RedisServer

from .test_runtime import EXT, FORM, call, poll

# Every test here starts a process (a server, a client, a tool): the fast lane leaves them out.
pytestmark = pytest.mark.slow

UPDATES = 8  # concurrent tasks/update calls carrying the same final answer
TRIALS = 4


@pytest.fixture(params=["sqlite", "redis"])
def shared_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'state.db'}"
    server: RedisServer = request.getfixturevalue("redis_server")
    return server.isolated_url()


class Instances:
    """Several Apps (instances) on one state URL, as a cluster would run them, counting tool runs."""

    def __init__(self, url: str, n: int, **runtime_kw: Any) -> None:
        self.runs: dict[str, int] = {}
        self._lock = threading.Lock()  # sync tools run in worker threads: count without losing any
        self.apps = [self._build(url, f"i{i}", runtime_kw) for i in range(n)]

    def ran(self, ctx: Context) -> None:
        with self._lock:
            self.runs[ctx.task_id or ""] = self.runs.get(ctx.task_id or "", 0) + 1

    def _build(self, url: str, name: str, runtime_kw: dict[str, Any]) -> App:
        app = App("races", tasks=TaskRuntime(instance_id=name, poll_interval_ms=20, **runtime_kw))
        app.use_state(open_state(url))

        @app.tool(task="optional")
        def deploy(ctx: Context) -> str:
            answer = ctx.elicit("Deploy?", FORM, key="go")
            self.ran(ctx)  # past the question: counts executions with the answer
            return f"deployed={answer.content}"

        @app.tool(task="optional", retry_safe=True)
        async def reindex(ctx: Context, seconds: float) -> str:
            self.ran(ctx)
            await asyncio.sleep(seconds)
            return "reindexed"

        return app

    async def aclose(self) -> None:
        for app in self.apps:
            await app.aclose()
            assert app.state is not None
            await app.state.aclose()


@pytest.fixture
async def two_instances(shared_url: str) -> AsyncIterator[Instances]:
    inst = Instances(shared_url, 2)
    yield inst
    await inst.aclose()


async def test_concurrent_updates_with_the_same_final_answer_resume_the_task_once(two_instances: Instances) -> None:
    a, b = two_instances.apps
    answer = {"go": {"action": "accept", "content": {"ok": True}}}
    for _ in range(TRIALS):
        tid = (await call(a, "tools/call", {"name": "deploy"}))["result"]["taskId"]
        await poll(a, tid, {"input_required"})
        acks = await asyncio.gather(*(call(a if i % 2 else b, "tasks/update", {"taskId": tid, "inputResponses": answer})
                                      for i in range(UPDATES)))
        assert [ack["result"]["resultType"] for ack in acks] == ["complete"] * UPDATES
        done = await poll(b, tid, {"completed", "failed"})
        assert done["status"] == "completed"
        assert done["result"]["content"][0]["text"] == "deployed={'ok': True}"
        await asyncio.sleep(0.2)  # a second runner, if any, would have got past the question by now
        assert two_instances.runs[tid] == 1


def _orphan(attempts: int) -> TaskRecord:
    """A retry-safe task whose instance died: working, its lease lapsed a moment ago."""
    now = time.time()
    meta = {"version": "2026-07-28", "capabilities": EXT}
    return TaskRecord(new_task_id(), "alice", "reindex", {"seconds": 30}, meta, now - 10, now - 10, 60_000, 20,
                      lease_owner="dead-instance", lease_until=now - 0.01, attempts=attempts)


async def _runner_of(instances: list[App], tid: str, timeout: float = 5.0) -> App:
    deadline = time.monotonic() + timeout
    while True:
        owners = [app for app in instances if app.tasks is not None and tid in app.tasks._running]
        if owners:
            assert len(owners) == 1, "two instances run the same task"
            return owners[0]
        assert time.monotonic() < deadline, "no instance re-ran the task"
        await asyncio.sleep(0.01)


async def test_a_lapsed_lease_is_rerun_once_per_lapse_and_at_most_max_attempts_in_total(shared_url: str) -> None:
    inst = Instances(shared_url, 3, max_attempts=3, lease_s=30.0)
    try:
        alive = list(inst.apps)
        orphan = _orphan(attempts=1)
        assert alive[0].tasks is not None
        await alive[0].tasks.store.create(orphan)
        tid = orphan.task_id
        for rerun in (1, 2):
            # every surviving instance polls at once while the lease is lapsed
            await asyncio.gather(*(call(app, "tasks/get", {"taskId": tid}) for app in alive for _ in range(4)))
            runner = await _runner_of(alive, tid)
            await asyncio.sleep(0.1)
            assert inst.runs[tid] == rerun  # exactly one re-run for this lapsed lease
            rec = (await call(runner, "tasks/get", {"taskId": tid}))["result"]
            assert rec["status"] == "working"
            assert rec["statusMessage"] == f"re-running after a lost instance (attempt {rerun + 1})"
            alive.remove(runner)
            await runner.aclose()  # the runner's instance goes away: it hands the lease back at once
        # the third attempt was the last: the next instance to notice fails the task instead
        results = await asyncio.gather(*(call(app, "tasks/get", {"taskId": tid}) for _ in range(4) for app in alive))
        assert {r["result"]["status"] for r in results} <= {"working", "failed"}
        # tasks/get recovers inline: once every poll was answered, the record is failed at its third attempt
        # (a value beside the deadline below, so a fourth attempt fails here by what it is, not by a timeout)
        assert alive[0].tasks is not None
        stored = await alive[0].tasks.store.get(tid)
        assert stored is not None and (stored.status, stored.attempts) == ("failed", 3), stored
        final = await poll(alive[0], tid, {"failed"})
        assert "stopped before it finished" in final["error"]["message"]
        await asyncio.sleep(0.1)
        assert inst.runs[tid] == 2  # attempts 2 and 3: the limit of 3 attempts in total, counting the lost one
    finally:
        await inst.aclose()
