"""The whole comparison in one command: `.venv/bin/python -m bench [--quick] [--only SECTION,...]`
(or `bash bench/run.sh`, which also installs wrk and the peers' venv).

Sections (all by default):
  check    our load generator against wrk on the bare baseline (is the load generator the bottleneck?)
  http     tools/call echo, JSON response: bare / ours / mcp / fastmcp, under h11+asyncio and httptools+uvloop
  sse      tools/call with one progress notification (SSE response): ours / mcp / fastmcp
  auth     the same echo server of ours anonymous vs checking a JWT access token on every request
  stdio    16 in flight over stdio: ours / mcp / fastmcp
  memory   idle RSS, and RSS after 100,000 calls from 10,000 distinct client infos and principals
  listen   10,000 idle listen streams on one instance of ours: RSS, CPU, fan-out time of one change event
  client   our client vs the official Python client (bench/client_bench.py, when it exists)
  cluster  1/2/4 instances behind nginx with Redis state (when deploy/nginx.conf and the Redis state exist)
  legacy   2025-era sessions (initialize, initialized, tools/list, tools/call, DELETE): ours vs mcp's stateful
           path under both stacks, and the RSS an idle legacy session costs each
  bridge   `mcp-stateless bridge` in front of the TS SDK 1.x everything server vs calling it directly, over its
           Streamable HTTP and over stdio (bench/bridge_bench.py, also runnable alone)

Servers run pinned to core 0, load generators to core 1 (taskset); targets are interleaved over rounds
and each run starts a fresh server; the table shows medians. Every server is stopped by its pid.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import platform
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

import bridge_bench  # noqa: E402
import loadgen  # noqa: E402
import wire  # noqa: E402

OURS_PY = os.environ.get("BENCH_OURS_PYTHON", str(ROOT / ".venv/bin/python"))
PEERS_PY = os.environ.get("BENCH_PEERS_PYTHON", str(ROOT / ".cache/venv-bench-peers/bin/python"))
SERVER_CPU = os.environ.get("BENCH_SERVER_CPU", "0")
CLIENT_CPU = os.environ.get("BENCH_CLIENT_CPU", "1")
RESULTS_DIR = ROOT / ".cache/bench-results"

HTTP_TARGETS = ("bare", "ours", "ours_legacy", "ours_sync", "ours_metrics", "ours_otel", "mcp", "fastmcp")
SSE_TARGETS = ("ours", "mcp", "fastmcp")
STDIO_TARGETS = ("ours", "mcp", "fastmcp")
STACKS = ("h11", "fast")
STACK_LABEL = {"h11": "uvicorn h11+asyncio", "fast": "uvicorn httptools+uvloop"}


def log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def python_for(target: str) -> str:
    return PEERS_PY if target in ("mcp", "fastmcp", "mcp_legacy") else OURS_PY


def pinned(cpu: str, cmd: list[str]) -> list[str]:
    return ["taskset", "-c", cpu, *cmd] if shutil.which("taskset") else cmd


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def raise_nofile() -> int:
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = hard if hard != resource.RLIM_INFINITY else 1 << 20
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


class Server:
    """One HTTP target under uvicorn, pinned to the server core; stopped by pid."""

    def __init__(self, target: str, stack: str, *, sse: bool = False, extra_env: dict[str, str] | None = None):
        self.target, self.stack, self.port = target, stack, free_port()
        cmd = [python_for(target), str(HERE / "serve.py"), target, "--port", str(self.port), "--stack", stack]
        if sse:
            cmd.append("--sse")
        self.log_path = Path(tempfile.mkstemp(prefix=f"bench-{target}-", suffix=".log")[1])
        env = {**os.environ, "PYTHONUNBUFFERED": "1", **(extra_env or {})}
        self._log = self.log_path.open("wb")
        self.proc = subprocess.Popen(pinned(SERVER_CPU, cmd), stdout=self._log, stderr=subprocess.STDOUT,
                                     env=env, cwd=str(ROOT), start_new_session=True)
        self.pid = self.proc.pid  # taskset execs the command: same pid

    def wait_ready(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.target} exited: {self.log_path.read_text()[-2000:]}")
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", self.port)) == 0:
                    return
            time.sleep(0.05)
        raise RuntimeError(f"{self.target} did not listen within {timeout}s")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self._log.close()
        with contextlib.suppress(OSError):
            self.log_path.unlink()

    def __enter__(self) -> Server:
        try:
            self.wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def call_once(port: int, raw: bytes, timeout: float = 10.0) -> bytes:
    """One request on a fresh connection; returns the whole response (head and body)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(raw)
        data = b""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
            head, sep, rest = data.partition(b"\r\n\r\n")
            if not sep:
                continue
            low = head.lower()
            if b"content-length:" in low:
                n = int(low.split(b"content-length:", 1)[1].split(b"\r\n", 1)[0])
                if len(rest) >= n:
                    break
            elif data.endswith(b"\r\n0\r\n\r\n"):
                break
        return data


def check_echo(port: int, progress: bool) -> None:
    reqs = wire.echo_requests(port, progress=progress)
    resp = call_once(port, reqs[0])
    if not resp.startswith(b"HTTP/1.1 200") or b'"hi"' not in resp:
        raise RuntimeError(f"bad answer: {resp[:500]!r}")
    if progress and b"notifications/progress" not in resp:
        raise RuntimeError(f"no progress notification over SSE: {resp[:500]!r}")


