"""The Tasks extension end to end through App.handle(): creation, polling, input, cancel, leases, TTL."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from mcp_stateless import App, Context, McpError, TaskRuntime, ToolError
from mcp_stateless.protocol import envelope
from mcp_stateless.protocol.endpoint import Call, ListenEvent
from mcp_stateless.protocol.envelope import Request
from mcp_stateless.protocol.principal import Principal
from mcp_stateless.tasks.host import Completed, NeedsInput, TaskOutcome
from mcp_stateless.tasks.model import EXTENSION_ID, TaskRecord, new_task_id
from mcp_stateless.tasks.store import MemoryTaskStore, SqliteTaskStore, TaskStore

EXT = {"extensions": {EXTENSION_ID: {}}}
EXT_ELICIT = {"elicitation": {}, **EXT}
FORM = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}


def make_app(store: TaskStore, **runtime_kw: Any) -> tuple[App, dict[str, Any]]:
    seen: dict[str, Any] = {"cancelled": 0, "runs": 0}
    app = App("tasks-test", tasks=TaskRuntime(store, poll_interval_ms=50, **runtime_kw))

    @app.tool(task="optional", retry_safe=True)
    async def slow(seconds: float) -> str:
        seen["runs"] += 1
        try:
            await asyncio.sleep(seconds)
        except asyncio.CancelledError:
            seen["cancelled"] += 1
            raise
        return f"slept {seconds}"

    @app.tool(task="required")
    async def fragile(seconds: float) -> str:
        await asyncio.sleep(seconds)
        return "fragile done"

    @app.tool(task="optional")
    def broken() -> str:
        raise ToolError("it broke")

    @app.tool(task="optional")
    async def protocol_failure() -> str:
        raise McpError(-32603, "no can do")

    @app.tool(task="optional")
    def confirm(ctx: Context) -> str:
        a = ctx.elicit("Sure?", FORM, key="sure")
        b = ctx.elicit("Really sure?", FORM, key="really")
        return f"{a.content} {b.content}"

    @app.tool(task="optional")
    def pair(ctx: Context) -> str:
        got = ctx.ask({"x": __import__("mcp_stateless").elicitation("x?", FORM),
                       "y": __import__("mcp_stateless").elicitation("y?", FORM)})
        return f"{got['x'].content['ok']} {got['y'].content['ok']}"

    return app, seen


def request(app: App, method: str, params: dict[str, Any], caps: dict[str, Any] | None = None,
            id_: int | str = 1) -> Request:
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": EXT_ELICIT if caps is None else caps}
    decision = envelope.classify({"jsonrpc": "2.0", "id": id_, "method": method,
                                  "params": {**params, "_meta": meta}}, None, app.table)
    assert isinstance(decision, Request), decision
    return decision


async def call(app: App, method: str, params: dict[str, Any], caps: dict[str, Any] | None = None,
               principal: str = "alice") -> dict[str, Any]:
    reply = await app.handle(request(app, method, params, caps), Call(Principal(principal)))
    assert reply.error_code == (reply.message["error"]["code"] if "error" in reply.message else None)
    return reply.message


async def poll(app: App, task_id: str, until: set[str], principal: str = "alice", timeout: float = 5.0
               ) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        res = (await call(app, "tasks/get", {"taskId": task_id}, principal=principal))["result"]
        if res["status"] in until:
            return res
        assert time.monotonic() < deadline, f"task stuck in {res['status']}"
        await asyncio.sleep(0.02)


async def test_create_result_is_flat_and_the_task_is_already_stored() -> None:
    store = MemoryTaskStore()
    app, _ = make_app(store)
    res = (await call(app, "tools/call", {"name": "slow", "arguments": {"seconds": 0.05}}))["result"]
    assert res["resultType"] == "task"
    assert res["status"] == "working" and res["ttlMs"] == 3_600_000 and res["pollIntervalMs"] == 50
    assert "task" not in res and "result" not in res and "requestState" not in res
    assert await store.get(res["taskId"]) is not None  # durable before the client heard of it
    done = await poll(app, res["taskId"], {"completed"})
    assert done["result"]["content"] == [{"type": "text", "text": "slept 0.05"}]
    assert done["resultType"] == "complete"


async def test_optional_task_tool_runs_synchronously_without_the_extension() -> None:
    app, _ = make_app(MemoryTaskStore())
    res = (await call(app, "tools/call", {"name": "slow", "arguments": {"seconds": 0}}, caps={}))["result"]
    assert res["resultType"] == "complete"
    assert res["content"][0]["text"] == "slept 0.0"


async def test_required_task_tool_refuses_a_client_without_the_extension() -> None:
    app, _ = make_app(MemoryTaskStore())
    res = await call(app, "tools/call", {"name": "fragile", "arguments": {"seconds": 0}}, caps={})
    assert res["error"]["code"] == -32021
    assert res["error"]["data"] == {"requiredCapabilities": {"extensions": {EXTENSION_ID: {}}}}


async def test_task_input_needs_the_capability_declared_by_the_creating_request() -> None:
    app, _ = make_app(MemoryTaskStore())
    tid = (await call(app, "tools/call", {"name": "confirm"}, caps=EXT))["result"]["taskId"]
    r = await poll(app, tid, {"failed", "input_required"})
    assert r["status"] == "failed" and r["error"]["code"] == -32021


async def test_tasks_methods_need_the_extension_on_that_request() -> None:
    app, _ = make_app(MemoryTaskStore())
    for method in ("tasks/get", "tasks/cancel"):
        res = await call(app, method, {"taskId": "x"}, caps={})
        assert res["error"]["code"] == -32021, method


async def test_tasks_result_and_list_do_not_exist() -> None:
    app, _ = make_app(MemoryTaskStore())
    for method in ("tasks/result", "tasks/list"):
        decision = envelope.classify({"jsonrpc": "2.0", "id": 9, "method": method, "params": {"_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": EXT}}}, None, app.table)
        assert isinstance(decision, envelope.Rejection)
        assert decision.status == 404 and decision.error is not None and decision.error.code == -32601


async def test_tool_error_is_completed_with_is_error_and_protocol_error_is_failed() -> None:
    app, _ = make_app(MemoryTaskStore())
    t1 = (await call(app, "tools/call", {"name": "broken"}))["result"]["taskId"]
    t2 = (await call(app, "tools/call", {"name": "protocol_failure"}))["result"]["taskId"]
    r1 = await poll(app, t1, {"completed", "failed"})
    r2 = await poll(app, t2, {"completed", "failed"})
    assert r1["status"] == "completed" and r1["result"]["isError"] is True
    assert r1["result"]["content"][0]["text"] == "it broke"
    assert r2["status"] == "failed" and r2["error"] == {"code": -32603, "message": "no can do"}
    assert "result" not in r2


async def test_cancel_stops_the_handler_and_acks_empty() -> None:
    app, seen = make_app(MemoryTaskStore())
    tid = (await call(app, "tools/call", {"name": "slow", "arguments": {"seconds": 30}}))["result"]["taskId"]
    await asyncio.sleep(0.05)
    ack = (await call(app, "tasks/cancel", {"taskId": tid}))["result"]
    assert set(ack) == {"resultType", "_meta"} and ack["resultType"] == "complete"
    res = await poll(app, tid, {"cancelled", "completed", "failed"})
    assert res["status"] == "cancelled"
    assert seen["cancelled"] == 1
    again = (await call(app, "tasks/cancel", {"taskId": tid}))["result"]  # terminal: still an ack
    assert again["resultType"] == "complete"


async def test_input_required_then_update_resumes_and_keys_are_never_reused() -> None:
    store = MemoryTaskStore()
    app, _ = make_app(store)
    tid = (await call(app, "tools/call", {"name": "confirm"}))["result"]["taskId"]
    r = await poll(app, tid, {"input_required"})
    assert list(r["inputRequests"]) == ["sure"]
    assert r["inputRequests"]["sure"]["method"] == "elicitation/create"
    await call(app, "tasks/update", {"taskId": tid, "inputResponses": {
        "sure": {"action": "accept", "content": {"ok": True}}, "bogus": {"x": 1}}})
    r = await poll(app, tid, {"input_required", "completed"})
    assert list(r["inputRequests"]) == ["really"]
    await call(app, "tasks/update", {"taskId": tid, "inputResponses": {
        "really": {"action": "accept", "content": {"ok": False}}}})
    r = await poll(app, tid, {"completed"})
    assert r["result"]["content"][0]["text"] == "{'ok': True} {'ok': False}"
    rec = await store.get(tid)
    assert rec is not None and rec.asked == ["sure", "really"]


async def test_partial_update_keeps_waiting_for_the_rest() -> None:
    app, _ = make_app(MemoryTaskStore())
    tid = (await call(app, "tools/call", {"name": "pair"}))["result"]["taskId"]
    r = await poll(app, tid, {"input_required"})
    assert sorted(r["inputRequests"]) == ["x", "y"]
    await call(app, "tasks/update", {"taskId": tid, "inputResponses": {"x": {"action": "accept",
                                                                              "content": {"ok": True}}}})
    r = (await call(app, "tasks/get", {"taskId": tid}))["result"]
    assert r["status"] == "input_required" and list(r["inputRequests"]) == ["y"]
    await call(app, "tasks/update", {"taskId": tid, "inputResponses": {"y": {"action": "accept",
                                                                              "content": {"ok": False}}}})
    assert (await poll(app, tid, {"completed"}))["result"]["content"][0]["text"] == "True False"


async def test_another_principals_task_does_not_exist() -> None:
    app, _ = make_app(MemoryTaskStore())
    tid = (await call(app, "tools/call", {"name": "slow", "arguments": {"seconds": 5}}))["result"]["taskId"]
    for method in ("tasks/get", "tasks/cancel"):
        res = await call(app, method, {"taskId": tid}, principal="mallory")
        assert res["error"]["code"] == -32602, method
    assert (await call(app, "tasks/get", {"taskId": tid}))["result"]["status"] == "working"
    await call(app, "tasks/cancel", {"taskId": tid})


async def test_unknown_and_expired_ids_are_invalid_params() -> None:
    app, _ = make_app(MemoryTaskStore(), ttl_ms=150)
    assert (await call(app, "tasks/get", {"taskId": "tsk_unknown"}))["error"]["code"] == -32602
    tid = (await call(app, "tools/call", {"name": "slow", "arguments": {"seconds": 0}}))["result"]["taskId"]
    await poll(app, tid, {"completed"})
    await asyncio.sleep(0.3)
    assert (await call(app, "tasks/get", {"taskId": tid}))["error"]["code"] == -32602


def _orphan(tool: str, args: dict[str, Any]) -> TaskRecord:
    """A task whose instance died: working, with a lease that ran out."""
    now = time.time() - 10
    return TaskRecord(new_task_id(), "alice", tool, args, {"version": "2026-07-28", "capabilities": EXT},
                      now, now, 60_000, 50, lease_owner="dead-instance", lease_until=now + 1, attempts=1)


async def test_lapsed_lease_re_runs_a_retry_safe_task_and_fails_the_others(tmp_path: Path) -> None:
    store = SqliteTaskStore(tmp_path / "t.db")
    safe, unsafe = _orphan("slow", {"seconds": 0}), _orphan("fragile", {"seconds": 0})
    await store.create(safe)
    await store.create(unsafe)
    app, seen = make_app(store, sweep_interval_s=0.05)
    await app.startup()
    try:
        r = await poll(app, safe.task_id, {"completed", "failed"})
        assert r["status"] == "completed" and seen["runs"] == 1
        r = await poll(app, unsafe.task_id, {"completed", "failed"})
        assert r["status"] == "failed"
        assert "stopped before it finished" in r["error"]["message"]
    finally:
        await app.aclose()
        await store.aclose()


async def test_task_survives_a_restart_of_the_instance(tmp_path: Path) -> None:
    path = tmp_path / "t.db"
    app1, _ = make_app(SqliteTaskStore(path))
    tid = (await call(app1, "tools/call", {"name": "confirm"}))["result"]["taskId"]
    await poll(app1, tid, {"input_required"})
    await app1.aclose()
    assert app1.tasks is not None
    await app1.tasks.store.aclose()

    app2, _ = make_app(SqliteTaskStore(path))  # a new process on the same machine
    for key, ok in (("sure", True), ("really", True)):
        await poll(app2, tid, {"input_required"})
        await call(app2, "tasks/update", {"taskId": tid, "inputResponses": {
            key: {"action": "accept", "content": {"ok": ok}}}})
    assert (await poll(app2, tid, {"completed"}))["result"]["content"][0]["text"] == "{'ok': True} {'ok': True}"
    await app2.aclose()


async def test_listen_with_task_ids_gets_notifications_tasks() -> None:
    app, _ = make_app(MemoryTaskStore())
    tid = (await call(app, "tools/call", {"name": "slow", "arguments": {"seconds": 0.1}}))["result"]["taskId"]
    stream = app.listen(request(app, "subscriptions/listen", {"notifications": {"taskIds": [tid]}}, id_="L"),
                        Call(Principal("alice")))
    ack = await anext(stream)
    assert isinstance(ack, ListenEvent) and ack.message["params"]["notifications"] == {"taskIds": [tid]}
    item = await asyncio.wait_for(anext(stream), 5)
    assert isinstance(item, ListenEvent) and item.message["method"] == "notifications/tasks"
    msg = item.message
    assert msg["params"]["taskId"] == tid and msg["params"]["status"] == "completed"
    assert msg["params"]["_meta"] == {"io.modelcontextprotocol/subscriptionId": "L"}
    await stream.aclose()


async def test_task_ids_subscription_needs_the_extension() -> None:
    app, _ = make_app(MemoryTaskStore())
    stream = app.listen(request(app, "subscriptions/listen", {"notifications": {"taskIds": ["x"]}}, caps={}))
    with pytest.raises(McpError) as exc:
        await anext(stream)
    assert exc.value.code == -32021


@pytest.mark.slow
async def test_redis_outage_is_a_clear_error_not_a_hang_and_recovers(tmp_path: Path) -> None:
    from mcp_stateless.tasks.store import RedisTaskStore
    from services import RedisServer

    redis = RedisServer(tmp_path).start()
    store = RedisTaskStore(redis.url, timeout_s=0.5)
    app, _ = make_app(store)
    try:
        tid = (await call(app, "tools/call", {"name": "confirm"}))["result"]["taskId"]
        await poll(app, tid, {"input_required"})
        redis.stop()
        t0 = time.monotonic()
        res = await call(app, "tasks/get", {"taskId": tid})
        assert time.monotonic() - t0 < 3
        assert res["error"]["code"] == -32603
        assert "unavailable" in res["error"]["message"]
        redis.start()  # the data is gone with this redis (no persistence): the id is then unknown
        res = await call(app, "tasks/get", {"taskId": tid})
        assert res["error"]["code"] == -32602
        created = await call(app, "tools/call", {"name": "slow", "arguments": {"seconds": 0}})
        assert created["result"]["resultType"] == "task"
    finally:
        await app.aclose()
        await store.aclose()
        redis.stop()


class ScriptHost:
    """A `ToolHost` with no App behind it: the runtime needs nothing else of the server."""

    def __init__(self, outcomes: list[TaskOutcome]) -> None:
        self.outcomes = outcomes
        self.ran: list[tuple[str, dict[str, Any]]] = []
        self.published: list[str] = []

    def retry_safe(self, tool: str) -> bool:
        return False

    async def run(self, rec: TaskRecord) -> TaskOutcome:
        self.ran.append((rec.tool, dict(rec.answers)))
        return self.outcomes.pop(0)

    async def publish(self, task_id: str) -> None:
        self.published.append(task_id)


async def test_the_runtime_runs_tasks_through_any_tool_host() -> None:
    store = MemoryTaskStore()
    runtime = TaskRuntime(store)
    asked = {"ok": {"method": "elicitation/create", "params": {"mode": "form", "message": "ok?",
                                                               "requestedSchema": {"type": "object"}}}}
    host = ScriptHost([NeedsInput(asked), Completed({"content": [{"type": "text", "text": "done"}]})])
    runtime.attach(host)
    req = Request("r1", "tools/call", {"name": "t", "arguments": {}}, "2026-07-28", {"extensions": {EXTENSION_ID: {}}},
                  None, None, None)
    rec = runtime.new_record("t", req, "alice", {}, {})
    created = await runtime.create(rec)
    assert created["resultType"] == "task" and created["taskId"] == rec.task_id
    runtime.spawn(rec)
    deadline = time.monotonic() + 5
    while (got := await store.get(rec.task_id)) is None or got.status != "input_required":
        assert time.monotonic() < deadline
        await asyncio.sleep(0.01)
    assert got.input_requests == asked
    update = Request("r2", "tasks/update", {"taskId": rec.task_id, "inputResponses": {"ok": {"action": "accept"}}},
                     "2026-07-28", {"extensions": {EXTENSION_ID: {}}}, None, None, None)
    assert await runtime.update(update, "alice") == {"resultType": "complete"}
    while (got := await store.get(rec.task_id)) is None or got.status != "completed":
        assert time.monotonic() < deadline
        await asyncio.sleep(0.01)
    assert got.result == {"content": [{"type": "text", "text": "done"}], "resultType": "complete"}
    assert host.ran == [("t", {}), ("t", {"ok": {"action": "accept"}})]
    assert host.published == [rec.task_id, rec.task_id]
    await runtime.aclose()


@pytest.mark.slow
async def test_malformed_answer_is_refused_and_the_task_keeps_waiting(store: TaskStore) -> None:
    # on every engine (memory, SQLite, the real Redis): the record is never written with a malformed answer
    app, _ = make_app(store)
    tid = (await call(app, "tools/call", {"name": "confirm"}))["result"]["taskId"]
    await poll(app, tid, {"input_required"})
    for bad in ({"action": "maybe"}, {"action": "accept", "content": "yes"}, {}):
        msg = await call(app, "tasks/update", {"taskId": tid, "inputResponses": {"sure": bad}})
        assert msg["error"]["code"] == -32602
        assert msg["error"]["message"] == "inputResponses['sure'] is not a valid elicitation/create result"
        assert msg["error"]["data"] == {"taskId": tid, "key": "sure"}
        r = (await call(app, "tasks/get", {"taskId": tid}))["result"]
        assert r["status"] == "input_required" and list(r["inputRequests"]) == ["sure"]
    rec = await store.get(tid)
    assert rec is not None and rec.answers == {} and rec.status == "input_required"
    # a malformed answer to a key that is not pending ("really" is not asked yet) is ignored like any unknown key
    msg = await call(app, "tasks/update", {"taskId": tid, "inputResponses": {
        "sure": {"action": "accept", "content": {"ok": True}}, "really": {"action": "maybe"}}})
    assert msg["result"]["resultType"] == "complete"
    r = await poll(app, tid, {"input_required"})
    assert list(r["inputRequests"]) == ["really"]
    msg = await call(app, "tasks/update", {"taskId": tid, "inputResponses": {"really": {"action": "maybe"}}})
    assert msg["error"]["code"] == -32602
    await call(app, "tasks/update", {"taskId": tid, "inputResponses": {
        "really": {"action": "decline"}}})
    r = await poll(app, tid, {"completed", "failed"})
    assert r["status"] == "completed" and r["result"]["content"][0]["text"] == "{'ok': True} None"
