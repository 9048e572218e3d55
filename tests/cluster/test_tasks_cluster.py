"""The Tasks extension across instances behind nginx (round-robin, no affinity), on SQLite and on Redis:
a task is polled, fed input and cancelled through other instances; it survives a restart of every
instance; a task whose instance is killed is re-run (retry-safe tools) or failed within the lease time."""

from __future__ import annotations

import asyncio
import signal
import time
from typing import Any

import pytest
from clusterlib import PV, Cluster  # type: ignore[import-not-found]

from mcp_stateless.state import open_state
from mcp_stateless.tasks.store import TaskStore

# Every test here starts a process (a server, a client, a tool): the fast lane leaves them out.
pytestmark = pytest.mark.slow

EXT = {"extensions": {"io.modelcontextprotocol/tasks": {}}, "elicitation": {}}
TERMINAL = {"completed", "failed", "cancelled"}


def rpc(c: Cluster, method: str, params: dict[str, Any], who: str = "alice") -> tuple[dict[str, Any], str]:
    """One request through nginx: (the result, the instance that answered)."""
    p = {**params, "_meta": {"io.modelcontextprotocol/protocolVersion": PV,
                             "io.modelcontextprotocol/clientCapabilities": EXT}}
    headers = {"content-type": "application/json", "accept": "application/json, text/event-stream",
               "mcp-protocol-version": PV, "mcp-method": method, "authorization": f"Bearer {who}"}
    name = params.get("name") if method == "tools/call" else params.get("taskId")
    if name is not None:
        headers["mcp-name"] = name
    r = c.http.post(c.url, json={"jsonrpc": "2.0", "id": 1, "method": method, "params": p}, headers=headers)
    assert r.status_code == 200, r.text
    body = r.json()
    assert "result" in body, body
    return body["result"], r.headers["x-mcp-instance"]


def start(c: Cluster, tool: str, args: dict[str, Any]) -> tuple[str, str]:
    res, inst = rpc(c, "tools/call", {"name": tool, "arguments": args})
    assert res["resultType"] == "task", res
    return res["taskId"], inst


def poll(c: Cluster, tid: str, until: set[str], timeout: float, seen: set[str] | None = None) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        res, inst = rpc(c, "tasks/get", {"taskId": tid})
        if seen is not None:
            seen.add(inst)
        if res["status"] in until:
            return res
        assert time.monotonic() < deadline, f"task {tid} still {res['status']} after {timeout}s"
        time.sleep(0.05)


def test_polled_fed_and_cancelled_through_other_instances(cluster: Cluster) -> None:
    tid, creator = start(cluster, "approve", {"item": "laptop"})
    seen = {creator}
    task = poll(cluster, tid, {"input_required"}, 10, seen)
    assert list(task["inputRequests"]) == ["approve"]
    _, updater = rpc(cluster, "tasks/update", {"taskId": tid, "inputResponses": {
        "approve": {"action": "accept", "content": {"ok": True}}}})
    seen.add(updater)
    done = poll(cluster, tid, TERMINAL, 10, seen)
    assert done["status"] == "completed"
    assert done["result"]["content"] == [{"type": "text", "text": "laptop: approved"}]
    assert len(seen) >= 2, f"every request landed on {seen}"

    tid, creator = start(cluster, "long_job", {"seconds": 60})
    ack, canceller = rpc(cluster, "tasks/cancel", {"taskId": tid})
    assert ack["resultType"] == "complete"
    assert canceller != creator  # round-robin: the cancel reached another instance than the runner
    assert poll(cluster, tid, TERMINAL, 10)["status"] == "cancelled"


def test_another_principal_cannot_see_the_task(cluster: Cluster) -> None:
    tid, _ = start(cluster, "approve", {"item": "secret"})
    for _ in range(3):  # whichever instance answers
        p = {"taskId": tid, "_meta": {"io.modelcontextprotocol/protocolVersion": PV,
                                      "io.modelcontextprotocol/clientCapabilities": EXT}}
        r = cluster.http.post(cluster.url, json={"jsonrpc": "2.0", "id": 5, "method": "tasks/get", "params": p},
                              headers={"content-type": "application/json", "mcp-protocol-version": PV,
                                       "accept": "application/json, text/event-stream", "mcp-method": "tasks/get",
                                       "mcp-name": tid, "authorization": "Bearer mallory"})
        assert r.status_code == 400 and r.json()["error"]["code"] == -32602
    rpc(cluster, "tasks/cancel", {"taskId": tid})