def run_loadgen(port: int, reqs: list[bytes], *, pid: int | None, duration: float, warmup: float,
                conns: int = 16, max_requests: int = 10**9, expect: str = '"hi"') -> dict[str, Any]:
    with tempfile.NamedTemporaryFile(prefix="bench-req-", delete=False) as f:
        path = f.name
    try:
        loadgen.write_requests(path, reqs)
        cmd = [OURS_PY, str(HERE / "loadgen.py"), "--port", str(port), "--requests", path, "--conns", str(conns),
               "--duration", str(duration), "--warmup", str(warmup), "--max-requests", str(max_requests),
               "--expect", expect]
        if pid:
            cmd += ["--pid", str(pid)]
        out = subprocess.run(pinned(CLIENT_CPU, cmd), capture_output=True, timeout=duration + warmup + 60,
                             check=True)
        return dict(json.loads(out.stdout))
    finally:
        os.unlink(path)


def run_wrk(port: int, duration: float, progress: bool = False) -> float | None:
    if not shutil.which("wrk"):
        return None
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as f:
        f.write(wire.wrk_lua(port, progress))
        lua = f.name
    try:
        out = subprocess.run(pinned(CLIENT_CPU, ["wrk", "-t1", "-c16", f"-d{max(1, round(duration))}s", "-s", lua,
                                                 f"http://127.0.0.1:{port}/mcp"]),
                             capture_output=True, text=True, timeout=duration + 30)
        for line in out.stdout.splitlines():
            if line.startswith("Requests/sec:"):
                return float(line.split()[1])
        # non-2xx would show as "Non-2xx or 3xx responses"; treat as failure
        return None
    finally:
        os.unlink(lua)


def median(vals: list[float]) -> float:
    vals = [v for v in vals if v == v]
    return statistics.median(vals) if vals else float("nan")


def fmt(v: float | None, nd: int = 0) -> str:
    if v is None or v != v:
        return "–"
    return f"{v:,.{nd}f}"


# ---------------------------------------------------------------------------------------------- sections
def section_check(cfg: argparse.Namespace, results: dict[str, Any]) -> None:
    """Our load generator vs wrk, on the fastest thing we serve: is the generator the bottleneck?"""
    rows = []
    for target in ("bare", "ours"):
        lg: list[float] = []
        wk: list[float] = []
        for _ in range(cfg.rounds):
            with Server(target, "fast") as srv:
                check_echo(srv.port, False)
                reqs = wire.echo_requests(srv.port)
                lg.append(run_loadgen(srv.port, reqs, pid=srv.pid, duration=cfg.duration, warmup=cfg.warmup)["rps"])
                w = run_wrk(srv.port, cfg.duration)
                if w is not None:
                    wk.append(w)
        rows.append({"target": target, "loadgen_rps": median(lg), "wrk_rps": median(wk) if wk else None})
        log(f"check {target}: loadgen {median(lg):,.0f}/s, wrk {fmt(median(wk) if wk else None)}/s")
    results["check"] = rows


def section_http(cfg: argparse.Namespace, results: dict[str, Any], *, sse: bool) -> None:
    key = "sse" if sse else "http"
    targets = [t for t in (SSE_TARGETS if sse else HTTP_TARGETS) if t in cfg.targets]
    stacks = [s for s in STACKS if s in (cfg.sse_stacks if sse else cfg.stacks)]
    runs: dict[str, list[dict[str, Any]]] = {f"{t}/{s}": [] for t in targets for s in stacks}
    for r in range(cfg.rounds):
        order = [(t, s) for s in stacks for t in targets]
        # rotate the order each round so no target always runs first or last
        k = r % len(order)
        order = order[k:] + order[:k]
        for t, s in order:
            try:
                with Server(t, s, sse=sse) as srv:
                    check_echo(srv.port, sse)
                    reqs = wire.echo_requests(srv.port, progress=sse)
                    res = run_loadgen(srv.port, reqs, pid=srv.pid, duration=cfg.duration, warmup=cfg.warmup,
                                      expect="notifications/progress" if sse else '"hi"')
            except Exception as e:  # a target that cannot run is reported, not fatal
                log(f"{key} {t}/{s} round {r + 1}: FAILED {e}")
                res = {"error": str(e)[:300]}
            if res.get("errors"):
                log(f"{key} {t}/{s}: {res['errors']} errors, first: {res.get('first_error', '')[:200]!r}")
            runs[f"{t}/{s}"].append(res)
            if "rps" in res:
                log(f"{key} {t}/{s} round {r + 1}: {res['rps']:,.0f}/s, {res['cpu_us_per_call']:.0f} µs CPU/call, "
                    f"p50 {res['p50_ms']:.2f} ms, p99 {res['p99_ms']:.2f} ms")
    results[key] = summarize(runs)


