"""Legacy sessions behind nginx round-robin (deploy/nginx.conf, no affinity) over three instances that
share one state store (SQLite, then Redis) and one key ring.

The official TS SDK 1.x client runs its whole session through the balancer (its elicitation and sampling
answers, GET stream and DELETE land wherever nginx sends them), over Streamable HTTP and over the 2024-11-05
HTTP+SSE transport (its stream held by one instance, its POSTs spread over all); a raw client checks that consecutive
requests of one session are answered by different instances, and that restarting every instance does not
turn the session into a 404.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from services import free_port, wait_port

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
CLI = str(ROOT / ".venv" / "bin" / "mcp-stateless")
APP = "tests/legacy/legacy_app.py:app"
KEYS = "k1:bGVnYWN5LWNsdXN0ZXItc2hhcmVkLWtleS0zMi1ieXRlcyE="
V = "2025-11-25"

_spec = importlib.util.spec_from_file_location("_clusterlib", ROOT / "tests" / "cluster" / "clusterlib.py")
assert _spec is not None and _spec.loader is not None
clusterlib = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(clusterlib)


class Instance:
    def __init__(self, name: str, state: str) -> None:
        self.name, self.state, self.port = name, state, free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        env = {**os.environ, "MCP_STATELESS_KEYS": KEYS}
        env.pop("MCP_STATELESS_STATE", None)
        self.proc = subprocess.Popen([CLI, "serve", APP, "--http", f"127.0.0.1:{self.port}", "--state", self.state,
                                      "--instance-name", self.name, "--log-level", "warning", "--legacy-sse"],
                                     cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def wait(self) -> None:
        assert self.proc is not None
        wait_port(self.port, self.proc, f"instance {self.name}")

    def stop(self) -> None:
        clusterlib.stop(self.proc)
        self.proc = None


@contextlib.contextmanager
def balanced(state: str, workdir: Path) -> Iterator[tuple[str, list[Instance]]]:
    if not Path(clusterlib.NGINX).exists():
        pytest.fail("nginx is not installed (.ci/run installs it)")
    instances = [Instance(f"i{n}", state) for n in (1, 2, 3)]
    for i in instances:
        i.start()
    ngx: subprocess.Popen[bytes] | None = None
    try:
        for i in instances:
            i.wait()
        port = free_port()
        nd = workdir / "nginx"
        nd.mkdir()
        nd.chmod(0o777)
        conf = nd / "nginx.conf"
        conf.write_text(clusterlib.nginx_config(port, [i.port for i in instances], nd))
        ngx = subprocess.Popen([clusterlib.NGINX, "-p", str(nd), "-c", str(conf), "-g", "daemon off;"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_port(port, ngx, "nginx")
        yield f"http://127.0.0.1:{port}/mcp", instances
    finally:
        clusterlib.stop(ngx, signal.SIGQUIT)
        for i in instances:
            i.stop()


@pytest.fixture(scope="module", params=["sqlite", "redis"])
def cluster(request: pytest.FixtureRequest,
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, list[Instance]]]:
    workdir = tmp_path_factory.mktemp(f"legacy-cluster-{request.param}")
    if request.param == "sqlite":
        state = f"sqlite:///{workdir / 'state.db'}"
    else:
        state = request.getfixturevalue("redis_server").isolated_url()
    with balanced(state, workdir) as c:
        yield c


def _headers(sid: str) -> dict[str, str]:
    return {"accept": "application/json, text/event-stream", "mcp-session-id": sid, "mcp-protocol-version": V}


def _init(url: str) -> str:
    r = httpx.post(url, headers={"accept": "application/json, text/event-stream"}, json={
        "jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": V, "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}})
    assert r.status_code == 200, r.text
    sid: str = r.headers["mcp-session-id"]
    return sid


def test_one_session_is_served_by_every_instance(cluster: tuple[str, list[Instance]]) -> None:
    url, instances = cluster
    sid = _init(url)
    served: set[str] = set()
    for n in range(6):
        r = httpx.post(url, json={"jsonrpc": "2.0", "id": n, "method": "ping"}, headers=_headers(sid))
        assert r.status_code == 200 and r.json()["result"] == {}
        served.add(r.headers["x-mcp-instance"])
    assert served == {"i1", "i2", "i3"}
    # Every instance restarts: the session is still good everywhere.
    for i in instances:
        i.stop()
    for i in instances:
        i.start()
    for i in instances:
        i.wait()
    for n in range(3):
        r = httpx.post(url, json={"jsonrpc": "2.0", "id": 10 + n, "method": "tools/call",
                                  "params": {"name": "greet", "arguments": {"name": "again"}}}, headers=_headers(sid))
        assert r.status_code == 200, r.text


def test_the_ts_sdk1_client_through_the_balancer(cluster: tuple[str, list[Instance]]) -> None:
    from test_legacy_sdk_clients import run_ts  # type: ignore[import-not-found]

    url, _ = cluster
    out: dict[str, Any] = run_ts(["http", url])
    assert out["askName"] == "Hello, Alice (accept)"
    assert out["askTwice"] == "Alice then sampled"
    assert out["logs"] == ["info line", "error line"]
    assert out["updated"] == ["test://watched"]
    assert out["toolsChanged"] >= 1


def test_the_ts_sdk1_sse_client_through_the_balancer(cluster: tuple[str, list[Instance]]) -> None:
    from test_legacy_sdk_clients import run_ts  # type: ignore[import-not-found]

    url, _ = cluster
    out: dict[str, Any] = run_ts(["sse", url])
    assert out["greet"] == "Hello, Ann!"
    assert out["askName"] == "Hello, Alice (accept)"
    assert out["askTwice"] == "Alice then sampled"
    assert out["logs"] == ["info line", "error line"]
    assert out["updated"] == ["test://watched"]
    assert out["toolsChanged"] >= 1


def test_the_server_card_through_the_balancer(cluster: tuple[str, list[Instance]]) -> None:
    from mcp_stateless.conformance import card_violations

    url, _ = cluster
    r = httpx.get(url + "/server-card")
    assert r.status_code == 200 and r.headers["content-type"] == "application/mcp-server-card+json"
    assert card_violations(r.json()) == []
    assert [x["type"] for x in r.json()["remotes"]] == ["streamable-http", "sse"]
    assert httpx.get(url + "/elsewhere").status_code == 404
