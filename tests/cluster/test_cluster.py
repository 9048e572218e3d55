"""Stateless for real: three instances behind nginx round-robin (no affinity), state in SQLite (one
machine) or Redis, one shared MRTR key. Each scenario runs against both backends."""

from __future__ import annotations

import json
import signal
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from clusterlib import PV, Cluster  # type: ignore[import-not-found]

# Every test here starts a process (a server, a client, a tool): the fast lane leaves them out.
pytestmark = pytest.mark.slow

FORGED = "imp_" + "Q" * 32


def structured(body: dict[str, Any]) -> dict[str, Any]:
    result = body["result"]
    assert not result.get("isError"), result
    value: dict[str, Any] = result["structuredContent"]
    return value


def error_text(body: dict[str, Any]) -> str:
    result = body["result"]
    assert result.get("isError") is True, result
    text: str = result["content"][0]["text"]
    return text


def test_an_import_spread_over_three_instances_succeeds(cluster: Cluster) -> None:
    begun, i1 = cluster.tool("begin_import", {})
    handle = structured(begun)["importHandle"]
    added, i2 = cluster.tool("add_file", {"importHandle": handle, "uri": "file:///a.csv"})
    assert structured(added) == {"files": 1}
    committed, i3 = cluster.tool("commit_import", {"importHandle": handle})
    assert structured(committed)["committed"] == 1
    assert len({i1, i2, i3}) == 3, (i1, i2, i3)  # round-robin, no affinity: every call on another instance
    again, _ = cluster.tool("commit_import", {"importHandle": handle})
    assert "was already ended (committed or revoked)" in error_text(again)


def test_an_mrtr_round_started_on_one_instance_completes_on_another(cluster: Cluster) -> None:
    caps = {"elicitation": {"form": {}}}
    first, on = cluster.tool("confirm", {"item": "tea"}, caps=caps)
    result = first["result"]
    assert result["resultType"] == "input_required"
    assert set(result["inputRequests"]) == {"confirm"}
    params = {"name": "confirm", "arguments": {"item": "tea"}, "requestState": result["requestState"],
              "inputResponses": {"confirm": {"action": "accept", "content": {"ok": True}}}}
    r = cluster.post("tools/call", params, caps=caps)
    assert r.status_code == 200
    assert r.headers["x-mcp-instance"] != on
    final = r.json()["result"]
    assert final["resultType"] == "complete"
    assert final["structuredContent"] == {"item": "tea", "confirmed": True}


async def test_a_listen_stream_on_one_instance_gets_a_change_made_on_another(cluster: Cluster) -> None:
    uri = f"file:///watched/{cluster.backend}"
    params = {"notifications": {"resourceSubscriptions": [uri]},
              "_meta": {"io.modelcontextprotocol/protocolVersion": PV,
                        "io.modelcontextprotocol/clientCapabilities": {}}}
    msg = {"jsonrpc": "2.0", "id": "L1", "method": "subscriptions/listen", "params": params}
    headers = {"content-type": "application/json", "accept": "application/json, text/event-stream",
               "mcp-protocol-version": PV, "mcp-method": "subscriptions/listen", "authorization": "Bearer alice"}
    async with httpx.AsyncClient(timeout=15) as client, \
            client.stream("POST", cluster.url, json=msg, headers=headers) as resp:
        assert resp.status_code == 200
        assert resp.headers["content-type"].startswith("text/event-stream")
        listener = resp.headers["x-mcp-instance"]
        lines = resp.aiter_lines()

        async def next_message() -> dict[str, Any]:
            async for line in lines:
                if line.startswith("data:"):
                    m: dict[str, Any] = json.loads(line[5:])
                    return m
            raise AssertionError("stream ended")

        ack = await next_message()
        assert ack["method"] == "notifications/subscriptions/acknowledged"
        assert ack["params"]["notifications"] == {"resourceSubscriptions": [uri]}
        # round-robin: touch each URI until one call lands on another instance than the listener's
        touched: list[str] = []
        for target in (f"{uri}-sibling", f"{uri}/child", uri):  # not subscribed, under the subscription, exact
            for _ in range(6):
                _, on = cluster.tool("touch", {"uri": target})
                touched.append(target)
                if on != listener:
                    break
            assert on != listener
        started = time.monotonic()
        delivered = [target for target in touched if target != f"{uri}-sibling"]
        got = [await next_message() for _ in delivered]  # instances publish independently: any order
        assert {m["method"] for m in got} == {"notifications/resources/updated"}
        assert sorted(m["params"]["uri"] for m in got) == sorted(delivered)  # the sibling filtered out
        assert all(m["params"]["_meta"] == {"io.modelcontextprotocol/subscriptionId": "L1"} for m in got)
        assert time.monotonic() - started < 3


