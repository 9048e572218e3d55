"""`mcp-stateless serve` as a process: the lifespan runs once per process (HTTP, `--workers 2`, stdio),
`/healthz` and `/readyz` (against a real Redis stopped and started again), the app's own routes and its
middleware."""

from __future__ import annotations

import collections
import signal
import subprocess
import time
from pathlib import Path

import httpx
import orjson
import pytest
from test_serve import CLI, KEY, ROOT, body, env, http_server, post

from services import RedisServer

# Every test here starts a process (a server, a client, a tool): the fast lane leaves them out.
pytestmark = pytest.mark.slow

APP = "tests/apps/lifespan_app.py:app"


def lifespan_log(path: Path) -> collections.Counter[str]:
    return collections.Counter(line.split()[0] + " " + line.split()[1] for line in path.read_text().splitlines())


def tool_text(r: httpx.Response) -> str:
    assert r.status_code == 200, r.text
    text: str = r.json()["result"]["content"][0]["text"]
    return text


def stop(proc: subprocess.Popen[str]) -> None:
    proc.send_signal(signal.SIGTERM)
    proc.wait(15)


def test_http_enters_the_lifespan_once_and_handlers_share_it(tmp_path: Path) -> None:
    log = tmp_path / "lifespan.log"
    with http_server("--state", "memory://", app=APP, env=env(LIFESPAN_LOG=str(log))) as (url, proc):
        answers = [tool_text(post(url, body(i, "tools/call", {"name": "whoami", "arguments": {"label": str(i)}})))
                   for i in range(1, 6)]
        pid = proc.pid
        assert answers == [f"{pid}:{n}" for n in range(1, 6)]  # one Resources object, seen by every call
        assert log.read_text() == f"enter {pid}\n"
        stop(proc)
    assert log.read_text() == f"enter {pid}\nexit {pid}\n"


def test_two_workers_enter_it_once_each(tmp_path: Path) -> None:
    log = tmp_path / "lifespan.log"
    with http_server("--workers", "2", app=APP, env=env(LIFESPAN_LOG=str(log), MCP_STATELESS_KEYS=KEY,
                                                        XDG_STATE_HOME=str(tmp_path))) as (url, proc):
        deadline = time.monotonic() + 20
        while len(log.read_text().splitlines()) < 2:  # the second worker may still be starting
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
        seen = {tool_text(post(url, body(i, "tools/call", {"name": "whoami"}))).split(":")[0] for i in range(40)}
        entered = lifespan_log(log)
        assert len(entered) == 2 and set(entered.values()) == {1}, entered  # two pids, one enter each
        assert proc.pid not in {int(k.split()[1]) for k in entered}  # the supervisor does not serve
        assert seen <= {k.split()[1] for k in entered}
        stop(proc)
    done = lifespan_log(log)
    assert sorted(done.values()) == [1, 1, 1, 1] and {k.split()[0] for k in done} == {"enter", "exit"}, done


def test_stdio_enters_it_once_for_the_whole_process(tmp_path: Path) -> None:
    log = tmp_path / "lifespan.log"
    msgs = [body(i, "tools/call", {"name": "whoami", "arguments": {"label": str(i)}}) for i in range(1, 4)]
    lines = b"".join(orjson.dumps(m) + b"\n" for m in msgs)
    r = subprocess.run([CLI, "serve", APP, "--stdio", "--state", "memory://"], cwd=ROOT, capture_output=True,
                       timeout=30, env=env(LIFESPAN_LOG=str(log)), input=lines)
    assert r.returncode == 0, r.stderr
    texts = sorted(orjson.loads(line)["result"]["content"][0]["text"] for line in r.stdout.splitlines())
    pid = texts[0].split(":")[0]
    assert texts == [f"{pid}:1", f"{pid}:2", f"{pid}:3"]
    assert log.read_text() == f"enter {pid}\nexit {pid}\n"


