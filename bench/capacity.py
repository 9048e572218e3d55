"""The capacity model's measurements (docs/capacity.md), on real servers started here and stopped by pid:

1. **ops**: state round trips per request kind. One `mcp-stateless serve tests/cluster/cluster_app.py:app`
   on its own redis-server; each kind is sent N times and Redis's `INFO commandstats` before and after
   counts what it cost (minus what the idle instance costs in the same time: the task sweeper's scans).
   Every engine does the same logical operations per request (a get, a create, a swap, a publish, a due
   scan are one round trip each on Redis, Redis Cluster and Postgres alike).
2. **engine**: each engine's state operations per second here: 2 processes x 32 coroutines doing
   get + compare-and-set on 256 records for `--duration` seconds (single Redis, 3-master Redis Cluster,
   Postgres with fsync on, SQLite).
   **server**: the same stores driven by their own C clients (redis-benchmark, pgbench), for the headroom.
3. **fleet**: stateful calls per second (`add_file` on 64 handles) through nginx (deploy/nginx.conf) at 1, 2
   and 4 instances on each engine.

    .venv/bin/python bench/capacity.py [--duration 4] [--only ops,engine,fleet] [--engines redis,postgres,…]

Prints the tables and writes .cache/bench-results/capacity-<time>.json. Every run is bounded in time and
count. On a 2-core machine shared with other work, the load generator, nginx, the instances and the store
share two cores: absolute numbers are this machine's, ratios are what carries over.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path[:0] = [str(HERE), str(ROOT / "tests")]

import wire  # noqa: E402

import cluster as nginx_bench  # noqa: E402  (bench/cluster.py: nginx config, ports, stop by pid)
from services import PostgresServer, RedisCluster, RedisServer, free_port, wait_port  # noqa: E402

EXE = str(Path(sys.executable).with_name("mcp-stateless"))
APP = "tests/cluster/cluster_app.py:app"
KEYS = "k1:" + base64.urlsafe_b64encode(b"bench-capacity-shared-mrtr-key-1").decode()
PV = "2026-07-28"
ENGINES = ("redis", "redis-cluster", "postgres", "sqlite")


def serve(state: str, port: int, log: Path) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCP_STATELESS_")} | {"MCP_STATELESS_KEYS": KEYS}
    with log.open("ab") as out:
        return subprocess.Popen([EXE, "serve", APP, "--http", f"127.0.0.1:{port}", "--state", state,
                                 "--log-level", "warning", "--allowed-host", "*"],
                                cwd=str(ROOT), env=env, stdout=out, stderr=out)


def headers(method: str, name: str | None = None) -> dict[str, str]:
    h = {"content-type": "application/json", "accept": "application/json, text/event-stream",
         "mcp-protocol-version": PV, "mcp-method": method, "authorization": "Bearer alice"}
    if name is not None:
        h["mcp-name"] = name
    return h


def rpc(http: httpx.Client, url: str, method: str, params: dict[str, Any], caps: dict[str, Any] | None = None,
        name: str | None = None) -> dict[str, Any]:
    p = {**params, "_meta": {"io.modelcontextprotocol/protocolVersion": PV,
                             "io.modelcontextprotocol/clientCapabilities": caps or {}}}
    r = http.post(url, json={"jsonrpc": "2.0", "id": 1, "method": method, "params": p},
                  headers=headers(method, name or params.get("name")))
    r.raise_for_status()
    body: dict[str, Any] = r.json()
    if "result" not in body:
        raise RuntimeError(f"{method}: {body}")
    return body["result"]


def call(http: httpx.Client, url: str, tool: str, args: dict[str, Any], **kw: Any) -> dict[str, Any]:
    return rpc(http, url, "tools/call", {"name": tool, "arguments": args, **kw.pop("extra", {})}, **kw)


def commandstats(port: int) -> dict[str, int]:
    out = subprocess.run(["redis-cli", "-p", str(port), "info", "commandstats"], capture_output=True, text=True,
                         timeout=10).stdout
    stats: dict[str, int] = {}
    for line in out.splitlines():
        if line.startswith("cmdstat_"):
            name, _, rest = line.partition(":")
            stats[name[len("cmdstat_"):]] = int(rest.split(",")[0].split("=")[1])
    return stats


# ------------------------------------------------------------------------------------------------- 1. ops
def measure_ops(n: int, workdir: Path) -> dict[str, Any]:
    redis = RedisServer(workdir).start()
    port = free_port()
    proc = serve(redis.url, port, workdir / "ops.log")
    url = f"http://127.0.0.1:{port}/mcp"
    out: dict[str, Any] = {}
    try:
        wait_port(port, proc, "instance")
        http = httpx.Client(timeout=15)
        ext = {"extensions": {"io.modelcontextprotocol/tasks": {}}, "elicitation": {"form": {}}}
        handle = call(http, url, "begin_import", {})["structuredContent"]["importHandle"]

        def plain() -> None:
            call(http, url, "touch", {"uri": "file:///watched/x"})  # a call whose one state use is its event

        def handle_use() -> None:
            call(http, url, "add_file", {"importHandle": handle, "uri": "file:///a"})

        def mrtr_round() -> None:
            first = call(http, url, "confirm", {"item": "tea"}, caps=ext)
            call(http, url, "confirm", {"item": "tea"}, caps=ext, extra={
                "requestState": first["requestState"],
                "inputResponses": {"confirm": {"action": "accept", "content": {"ok": True}}}})

        def task_lifecycle() -> None:
            started = call(http, url, "long_job", {"seconds": 0}, caps=ext)
            tid = started["taskId"]
            while rpc(http, url, "tasks/get", {"taskId": tid}, caps=ext, name=tid)["status"] != "completed":
                time.sleep(0.01)

        sid_holder: dict[str, str] = {}

        def legacy_request() -> None:
            h = {"content-type": "application/json", "accept": "application/json, text/event-stream",
                 "authorization": "Bearer alice"}
            if "sid" not in sid_holder:
                r = http.post(url, headers=h, json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                    "protocolVersion": "2025-06-18", "capabilities": {},
                    "clientInfo": {"name": "bench", "version": "1"}}})
                r.raise_for_status()
                sid_holder["sid"] = r.headers["mcp-session-id"]
                http.post(url, headers=h | {"mcp-session-id": sid_holder["sid"], "mcp-protocol-version": "2025-06-18"},
                          json={"jsonrpc": "2.0", "method": "notifications/initialized"})
            r = http.post(url, headers=h | {"mcp-session-id": sid_holder["sid"], "mcp-protocol-version": "2025-06-18"},
                          json={"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                                "params": {"name": "add_file", "arguments": {"importHandle": handle, "uri": "x"}}})
            r.raise_for_status()
            if "error" in r.text[:200] and '"result"' not in r.text:
                raise RuntimeError(r.text[:300])

        kinds = {"modern call + change event (touch)": plain, "handle use (add_file)": handle_use,
                 "MRTR round (two requests)": mrtr_round,
                 "task lifecycle (create, run, poll to completed)": task_lifecycle,
                 "2025 session request (tools/call add_file)": legacy_request}
        legacy_request()  # the session exists before its requests are counted
        time.sleep(0.5)
        for kind, fn in kinds.items():
            before, t0 = commandstats(redis.port), time.monotonic()
            time.sleep(1.0)
            idle = {k: v - before.get(k, 0) for k, v in commandstats(redis.port).items()}
            idle_rate = {k: v / (time.monotonic() - t0) for k, v in idle.items() if v}
            before, t0 = commandstats(redis.port), time.monotonic()
            for _ in range(n):
                fn()
            spent = time.monotonic() - t0
            after = commandstats(redis.port)
            per = {}
            for k, v in after.items():
                d = v - before.get(k, 0) - idle_rate.get(k, 0.0) * spent - (1 if k == "info" else 0)
                if d / n >= 0.05:
                    per[k] = round(d / n, 2)
            # Commands a client sent (one round trip each); HSET, ZADD, PEXPIREAT, … run inside the scripts.
            ops = {"reads": per.get("hmget", 0.0), "writes": per.get("eval", 0.0) + per.get("evalsha", 0.0),
                   "publishes": per.get("publish", 0.0),
                   "scans": per.get("zrangebyscore", 0.0), "deletes": per.get("exec", 0.0)}
            ops["round_trips"] = round(sum(ops.values()), 2)
            out[kind] = {"ops": ops, "redis_commands": per}
            print(f"ops  {kind}: {ops}", flush=True)
        http.close()
    finally:
        nginx_bench._stop(proc)
        redis.stop()
    return out


# ---------------------------------------------------------------------------------------------- 2. engine
ENGINE_WORKER = """
import asyncio, sys, time
from mcp_stateless.state import open_state