def test_refused_handles_another_principals_an_expired_and_a_forged_one(cluster: Cluster) -> None:
    handle = structured(cluster.tool("begin_import", {}, who="alice")[0])["importHandle"]
    theirs, _ = cluster.tool("add_file", {"importHandle": handle, "uri": "x"}, who="mallory")
    forged, _ = cluster.tool("add_file", {"importHandle": FORGED, "uri": "x"}, who="alice")
    unknown = ("Unknown import handle {!r}: no such import exists (or it was removed). "
               "Call begin_import to get a new one.")
    assert error_text(theirs) == unknown.format(handle)
    assert error_text(forged) == unknown.format(FORGED)
    ticket = structured(cluster.tool("new_ticket", {})[0])["ticket"]
    assert structured(cluster.tool("use_ticket", {"ticket": ticket})[0]) == {"ok": True}
    time.sleep(1.2)
    expired = error_text(cluster.tool("use_ticket", {"ticket": ticket})[0])
    assert expired.startswith(f"The ticket handle {ticket!r} expired at ")
    assert expired.endswith("(a ticket handle expires 1 second after it is created). Call new_ticket to get a new one.")
    # alice's import was not touched by mallory's attempt
    assert structured(cluster.tool("add_file", {"importHandle": handle, "uri": "y"})[0]) == {"files": 1}


def test_a_handle_survives_a_restart_of_every_instance(cluster: Cluster) -> None:
    handle = structured(cluster.tool("begin_import", {})[0])["importHandle"]
    assert structured(cluster.tool("add_file", {"importHandle": handle, "uri": "before"})[0]) == {"files": 1}
    cluster.restart_all()
    time.sleep(0.2)
    assert structured(cluster.tool("add_file", {"importHandle": handle, "uri": "after"})[0]) == {"files": 2}
    committed = structured(cluster.tool("commit_import", {"importHandle": handle})[0])
    assert committed["committed"] == 2
    assert structured(cluster.tool("read_receipt", {"receipt": committed["receipt"]})[0]) == {
        "files": ["before", "after"]}


class Unanswered(Exception):
    """The call got no answer from the application: the connection broke or the proxy said its upstream died."""


class Call:
    """One tool call through the proxy: when it was sent and when its answer (or its failure) came back."""

    def __init__(self, c: Cluster, name: str, args: dict[str, Any]) -> None:
        self.name, self.sent = name, time.monotonic()
        try:
            self.response: httpx.Response | None = c.post("tools/call", {"name": name, "arguments": args})
            self.error = ""
        except httpx.HTTPError as e:
            self.response, self.error = None, repr(e)
        self.back = time.monotonic()

    def result(self) -> dict[str, Any]:
        """The tool's structured result; Unanswered when the instance died under the call."""
        r = self.response
        if r is None:
            raise Unanswered(self.error)
        if r.status_code in (502, 503, 504) and "x-mcp-instance" not in r.headers:
            raise Unanswered(f"{r.status_code} from the proxy")
        assert r.status_code == 200, r.text
        return structured(r.json())