def test_healthz_readyz_routes_and_middleware(tmp_path: Path) -> None:
    with http_server("--state", "memory://", app=APP) as (url, proc):
        base = url.removesuffix("/mcp")
        r = httpx.get(base + "/healthz", timeout=10)
        assert (r.status_code, r.json(), r.headers["cache-control"]) == (200, {"status": "ok"}, "no-store")
        r = httpx.get(base + "/readyz", timeout=10)
        assert (r.status_code, r.json()) == (200, {"status": "ready"})
        assert httpx.post(base + "/readyz", timeout=10).status_code == 405
        r = httpx.get(base + "/version", timeout=10)
        assert (r.status_code, r.json()) == (200, {"name": "lifespan-test", "version": "1.0.0"})
        assert r.headers["x-served-by"] == str(proc.pid)  # the app's middleware wraps its routes
        mcp = post(url, body(1, "tools/call", {"name": "whoami"}))
        assert mcp.status_code == 200 and mcp.headers["x-served-by"] == str(proc.pid)  # and the endpoint
        assert httpx.get(base + "/nothing", timeout=10).status_code == 404
        # A kubelet probe names the pod's address: the probes answer it, the MCP endpoint's Host check does not.
        probe_host = {"host": "10.1.2.3:8000"}
        assert httpx.get(base + "/readyz", headers=probe_host, timeout=10).status_code == 200
        assert post(url, body(2, "tools/list"), **probe_host).status_code == 403


def test_readyz_follows_redis_down_and_up_without_a_warning_per_second(tmp_path: Path) -> None:
    redis = RedisServer(tmp_path)
    redis.start()
    try:
        args = ("--state", redis.url + "?timeout=0.5")
        with http_server(*args, app=APP, env=env(MCP_STATELESS_KEYS=KEY)) as (url, proc):
            ready = url.removesuffix("/mcp") + "/readyz"
            assert httpx.get(ready, timeout=10).status_code == 200
            redis.stop()
            r = httpx.get(ready, timeout=10)
            assert r.status_code == 503, r.text
            assert r.json()["status"] == "not ready"
            [reason] = r.json()["reasons"]
            assert reason.startswith("state store unreachable: State store unavailable (redis")
            assert httpx.get(url.removesuffix("/mcp") + "/healthz", timeout=10).status_code == 200  # alive
            time.sleep(3)
            redis.start()
            deadline = time.monotonic() + 20
            while (r := httpx.get(ready, timeout=10)).status_code != 200:
                assert time.monotonic() < deadline, r.text
                time.sleep(0.2)
            assert r.json() == {"status": "ready"}
            assert tool_text(post(url, body(1, "tools/call", {"name": "whoami"}))) == f"{proc.pid}:1"
            time.sleep(2.5)  # the lease sweeper (every second) meets the store again
            proc.send_signal(signal.SIGTERM)
            _, stderr = proc.communicate(timeout=15)
        warnings = [line for line in stderr.splitlines() if "WARNING" in line]
        assert len(warnings) == 1, stderr  # once when it went, not once a second while it was gone
        assert "task sweep paused until the state store is reachable" in warnings[0]
        assert "INFO mcp_stateless.tasks: task sweep resumed: the state store is reachable again" in stderr
    finally:
        redis.stop()


def test_redis_down_at_start_up_is_a_readiness_state(tmp_path: Path) -> None:
    redis = RedisServer(tmp_path)  # never started: nothing listens on its port
    with http_server("--state", redis.url + "?timeout=0.5", app=APP, env=env(MCP_STATELESS_KEYS=KEY)) as (url, proc):
        r = httpx.get(url.removesuffix("/mcp") + "/readyz", timeout=10)
        assert r.status_code == 503
        assert r.json()["reasons"][0].startswith("state store unreachable")
        time.sleep(3)
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=15)
    warnings = [line for line in stderr.splitlines() if "WARNING" in line]
    assert len(warnings) == 1 and "task sweep paused" in warnings[0], stderr


def test_a_failing_lifespan_stops_serve_with_the_reason() -> None:
    app = "tests/apps/failing_lifespan_app.py:app"
    r = subprocess.run([CLI, "serve", app, "--stdio", "--state", "memory://"], cwd=ROOT, capture_output=True,
                       text=True, timeout=30, env=env(), input=orjson.dumps(body(1, "tools/list")).decode() + "\n")
    assert (r.returncode, r.stdout) == (1, "")
    assert "ERROR mcp_stateless.stdio: stdio: startup failed" in r.stderr
    assert r.stderr.rstrip().endswith("ConnectionRefusedError: database at 127.0.0.1:5432 refused")
    r = subprocess.run([CLI, "serve", app, "--http", "127.0.0.1:0", "--state", "memory://"], cwd=ROOT,
                       capture_output=True, text=True, timeout=30, env=env(), stdin=subprocess.DEVNULL)
    assert r.returncode == 3  # uvicorn's "startup failed"
    assert "ERROR mcp_stateless.http: startup failed" in r.stderr
    assert "ERROR:    ConnectionRefusedError: database at 127.0.0.1:5432 refused" in r.stderr