async def main(url, seconds, conc, wid):
    b = open_state(url)
    keys = [f"w{wid}-{i}" for i in range(256)]
    for k in keys:
        await b.records.create("bench", k, b"0")
    ops = 0
    stop = time.monotonic() + seconds
    async def loop(j):
        nonlocal ops
        i = j
        while time.monotonic() < stop:
            k = keys[i % len(keys)]
            i += conc
            cur = await b.records.get("bench", k)
            ops += 1
            if await b.records.swap("bench", k, cur.version, str(int(cur.data) + 1).encode()):
                pass
            ops += 1
    t0 = time.monotonic()
    await asyncio.gather(*(loop(j) for j in range(conc)))
    print(ops / (time.monotonic() - t0))
    await b.aclose()

asyncio.run(main(sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), sys.argv[4]))
"""


def measure_engine(url: str, seconds: float, procs: int = 2, conc: int = 32) -> float:
    argv = [sys.executable, "-c", ENGINE_WORKER, url, str(seconds), str(conc)]
    workers = [subprocess.Popen([*argv, f"{time.time_ns()}{i}"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
               for i in range(procs)]
    rates = []
    for w in workers:
        out, err = w.communicate(timeout=seconds + 120)
        if w.returncode != 0:
            raise RuntimeError(err.decode()[-600:])
        rates.append(float(out.split()[-1]))
    return sum(rates)


def measure_server(name: str, url: str, seconds: float, workdir: Path) -> float | None:
    """The server's own rate with a C client (redis-benchmark, pgbench): what the store could do if our
    client side were not the bottleneck. Redis: GET and SET at 32 connections; Postgres: a read and a
    versioned UPDATE per transaction (our get + swap) at 16 connections, counted as two operations."""
    if name in ("redis", "redis-cluster"):
        port = url.split("://", 1)[1].split(",")[0].split("/")[0].rsplit(":", 1)[1]
        cmd = ["redis-benchmark", "-h", "127.0.0.1", "-p", port, "-q", "-c", "32", "-n", "100000", "-t", "get,set",
               "--csv"] + (["--cluster"] if name == "redis-cluster" else [])
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=120).stdout
        rates = []
        for line in out.splitlines():
            cells = [c.strip('"') for c in line.split(",")]
            if len(cells) > 1 and cells[1].replace(".", "", 1).isdigit():
                rates.append(float(cells[1]))
        return round(statistics.mean(rates)) if rates else None
    if name == "postgres":
        bindir = Path(subprocess.run(["sh", "-c", "ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1"],
                                     capture_output=True, text=True).stdout.strip())
        setup = ("DROP TABLE IF EXISTS bench; CREATE TABLE bench (key TEXT PRIMARY KEY, version BIGINT, data BYTEA);"
                 "INSERT INTO bench SELECT 'k' || g, 1, '\\x00' FROM generate_series(1, 1000) g;")
        subprocess.run(["psql", url, "-qc", setup], check=True, capture_output=True, timeout=60)
        script = workdir / "pgbench.sql"
        script.write_text("\\set k random(1, 1000)\n"
                          "SELECT data, version FROM bench WHERE key = 'k' || :k;\n"
                          "UPDATE bench SET version = version + 1 WHERE key = 'k' || :k AND version > 0;\n")
        out = subprocess.run([str(bindir / "pgbench"), "-n", "-c", "16", "-j", "2", "-T", str(int(seconds)), "-f",
                              str(script), url], capture_output=True, text=True, timeout=seconds + 60).stdout
        tps = [float(line.split("=")[1].split()[0]) for line in out.splitlines() if line.startswith("tps =")]
        return round(tps[0] * 2) if tps else None
    return None


# ----------------------------------------------------------------------------------------------- 3. fleet
def measure_fleet(state: str, sizes: list[int], seconds: float, warmup: float, workdir: Path) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for n in sizes:
        ports = [free_port() for _ in range(n)]
        insts = [serve(state, p, workdir / f"fleet-{n}.log") for p in ports]
        ngx = None
        try:
            for p, proc in zip(ports, insts, strict=True):
                wait_port(p, proc, "instance", timeout=30)
            ndir = Path(tempfile.mkdtemp(prefix=f"nginx-{n}-", dir=workdir))
            listen = free_port()
            conf = ndir / "nginx.conf"
            conf.write_text(nginx_bench.nginx_config(listen, ports, ndir))
            ngx = subprocess.Popen([nginx_bench.NGINX, "-p", str(ndir), "-c", str(conf), "-g", "daemon off;"],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            wait_port(listen, ngx, "nginx")
            url = f"http://127.0.0.1:{listen}/mcp"
            with httpx.Client(timeout=15) as http:
                handles = [call(http, url, "begin_import", {})["structuredContent"]["importHandle"] for _ in range(64)]
            reqs = [wire.http_request(listen, wire.body("add_file", {"importHandle": h, "uri": "file:///b"}, rid=i + 1),
                                      name="add_file", authorization="Bearer alice") for i, h in enumerate(handles)]
            res = run_loadgen_cmd(listen, reqs, seconds, warmup, '"files"')
            out[str(n)] = {"rps": round(res["rps"]), "p50_ms": round(res["p50_ms"], 2),
                           "p99_ms": round(res["p99_ms"], 2), "errors": res.get("errors", 0)}
            print(f"fleet {state.split(':')[0]} x{n}: {out[str(n)]}", flush=True)
        finally:
            nginx_bench._stop(ngx, signal.SIGQUIT)
            for proc in insts:
                nginx_bench._stop(proc)
    return out


def run_loadgen_cmd(port: int, reqs: list[bytes], seconds: float, warmup: float, expect: str) -> dict[str, Any]:
    import loadgen

    with tempfile.NamedTemporaryFile(prefix="bench-req-", delete=False) as f:
        path = f.name
    try:
        loadgen.write_requests(path, reqs)
        cmd = [sys.executable, str(HERE / "loadgen.py"), "--port", str(port), "--requests", path, "--conns", "16",
               "--duration", str(seconds), "--warmup", str(warmup), "--max-requests", "2000000", "--expect", expect]
        out = subprocess.run(cmd, capture_output=True, timeout=seconds + warmup + 60, check=True)
        return dict(json.loads(out.stdout))
    finally:
        os.unlink(path)


# ------------------------------------------------------------------------------------------------- main
class Engines:
    """The servers of the engines asked for, started once, stopped by pid."""

    def __init__(self, names: list[str], workdir: Path) -> None:
        self.workdir, self.stop_list, self.urls = workdir, [], {}
        for name in names:
            if name == "redis":
                r = RedisServer(workdir).start()
                self.stop_list.append(r.stop)
                self.urls[name] = r.url
            elif name == "redis-cluster":
                c = RedisCluster(workdir / "cluster").start()
                self.stop_list.append(c.stop)
                self.urls[name] = c.url
            elif name == "postgres":
                p = PostgresServer(fsync=True).start()
                self.stop_list.append(p.remove)
                self.urls[name] = p.url
            elif name == "sqlite":
                self.urls[name] = f"sqlite:///{workdir / 'bench.db'}"

    def close(self) -> None:
        for stop in self.stop_list:
            stop()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--duration", type=float, default=4.0)
    ap.add_argument("--warmup", type=float, default=1.0)
    ap.add_argument("--ops-n", type=int, default=40)
    ap.add_argument("--only", default="ops,engine,server,fleet")
    ap.add_argument("--engines", default=",".join(ENGINES))
    ap.add_argument("--sizes", default="1,2,4")
    cfg = ap.parse_args()
    parts, names = cfg.only.split(","), cfg.engines.split(",")
    results: dict[str, Any] = {"at": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                               "load": os.getloadavg()[0]}
    git = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT)
    results["commit"] = git.stdout.strip()
    with tempfile.TemporaryDirectory(prefix="bench-capacity-") as tmp:
        work = Path(tmp)
        os.chmod(work, 0o755)
        if "ops" in parts:
            results["ops"] = measure_ops(cfg.ops_n, work)
        engines = Engines(names, work)
        try:
            if "engine" in parts:
                results["engine"] = {}
                for name in names:
                    url = engines.urls[name]
                    if name == "postgres":
                        url += "?pool_max=16"
                    rates = [measure_engine(url, cfg.duration) for _ in range(2)]
                    results["engine"][name] = round(statistics.median(rates))
                    print(f"engine {name}: {results['engine'][name]:,} ops/s", flush=True)
            if "server" in parts:
                results["server"] = {}
                for name in names:
                    results["server"][name] = measure_server(name, engines.urls[name], cfg.duration, work)
                    print(f"server {name}: {results['server'][name]} ops/s", flush=True)
            if "fleet" in parts:
                results["fleet"] = {}
                for name in names:
                    results["fleet"][name] = measure_fleet(engines.urls[name], [int(s) for s in cfg.sizes.split(",")],
                                                           cfg.duration, cfg.warmup, work)
        finally:
            engines.close()
    results["load_end"] = os.getloadavg()[0]
    dest = ROOT / ".cache" / "bench-results"
    dest.mkdir(parents=True, exist_ok=True)
    path = dest / f"capacity-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps(results, indent=1))
    print(json.dumps(results, indent=1))
    print(f"written: {path}")


if __name__ == "__main__":
    main()