def test_killing_an_instance_mid_traffic_loses_no_committed_data(cluster: Cluster, tmp_path: Path) -> None:
    # Three clients import files while the instance answering a fourth call (held after its write was
    # committed) is killed. What is right: every answered call is answered right (the held call is never
    # re-sent to another instance, which would add its file twice), the only calls left unanswered are the
    # ones in flight on the victim when it died (the proxy passes every later call to a live instance),
    # and every commit that was answered is durable.
    committed: list[tuple[str, list[str]]] = []
    unanswered: list[Call] = []
    wrong: list[str] = []
    stop = threading.Event()

    def call(c: Cluster, name: str, args: dict[str, Any]) -> dict[str, Any]:
        made = Call(c, name, args)
        try:
            return made.result()
        except Unanswered:
            unanswered.append(made)
            raise

    def traffic(worker: int) -> None:
        n = 0
        with httpx.Client(timeout=15) as own:
            c = Cluster.__new__(Cluster)
            c.url, c.http = cluster.url, own
            while not stop.is_set() and n < 200:
                n += 1
                files = [f"w{worker}-{n}-{k}" for k in range(3)]
                try:
                    handle = call(c, "begin_import", {})["importHandle"]
                    for k, f in enumerate(files, 1):
                        got = call(c, "add_file", {"importHandle": handle, "uri": f})
                        if got != {"files": k}:
                            wrong.append(f"add_file #{k}: {got}")
                    receipt = call(c, "commit_import", {"importHandle": handle})["receipt"]
                except Unanswered:
                    continue  # in flight on the killed instance: abandon this import
                except Exception as e:  # an answer, but not the right one: never acceptable
                    wrong.append(repr(e)[:200])
                    continue
                committed.append((receipt, files))

    held_import = structured(cluster.tool("begin_import", {})[0])["importHandle"]
    pidfile = tmp_path / f"held-{cluster.backend}.pid"
    held: list[Call] = []

    def hold() -> None:
        with httpx.Client(timeout=15) as own:
            c = Cluster.__new__(Cluster)
            c.url, c.http = cluster.url, own
            held.append(Call(c, "add_file_and_hold", {"importHandle": held_import, "uri": "held",
                                                      "pidfile": str(pidfile)}))

    threads = [threading.Thread(target=traffic, args=(w,)) for w in range(3)]
    holder = threading.Thread(target=hold)
    for t in [*threads, holder]:
        t.start()
    deadline = time.monotonic() + 10
    while not pidfile.exists() or not pidfile.read_text():
        assert time.monotonic() < deadline, "the held call never reached an instance"
        time.sleep(0.02)
    time.sleep(1.0)
    victim = next(i for i in cluster.instances if i.proc is not None and i.proc.pid == int(pidfile.read_text()))
    before_kill = len(committed)
    victim.stop(signal.SIGKILL)
    killed = time.monotonic()
    time.sleep(1.5)
    stop.set()
    for t in [*threads, holder]:
        t.join(30)
    try:
        assert before_kill > 0 and len(committed) > before_kill, (before_kill, len(committed))
        assert len(held) == 1
        r = held[0].response  # the proxy says its upstream died; re-sent elsewhere, it would add the file twice
        assert r is not None and (r.status_code, r.headers.get("x-mcp-instance")) == (502, None), (
            held[0].error or r.text)
        assert wrong == []  # every call that was answered was answered right
        late = [(u.name, round(u.sent - killed, 3)) for u in unanswered if u.sent >= killed]
        assert late == []  # a call sent after the kill is passed to a live instance
        assert len(unanswered) <= len(threads)  # at most the call each client had in flight on the victim
        for receipt, files in committed:  # every commit that answered is durable and exact
            assert structured(cluster.tool("read_receipt", {"receipt": receipt})[0]) == {"files": files}
        answered = {cluster.tool("begin_import", {})[1] for _ in range(6)}
        assert answered == {i.name for i in cluster.instances} - {victim.name}  # the others keep serving
    finally:
        victim.start().wait()
        time.sleep(0.5)


@pytest.mark.parametrize("cluster", ["redis"], indirect=True)  # SQLite is embedded: nothing to stop
def test_with_redis_stopped_state_requests_fail_clearly_and_recover(cluster: Cluster) -> None:
    assert cluster.redis is not None
    handle = structured(cluster.tool("begin_import", {})[0])["importHandle"]
    cluster.redis.stop()
    try:
        for _ in range(3):  # whichever instance answers
            started = time.monotonic()
            body, _ = cluster.tool("add_file", {"importHandle": handle, "uri": "x"})
            assert time.monotonic() - started < 8  # bounded: socket timeouts, no hang
            assert body["error"]["code"] == -32603
            assert body["error"]["message"].startswith(f"State store unavailable (redis {cluster.redis.url}): ")
            assert body["error"]["message"].endswith("The request was not completed; retry shortly.")
        r = cluster.post("tools/list", {})
        assert r.status_code == 200 and "tools" in r.json()["result"]  # what needs no state still works
    finally:
        cluster.redis.start()
    for _ in range(3):  # every instance reconnects on its next request
        begun, _ = cluster.tool("begin_import", {})
        assert structured(begun)["importHandle"].startswith("imp_")