def summarize(runs: dict[str, list[dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """Medians over the rounds of each target/stack."""
    summary = {}
    for name, rs in runs.items():
        ok = [x for x in rs if "rps" in x]
        summary[name] = {
            "rounds": len(ok),
            "rps": median([x["rps"] for x in ok]),
            "rps_all": [round(x["rps"]) for x in ok],
            "cpu_us_per_call": median([x["cpu_us_per_call"] for x in ok]),
            "p50_ms": median([x["p50_ms"] for x in ok]),
            "p99_ms": median([x["p99_ms"] for x in ok]),
            "errors": sum(x.get("errors", 0) for x in ok),
        }
    return summary


AUTH_LOADS = ("anonymous", "anonymous_header", "jwt")
AUTH_LABEL = {"anonymous": "anonymous", "anonymous_header": "anonymous, same Authorization header (ignored)",
              "jwt": "JWT bearer checked"}
AUTH_RESOURCE = "https://mcp.bench.example/mcp"  # the audience tokens are minted for (nothing listens there)


def section_auth(cfg: argparse.Namespace, results: dict[str, Any]) -> None:
    """The same echo server anonymous and as an OAuth resource server (RS256 JWT access token on every
    request, keys cached after the first fetch); and the anonymous one sent the same Authorization header,
    which it ignores, to tell what carrying a token costs the HTTP stack from what checking it costs us.
    Both servers run side by side on the server core and the load goes to one at a time, in an order
    rotated per round, so the windows of one round see the same machine; each cost is the median over
    rounds of that round's ratio to the anonymous window."""
    from issuer import Issuer

    issuer = Issuer()
    token = issuer.token(AUTH_RESOURCE)
    env = {"BENCH_AUTH_ISSUER": issuer.url, "BENCH_AUTH_RESOURCE": AUTH_RESOURCE}
    out: dict[str, Any] = {}
    try:
        for stack in [s for s in STACKS if s in cfg.stacks]:
            runs: dict[str, list[dict[str, Any]]] = {load: [] for load in AUTH_LOADS}
            ratios: dict[str, dict[str, list[float]]] = {load: {"rps": [], "cpu": []} for load in AUTH_LOADS[1:]}
            try:
                with (Server("ours_anon", stack, extra_env=env) as anon,
                      Server("ours_jwt", stack, extra_env=env) as jwt):
                    bearer = f"Bearer {token}"
                    loads = {"anonymous": (anon, wire.echo_requests(anon.port)),
                             "anonymous_header": (anon, wire.echo_requests(anon.port, authorization=bearer)),
                             "jwt": (jwt, wire.echo_requests(jwt.port, authorization=bearer))}
                    for load, (srv, reqs) in loads.items():
                        resp = call_once(srv.port, reqs[0])
                        if not resp.startswith(b"HTTP/1.1 200") or b'"hi"' not in resp:
                            raise RuntimeError(f"{load}: bad answer: {resp[:500]!r}")
                    bare = call_once(jwt.port, wire.echo_requests(jwt.port)[0])
                    if not bare.startswith(b"HTTP/1.1 401"):  # authentication is really on
                        raise RuntimeError(f"no 401 without a token: {bare[:300]!r}")
                    for r in range(cfg.rounds):
                        k = r % len(AUTH_LOADS)
                        got = {}
                        for load in AUTH_LOADS[k:] + AUTH_LOADS[:k]:
                            srv, reqs = loads[load]
                            res = run_loadgen(srv.port, reqs, pid=srv.pid, duration=cfg.duration, warmup=cfg.warmup)
                            runs[load].append(res)
                            got[load] = res
                            log(f"auth {load}/{stack} round {r + 1}: {res['rps']:,.0f}/s, "
                                f"{res['cpu_us_per_call']:.0f} µs CPU/call")
                        base = got["anonymous"]
                        for load in AUTH_LOADS[1:]:
                            ratios[load]["rps"].append(got[load]["rps"] / base["rps"])
                            ratios[load]["cpu"].append(got[load]["cpu_us_per_call"] / base["cpu_us_per_call"])
            except Exception as e:
                log(f"auth {stack}: FAILED {e}")
                out[stack] = {"error": str(e)[:300]}
                continue
            out[stack] = {"loads": summarize(runs), "ratios": {
                load: {"rps": median(r["rps"]), "cpu": median(r["cpu"]), "rps_all": [round(x, 3) for x in r["rps"]]}
                for load, r in ratios.items()}}
    finally:
        issuer.stop()
    results["auth"] = out


def section_stdio(cfg: argparse.Namespace, results: dict[str, Any]) -> None:
    targets = [t for t in STDIO_TARGETS if t in cfg.targets]
    runs: dict[str, list[dict[str, Any]]] = {t: [] for t in targets}
    for r in range(cfg.rounds):
        k = r % len(targets)
        for t in targets[k:] + targets[:k]:
            server = pinned(SERVER_CPU, [python_for(t), str(HERE / "serve.py"), t, "--stdio"])
            cmd = [OURS_PY, str(HERE / "stdio_client.py"), "--inflight", "16", "--duration", str(cfg.duration),
                   "--warmup", str(cfg.warmup), "--", *server]
            try:
                out = subprocess.run(pinned(CLIENT_CPU, cmd), capture_output=True, timeout=cfg.duration + 90,
                                     check=True, cwd=str(ROOT))
                res = json.loads(out.stdout)
            except Exception as e:
                res = {"error": str(e)[:300]}
            runs[t].append(res)
            if "rps" in res:
                log(f"stdio {t} round {r + 1}: {res['rps']:,.0f}/s, {res['cpu_us_per_call']:.0f} µs CPU/call")
            else:
                log(f"stdio {t} round {r + 1}: FAILED {res}")
    results["stdio"] = {
        t: {"rps": median([x["rps"] for x in rs if "rps" in x]),
            "cpu_us_per_call": median([x["cpu_us_per_call"] for x in rs if "rps" in x]),
            "rss_kb": median([x["rss_kb"] for x in rs if "rps" in x]),
            "errors": sum(x.get("errors", 0) for x in rs)}
        for t, rs in runs.items()
    }


def _rss_kb(pid: int) -> int:
    return loadgen.rss_kb(pid)


def section_memory(cfg: argparse.Namespace, results: dict[str, Any]) -> None:
    """Idle RSS, then RSS after N calls from 10,000 distinct client infos and principals."""
    total = cfg.memory_requests
    out: dict[str, Any] = {}
    for t in [t for t in ("ours", "mcp", "fastmcp") if t in cfg.targets]:
        try:
            with Server(t, "fast") as srv:
                check_echo(srv.port, False)
                time.sleep(0.5)
                idle = _rss_kb(srv.pid)
                reqs = wire.echo_requests(srv.port, distinct=10_000)
                first = run_loadgen(srv.port, reqs, pid=srv.pid, duration=60, warmup=0, max_requests=10_000)
                after_10k = _rss_kb(srv.pid)
                rest = run_loadgen(srv.port, reqs, pid=srv.pid, duration=max(60.0, total / 500), warmup=0,
                                   max_requests=total - first["requests"])
                time.sleep(0.5)
                after = _rss_kb(srv.pid)
                n = first["requests"] + rest["requests"]
                out[t] = {"idle_kb": idle, "after_10k_kb": after_10k, "after_kb": after, "requests": n,
                          "errors": first["errors"] + rest["errors"],
                          "growth_vs_idle": after / idle - 1, "growth_vs_10k": after / after_10k - 1}
                log(f"memory {t}: idle {idle / 1024:.1f} MB, after 10k {after_10k / 1024:.1f} MB, "
                    f"after {n:,} calls {after / 1024:.1f} MB")
        except Exception as e:
            log(f"memory {t}: FAILED {e}")
            out[t] = {"error": str(e)[:300]}
    results["memory"] = out


def section_listen(cfg: argparse.Namespace, results: dict[str, Any]) -> None:
    n = cfg.listen_streams
    nofile = raise_nofile()
    if nofile < n + 1000:
        log(f"listen: RLIMIT_NOFILE is {nofile}, fewer than {n} streams need; skipped")
        results["listen"] = {"skipped": f"RLIMIT_NOFILE {nofile}"}
        return
    with Server("ours", "fast") as srv:
        check_echo(srv.port, False)
        idle = _rss_kb(srv.pid)
        cmd = [OURS_PY, str(HERE / "listen_client.py"), "--port", str(srv.port), "--streams", str(n),
               "--pid", str(srv.pid), "--idle", str(cfg.listen_idle)]
        try:
            out = subprocess.run(pinned(CLIENT_CPU, cmd), capture_output=True, timeout=300, check=True)
            res = json.loads(out.stdout)
        except subprocess.CalledProcessError as e:
            res = {"error": e.stderr.decode()[-1000:]}
        except Exception as e:
            res = {"error": str(e)[:300]}
        res["idle_before_kb"] = idle
        results["listen"] = res
        log(f"listen: {res}")


def section_client(cfg: argparse.Namespace, results: dict[str, Any]) -> None:
    """Hook: bench/client_bench.py is written by the client engineer; run it when it is there."""
    script = HERE / "client_bench.py"
    if not script.exists():
        results["client"] = {"skipped": "bench/client_bench.py does not exist yet"}
        log("client: bench/client_bench.py not there yet; skipped")
        return
    cmd = [OURS_PY, str(script), "--seconds", str(cfg.duration), "--concurrency", "1,16"]
    env = {**os.environ, "BENCH_PEERS_PYTHON": PEERS_PY, "BENCH_SERVER_CPU": SERVER_CPU,
           "BENCH_CLIENT_CPU": CLIENT_CPU}
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=900, env=env, cwd=str(ROOT))
        results["client"] = {"rc": out.returncode, "stdout": out.stdout[-4000:], "stderr": out.stderr[-2000:]}
        log(f"client: rc={out.returncode}\n{out.stdout[-2000:]}")
    except Exception as e:
        results["client"] = {"error": str(e)[:300]}


LEGACY_TARGETS = ("ours_legacy", "mcp_legacy")


def run_legacy_client(port: int, pid: int, args: list[str], timeout: float) -> dict[str, Any]:
    cmd = [OURS_PY, str(HERE / "legacy_client.py"), "--port", str(port), "--pid", str(pid), *args]
    out = subprocess.run(pinned(CLIENT_CPU, cmd), capture_output=True, timeout=timeout, check=True)
    return dict(json.loads(out.stdout))


def section_legacy(cfg: argparse.Namespace, results: dict[str, Any]) -> None:
    """2025-era session traffic, ours vs mcp's stateful sessions, interleaved like the http section;
    then the RSS of idle sessions on a fresh server of each."""
    stacks = [s for s in STACKS if s in cfg.stacks]
    runs: dict[str, list[dict[str, Any]]] = {f"{t}/{s}": [] for t in LEGACY_TARGETS for s in stacks}
    for r in range(cfg.rounds):
        order = [(t, s) for s in stacks for t in LEGACY_TARGETS]
        k = r % len(order)
        for t, s in order[k:] + order[:k]:
            try:
                with Server(t, s) as srv:
                    res = run_legacy_client(srv.port, srv.pid, ["--duration", str(cfg.duration),
                                                                "--warmup", str(cfg.warmup)],
                                            cfg.duration + cfg.warmup + 90)
            except Exception as e:
                log(f"legacy {t}/{s} round {r + 1}: FAILED {e}")
                res = {"error": str(e)[:300]}
            runs[f"{t}/{s}"].append(res)
            if "rps" in res:
                log(f"legacy {t}/{s} round {r + 1}: {res['sessions_per_s']:,.0f} sessions/s, {res['rps']:,.0f} "
                    f"requests/s, {res['cpu_us_per_request']:.0f} µs CPU/request, {res['errors']} errors")
    summary: dict[str, Any] = {}
    for name, rs in runs.items():
        ok = [x for x in rs if "rps" in x]
        summary[name] = {
            "rounds": len(ok), "rps": median([x["rps"] for x in ok]),
            "sessions_per_s": median([x["sessions_per_s"] for x in ok]),
            "rps_all": [round(x["rps"]) for x in ok],
            "cpu_us_per_request": median([x["cpu_us_per_request"] for x in ok]),
            "session_p50_ms": median([x["session_p50_ms"] for x in ok]),
            "session_p99_ms": median([x["session_p99_ms"] for x in ok]),
            "rss_after_kb": median([x["rss_kb"] for x in ok]),
            "errors": sum(x.get("errors", 0) for x in ok),
            "first_error": next((x["first_error"] for x in ok if x.get("first_error")), ""),
        }
    idle: dict[str, Any] = {}
    for t in LEGACY_TARGETS:
        try:
            with Server(t, "fast") as srv:
                idle[t] = run_legacy_client(srv.port, srv.pid, ["--mode", "idle", "--sessions",
                                                                str(cfg.legacy_sessions)], 300)
            log(f"legacy idle {t}: {idle[t]}")
        except Exception as e:
            log(f"legacy idle {t}: FAILED {e}")
            idle[t] = {"error": str(e)[:300]}
    results["legacy"] = {"traffic": summary, "idle": idle}


def section_cluster(cfg: argparse.Namespace, results: dict[str, Any]) -> None:
    import cluster

    results["cluster"] = cluster.run(cfg, log, run_loadgen, lambda port: wire.echo_requests(port))


# ---------------------------------------------------------------------------------------------- report
def versions() -> dict[str, str]:
    def pkgs(py: str, names: list[str]) -> dict[str, str]:
        code = ("import importlib.metadata as m, json, sys\n"
                "out = {}\n"
                "for n in sys.argv[1:]:\n"
                "    try: out[n] = m.version(n)\n"
                "    except Exception: out[n] = '-'\n"
                "print(json.dumps(out))")
        try:
            return dict(json.loads(subprocess.run([py, "-c", code, *names], capture_output=True, text=True,
                                                  timeout=30, check=True).stdout))
        except Exception:
            return {}

    v = {"python": platform.python_version(), "machine": f"{os.cpu_count()} cpu, {platform.machine()}"}
    for k, val in pkgs(OURS_PY, ["mcp-stateless", "uvicorn", "httptools", "uvloop", "h11", "orjson"]).items():
        v[f"ours:{k}"] = val
    for k, val in pkgs(PEERS_PY, ["mcp", "fastmcp", "uvicorn", "httptools", "uvloop", "h11"]).items():
        v[f"peers:{k}"] = val
    if shutil.which("wrk"):
        v["wrk"] = subprocess.run(["wrk", "-v"], capture_output=True, text=True).stdout.split("[")[0].strip()
    with contextlib.suppress(Exception):
        v["git"] = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                                  text=True, timeout=10).stdout.strip()
    return v


def ratio(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or a != a or b != b or b == 0:
        return None
    return a / b


def report(results: dict[str, Any]) -> str:
    lines: list[str] = []
    add = lines.append
    add(f"# mcp-stateless benchmark, {results['date']}  ({results['mode']})")
    add("")
    add("Versions: " + ", ".join(f"{k} {v}" for k, v in results["versions"].items()))
    add("")
    if "check" in results:
        add("## Load generator check (bare ASGI and ours, httptools+uvloop, 16 connections)")
        add("")
        add("| target | bench/loadgen.py calls/s | wrk calls/s | loadgen / wrk |")
        add("|---|---:|---:|---:|")
        for row in results["check"]:
            add(f"| {row['target']} | {fmt(row['loadgen_rps'])} | {fmt(row['wrk_rps'])} | "
                f"{fmt(ratio(row['loadgen_rps'], row['wrk_rps']), 2)} |")
        add("")
    for key, title in (("http", "tools/call echo, JSON response"),
                       ("sse", "tools/call with one progress notification, SSE response")):
        if key not in results:
            continue
        data = results[key]
        add(f"## HTTP {title} (16 in flight, medians of {results['rounds']} rounds)")
        add("")
        add("| stack | target | calls/s | server CPU µs/call | p50 ms | p99 ms | ours ÷ this (calls/s) | "
            "this CPU ÷ bare CPU | errors |")
        add("|---|---|---:|---:|---:|---:|---:|---:|---:|")
        for stack in STACKS:
            ours = data.get(f"ours/{stack}")
            bare = data.get(f"bare/{stack}")
            for t in HTTP_TARGETS:
                d = data.get(f"{t}/{stack}")
                if d is None:
                    continue
                add(f"| {STACK_LABEL[stack]} | {t} | {fmt(d['rps'])} | {fmt(d['cpu_us_per_call'])} | "
                    f"{fmt(d['p50_ms'], 2)} | {fmt(d['p99_ms'], 2)} | "
                    f"{fmt(ratio(ours['rps'], d['rps']) if ours else None, 2)} | "
                    f"{fmt(ratio(d['cpu_us_per_call'], bare['cpu_us_per_call']) if bare else None, 2)} | "
                    f"{d['errors']} |")
        add("")
    if "auth" in results:
        add(f"## Authentication cost: tools/call echo, 16 in flight, {results['rounds']} rounds of interleaved "
            "windows (costs: median over rounds of the ratio to that round's anonymous window)")
        add("")
        add("| stack | load | calls/s | server CPU µs/call | throughput cost | CPU cost | ratio per round | errors |")
        add("|---|---|---:|---:|---:|---:|---|---:|")
        for stack in STACKS:
            d = results["auth"].get(stack)
            if d is None:
                continue
            if "error" in d:
                add(f"| {STACK_LABEL[stack]} | failed: {d['error'][:80]} | | | | | | |")
                continue
            for load in AUTH_LOADS:
                m, r = d["loads"][load], d["ratios"].get(load)
                cost = f"{fmt((1 - r['rps']) * 100, 1)}% | {fmt((r['cpu'] - 1) * 100, 1)}% | {r['rps_all']}" \
                    if r else "– | – | –"
                add(f"| {STACK_LABEL[stack]} | {AUTH_LABEL[load]} | {fmt(m['rps'])} | {fmt(m['cpu_us_per_call'])} | "
                    f"{cost} | {m['errors']} |")
        add("")
    if "stdio" in results:
        add("## stdio, 16 in flight")
        add("")
        add("| target | calls/s | server CPU µs/call | RSS MB | ours ÷ this |")
        add("|---|---:|---:|---:|---:|")
        ours = results["stdio"].get("ours")
        for t, d in results["stdio"].items():
            add(f"| {t} | {fmt(d['rps'])} | {fmt(d['cpu_us_per_call'])} | {fmt(d['rss_kb'] / 1024, 1)} | "
                f"{fmt(ratio(ours['rps'], d['rps']) if ours else None, 2)} |")
        add("")
    if "memory" in results:
        add("## Memory (httptools+uvloop): idle, and after the calls from 10,000 distinct client infos/principals")
        add("")
        add("| target | idle RSS MB | after 10k MB | after all MB | calls | growth vs idle | growth vs 10k |")
        add("|---|---:|---:|---:|---:|---:|---:|")
        for t, d in results["memory"].items():
            if "error" in d:
                add(f"| {t} | failed: {d['error'][:80]} | | | | | |")
                continue
            add(f"| {t} | {d['idle_kb'] / 1024:.1f} | {d['after_10k_kb'] / 1024:.1f} | {d['after_kb'] / 1024:.1f} | "
                f"{d['requests']:,} | {d['growth_vs_idle'] * 100:+.1f}% | {d['growth_vs_10k'] * 100:+.1f}% |")
        add("")
    if "listen" in results:
        d = results["listen"]
        add("## Listen streams on one instance of ours (httptools+uvloop)")
        add("")
        if "opened" in d:
            add("| streams open | RSS before MB | RSS with streams MB | idle CPU % (over the idle window) | "
                "one change event reaches all (s) | delivered |")
            add("|---:|---:|---:|---:|---:|---:|")
            add(f"| {d['opened']:,} | {d['idle_before_kb'] / 1024:.1f} | {d['rss_kb'] / 1024:.1f} | "
                f"{d['idle_cpu_pct']:.1f} | {d['fanout_s']:.3f} | {d['delivered']:,} |")
        else:
            add(f"not measured: {d}")
        add("")
    if "cluster" in results:
        add("## Cluster: instances of ours behind nginx (deploy/nginx.conf), Redis state, 16 in flight")
        add("")
        cl = results["cluster"]
        if "skipped" in cl:
            add(f"skipped: {cl['skipped']}")
        else:
            add("| instances | calls/s (median) | runs |")
            add("|---:|---:|---|")
            for n, d in cl.items():
                add(f"| {n} | {fmt(d['rps'])} | {d['rps_all']} |")
        add("")
    if "client" in results:
        add("## Client (bench/client_bench.py)")
        add("")
        add("```")
        c = results["client"]
        add(c.get("stdout") or json.dumps(c))
        add("```")
        add("")
    if "legacy" in results:
        lg = results["legacy"]
        add("## 2025-era sessions: initialize, initialized, tools/list, tools/call, DELETE (16 connections)")
        add("")
        add("| stack | target | sessions/s | requests/s | server CPU µs/request | session p50 ms | session p99 ms | "
            "RSS after MB | ours ÷ this | errors |")
        add("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
        for stack in STACKS:
            ours = lg["traffic"].get(f"ours_legacy/{stack}")
            for t in LEGACY_TARGETS:
                d = lg["traffic"].get(f"{t}/{stack}")
                if d is None:
                    continue
                add(f"| {STACK_LABEL[stack]} | {t} | {fmt(d['sessions_per_s'])} | {fmt(d['rps'])} | "
                    f"{fmt(d['cpu_us_per_request'])} | {fmt(d['session_p50_ms'], 2)} | "
                    f"{fmt(d['session_p99_ms'], 2)} | {fmt(d['rss_after_kb'] / 1024, 1)} | "
                    f"{fmt(ratio(ours['rps'], d['rps']) if ours else None, 2)} | {d['errors']} |")
        add("")
        add("| target | idle sessions opened | RSS before MB | RSS after MB | kB per idle session |")
        add("|---|---:|---:|---:|---:|")
        for t, d in lg["idle"].items():
            if "error" in d:
                add(f"| {t} | failed: {d['error'][:80]} | | | |")
                continue
            add(f"| {t} | {d['sessions']:,} | {d['rss_before_kb'] / 1024:.1f} | {d['rss_after_kb'] / 1024:.1f} | "
                f"{d['kb_per_session']:.1f} |")
        add("")
    if "bridge" in results:
        for line in bridge_bench.report(results["bridge"], results["rounds"]):
            add(line)
    add("## Targets")
    add("")
    for name, ok, detail in targets_met(results):
        add(f"- {'PASS' if ok else ('FAIL' if ok is not None else 'n/a ')} {name}: {detail}")
    return "\n".join(lines)


def targets_met(results: dict[str, Any]) -> Iterator[tuple[str, bool | None, str]]:
    http = results.get("http", {})

    def get(k: str, f: str) -> float | None:
        d = http.get(k)
        return d[f] if d else None

    r = ratio(get("ours/fast", "rps"), get("mcp/fast", "rps"))
    yield "httptools+uvloop calls/s >= 3x mcp", (r >= 3) if r else None, f"{fmt(r, 2)}x"
    r = ratio(get("ours/fast", "rps"), get("fastmcp/fast", "rps"))
    yield "httptools+uvloop calls/s >= 10x fastmcp", (r >= 10) if r else None, f"{fmt(r, 2)}x"
    r = ratio(get("ours/h11", "cpu_us_per_call"), get("bare/h11", "cpu_us_per_call"))
    yield "plain uvicorn CPU/call <= 1.5x bare ASGI", (r <= 1.5) if r else None, f"{fmt(r, 2)}x"
    def paired(target: str, stack: str) -> float | None:
        """Median over rounds of this target's calls/s over ours' in the same round (each round runs
        both, close in time), so that a round the machine was busy in counts against both."""
        a, b = http.get(f"{target}/{stack}"), http.get(f"ours/{stack}")
        if not a or not b or len(a["rps_all"]) != len(b["rps_all"]) or not a["rps_all"]:
            return None
        return median([x / y for x, y in zip(a["rps_all"], b["rps_all"], strict=True)])

    for stack in STACKS:
        for target, bar, what in (("ours_metrics", 0.9, "metrics on within 10% of off"),
                                  ("ours_otel", 0.95, "otel installed, no exporter, within 5%")):
            r = paired(target, stack)
            cpu = ratio(get(f"{target}/{stack}", "cpu_us_per_call"), get(f"ours/{stack}", "cpu_us_per_call"))
            yield (f"{STACK_LABEL[stack]}: {what}", (r >= bar) if r else None,
                   f"calls/s {fmt(r, 3)}x (median of per-round ratios), CPU/call {fmt(cpu, 3)}x")
    for stack in STACKS:
        r = results.get("auth", {}).get(stack, {}).get("ratios", {}).get("jwt", {}).get("rps")
        yield (f"{STACK_LABEL[stack]}: JWT-authenticated calls cost <= 15% throughput",
               (r >= 0.85) if r else None, f"{fmt((1 - r) * 100, 1)}%" if r else "not measured")
    st = results.get("stdio", {})
    r = ratio(st.get("ours", {}).get("rps"), st.get("mcp", {}).get("rps"))
    yield "stdio calls/s >= 2x mcp", (r >= 2) if r else None, f"{fmt(r, 2)}x"
    mem = results.get("memory", {})
    o, m = mem.get("ours", {}), mem.get("mcp", {})
    if "idle_kb" in o and "idle_kb" in m:
        detail = f"{o['idle_kb'] / 1024:.1f} vs {m['idle_kb'] / 1024:.1f} MB"
        yield "idle RSS below mcp", o["idle_kb"] < m["idle_kb"], detail
    else:
        yield "idle RSS below mcp", None, "not measured"
    if "growth_vs_idle" in o:
        g = o["growth_vs_idle"]
        detail = f"{g * 100:+.1f}% vs idle ({o['growth_vs_10k'] * 100:+.1f}% vs after 10k)"
        yield "RSS flat within 5% after the 100k run", g <= 0.05, detail
    else:
        yield "RSS flat within 5% after the 100k run", None, "not measured"
    lt = results.get("legacy", {}).get("traffic", {})
    for stack in STACKS:
        r = ratio((lt.get(f"ours_legacy/{stack}") or {}).get("rps"), (lt.get(f"mcp_legacy/{stack}") or {}).get("rps"))
        if r is not None:
            yield f"legacy sessions ({STACK_LABEL[stack]}) >= 3x mcp's stateful path", r >= 3, f"{fmt(r, 2)}x"
    ls = results.get("listen", {})
    if "rss_kb" in ls and "fanout_s" in ls:
        yield f"{ls['opened']:,} listen streams within 300 MB", ls["rss_kb"] <= 300 * 1024, \
            f"{ls['rss_kb'] / 1024:.1f} MB"
        yield "change event reaches all within 1 s", ls["fanout_s"] <= 1.0 and ls["delivered"] == ls["opened"], \
            f"{ls['fanout_s']:.3f} s, {ls['delivered']:,}/{ls['opened']:,}"
    else:
        yield "10k listen streams", None, "not measured"


SECTIONS = ("check", "http", "sse", "auth", "stdio", "memory", "listen", "client", "cluster", "legacy", "bridge")


def section_bridge(cfg: argparse.Namespace, results: dict[str, Any]) -> None:
    results["bridge"] = bridge_bench.measure(cfg.rounds, cfg.duration, cfg.warmup, say=log)


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="1 round, 2 s per target, 20k-call memory run, 2,000 streams")
    p.add_argument("--only", default=",".join(SECTIONS), help=f"comma list of {', '.join(SECTIONS)}")
    p.add_argument("--skip", default="", help="comma list of sections to leave out")
    p.add_argument("--rounds", type=int)
    p.add_argument("--duration", type=float, help="measured seconds per run")
    p.add_argument("--warmup", type=float)
    p.add_argument("--targets", default="bare,ours,ours_legacy,ours_sync,ours_metrics,ours_otel,mcp,fastmcp")
    p.add_argument("--stacks", default="h11,fast")
    p.add_argument("--sse-stacks", default="fast", help="stacks for the SSE section (default: httptools+uvloop)")
    p.add_argument("--memory-requests", type=int)
    p.add_argument("--listen-streams", type=int)
    p.add_argument("--listen-idle", type=float, default=5.0, help="seconds the listen streams sit idle")
    p.add_argument("--cluster-sizes", default="1,2,4")
    p.add_argument("--legacy-sessions", type=int, help="idle legacy sessions opened for the memory figure")
    p.add_argument("--out", help="write the markdown report here too")
    cfg = p.parse_args()
    q = cfg.quick
    cfg.rounds = cfg.rounds or (1 if q else 5)
    cfg.duration = cfg.duration or (2.0 if q else 6.0)
    cfg.warmup = cfg.warmup if cfg.warmup is not None else (0.5 if q else 1.5)
    cfg.memory_requests = cfg.memory_requests or (20_000 if q else 100_000)
    cfg.listen_streams = cfg.listen_streams or (2_000 if q else 10_000)
    cfg.legacy_sessions = cfg.legacy_sessions or (1_000 if q else 5_000)
    cfg.targets = cfg.targets.split(",")
    cfg.stacks = cfg.stacks.split(",")
    cfg.sse_stacks = cfg.sse_stacks.split(",")
    cfg.cluster_sizes = [int(x) for x in cfg.cluster_sizes.split(",")]
    skip = set(cfg.skip.split(",")) - {""}
    sections = [s for s in cfg.only.split(",") if s and s not in skip]
    for s in sections:
        if s not in SECTIONS:
            p.error(f"unknown section {s!r}")
    if (any(t in ("mcp", "fastmcp") for t in cfg.targets) or "legacy" in sections) and not Path(PEERS_PY).exists():
        p.error(f"peers' venv missing ({PEERS_PY}): run bash bench/run.sh, which creates it")
    raise_nofile()
    results: dict[str, Any] = {
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "mode": "quick" if q else "full",
        "rounds": cfg.rounds, "duration_s": cfg.duration,
        "versions": versions(),
        "loadavg_start": os.getloadavg(),
    }
    t0 = time.monotonic()
    for s in sections:
        log(f"== {s}")
        try:
            {"check": section_check, "auth": section_auth, "stdio": section_stdio, "memory": section_memory,
             "listen": section_listen, "client": section_client, "cluster": section_cluster, "legacy": section_legacy,
             "bridge": section_bridge,
             "http": lambda c, r: section_http(c, r, sse=False),
             "sse": lambda c, r: section_http(c, r, sse=True)}[s](cfg, results)
        except Exception as e:
            log(f"section {s} failed: {type(e).__name__}: {e}")
            results[s + "_error"] = str(e)[:500]
    results["loadavg_end"] = os.getloadavg()
    results["wall_s"] = time.monotonic() - t0
    text = report(results)
    text += f"\n\nLoad average at start {results['loadavg_start']}, at end {results['loadavg_end']}; " \
            f"wall time {results['wall_s']:.0f} s.\n"
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    (RESULTS_DIR / f"{stamp}.json").write_text(json.dumps(results, indent=1, default=str))
    (RESULTS_DIR / f"{stamp}.md").write_text(text)
    if cfg.out:
        Path(cfg.out).write_text(text)
    print(text)
    log(f"results: {RESULTS_DIR / stamp}.json / .md")


if __name__ == "__main__":
    main()