def test_task_keeps_its_state_across_a_restart_of_every_instance(cluster: Cluster) -> None:
    tid, _ = start(cluster, "approve", {"item": "desk"})
    poll(cluster, tid, {"input_required"}, 10)
    cluster.restart_all()
    task = poll(cluster, tid, {"input_required"}, 10)
    assert list(task["inputRequests"]) == ["approve"]
    rpc(cluster, "tasks/update", {"taskId": tid, "inputResponses": {
        "approve": {"action": "accept", "content": {"ok": False}}}})
    done = poll(cluster, tid, TERMINAL, 10)
    assert done["result"]["content"] == [{"type": "text", "text": "desk: rejected"}]


LEASE_S, SWEEP_S, POLL_S = 1.5, 0.25, 0.05  # cluster_app's TaskRuntime, and how often this test polls
LATENCY_S = 1.0  # a few requests through nginx on a loaded machine


def lease_end(c: Cluster, tid: str) -> float:
    """When the task's stored lease ends (wall clock), read from the shared store itself."""
    async def read() -> float:
        bundle = open_state(c.instances[0].state)
        try:
            rec = await bundle.typed_store(TaskStore).get(tid)
        finally:
            await bundle.aclose()
        assert rec is not None and rec.status == "working", rec
        return rec.lease_until

    return asyncio.run(read())


def test_killed_instance_task_is_re_run_or_failed_within_the_lease(cluster: Cluster) -> None:
    # Measured from the moment the dead instance's lease ends (not from the kill, and not including the
    # victim's restart): the task is taken over no earlier than that and within a sweep after it; a re-run
    # then takes the tool's whole run again.
    by_name = {i.name: i for i in cluster.instances}
    for tool, expect in (("long_job", "completed"), ("fragile_job", "failed")):
        tid, runner = start(cluster, tool, {"seconds": 2})
        time.sleep(0.3)
        victim = by_name[runner]
        victim.stop(signal.SIGKILL)
        try:
            lapse = lease_end(cluster, tid)  # nothing renews it any more
            seen: list[tuple[float, float, str, str]] = []  # (sent, answered, status, statusMessage)
            deadline = time.monotonic() + 10
            while not seen or seen[-1][2] not in TERMINAL:
                assert time.monotonic() < deadline, seen[-1:]
                sent = time.time()
                res, _ = rpc(cluster, "tasks/get", {"taskId": tid})
                seen.append((sent, time.time(), res["status"], res.get("statusMessage", "")))
                time.sleep(POLL_S)
            done = res
        finally:
            victim.start().wait()
        assert done["status"] == expect, done
        first = seen[0][3]
        taken = next(i for i, s in enumerate(seen) if s[2:] != ("working", first))  # first poll after takeover
        assert taken > 0, seen[0]  # the first poll, right after the kill, still saw the victim's run
        # taken over after the lease ended (a poll answered before then saw the victim's run) ...
        assert seen[taken][1] >= lapse, (seen[taken], lapse)
        # ... and within a sweep (or this poll's own tasks/get) of it
        assert seen[taken][0] - lapse <= SWEEP_S + POLL_S + LATENCY_S, (seen[taken], lapse)
        if expect == "completed":
            assert seen[taken][2:] == ("working", "re-running after a lost instance (attempt 2)")
            assert done["result"]["content"] == [{"type": "text", "text": "long job done after 2s"}]
            rerun = seen[-1][1] - seen[taken - 1][0]  # from before the takeover to the answer saying "completed"
            assert 2.0 <= rerun <= 2.0 + POLL_S + 2 * LATENCY_S, rerun  # the tool ran again from the top
        else:
            assert taken == len(seen) - 1  # failed at once, never re-run
            assert "stopped before it finished" in done["error"]["message"]
