"""The Tasks extension across instances behind nginx (round-robin, no affinity), on SQLite and on Redis:
a task is polled, fed input and cancelled through other instances; it survives a restart of every
instance; a task whose instance is killed is re-run (retry-safe tools) or failed within the lease time."""

from __future__ import annotations

import signal
import time
from typing import Any

from clusterlib import PV, Cluster  # type: ignore[import-not-found]

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


def test_killed_instance_task_is_re_run_or_failed_within_the_lease(cluster: Cluster) -> None:
    by_name = {i.name: i for i in cluster.instances}
    for tool, expect in (("long_job", "completed"), ("fragile_job", "failed")):
        tid, runner = start(cluster, tool, {"seconds": 2})
        time.sleep(0.3)
        victim = by_name[runner]
        victim.stop(signal.SIGKILL)
        t0 = time.monotonic()
        try:
            # lease 1.5 s + sweep 0.25 s, then a re-run of 2 s: never left "working"
            done = poll(cluster, tid, TERMINAL, 8)
            elapsed = time.monotonic() - t0  # the victim's restart below is not the task's time
        finally:
            victim.start().wait()
        assert done["status"] == expect, done
        if expect == "completed":
            assert done["result"]["content"] == [{"type": "text", "text": "long job done after 2s"}]
            assert elapsed < 6
        else:
            assert "stopped before it finished" in done["error"]["message"]
            assert elapsed < 4
