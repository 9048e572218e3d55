"""Optional: tools/call throughput with 1, 2 and 4 instances of ours behind nginx, sharing Redis state.

Runs when deploy/nginx.conf, redis-server and nginx exist; otherwise it reports why it was skipped.
nginx runs deploy/nginx.conf with only the upstream addresses, the listen address and file paths
rewritten (one worker process). Instances are `mcp-stateless serve bench/cluster_app.py:app --state
redis://…` with a shared MRTR key. On a 2-core machine the instances, nginx, Redis and the load
generator share two cores, so this shows the cost of the extra hop and of more processes, not scaling.
"""

from __future__ import annotations

import base64
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
NGINX = shutil.which("nginx") or "/usr/sbin/nginx"
REDIS = shutil.which("redis-server") or "/usr/bin/redis-server"
KEYS = "k1:" + base64.urlsafe_b64encode(b"bench-cluster-shared-mrtr-key-01").decode()


def missing() -> list[str]:
    why = []
    if not (ROOT / "deploy/nginx.conf").exists():
        why.append("deploy/nginx.conf")
    if not Path(REDIS).exists():
        why.append("redis-server")
    if not Path(NGINX).exists():
        why.append("nginx")
    return why


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_port(port: int, proc: subprocess.Popen[bytes], what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    raise RuntimeError(f"{what} did not start (exit {proc.poll()})")


def _stop(proc: subprocess.Popen[bytes] | None, sig: int = signal.SIGTERM) -> None:
    if proc is None or proc.poll() is not None:
        return
    proc.send_signal(sig)
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)


def nginx_config(listen: int, upstreams: list[int], workdir: Path) -> str:
    conf = (ROOT / "deploy/nginx.conf").read_text()
    conf, n = re.subn(r"(?m)^\s*server 10\.0\.0\.\d+:8000[^\n]*\n", "", conf)
    if n == 0 or "keepalive 64;" not in conf or "listen 8080;" not in conf:
        raise RuntimeError("deploy/nginx.conf changed shape: update bench/cluster.py")
    servers = "".join(f"        server 127.0.0.1:{p} max_fails=1 fail_timeout=5s;\n" for p in upstreams)
    conf = conf.replace("        keepalive 64;", servers + "        keepalive 64;", 1)
    conf = conf.replace("listen 8080;", f"listen 127.0.0.1:{listen};", 1)
    conf = conf.replace("worker_processes auto;",
                        f"worker_processes 1;\npid {workdir}/nginx.pid;\nerror_log {workdir}/error.log warn;", 1)
    temp = "".join(f"    {k}_temp_path {workdir}/{k};\n" for k in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
    return conf.replace("http {\n", f"http {{\n    access_log off;\n{temp}", 1)


def run(cfg: Any, log: Callable[[str], None], run_loadgen: Callable[..., dict[str, Any]] | None = None,
        requests: Callable[[int], list[bytes]] | None = None) -> dict[str, Any]:
    why = missing()
    if why:
        log(f"cluster: skipped, missing {', '.join(why)}")
        return {"skipped": "missing " + ", ".join(why)}
    assert run_loadgen is not None and requests is not None
    exe = str(ROOT / ".venv/bin/mcp-stateless")
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="bench-cluster-") as tmp:
        work = Path(tmp)
        redis_port = _free_port()
        redis = subprocess.Popen([REDIS, "--port", str(redis_port), "--bind", "127.0.0.1", "--save", "",
                                  "--appendonly", "no", "--dir", tmp, "--loglevel", "warning"],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            _wait_port(redis_port, redis, "redis-server")
            state = f"redis://127.0.0.1:{redis_port}/0"
            for n in cfg.cluster_sizes:
                rates: list[float] = []
                for _r in range(cfg.rounds):
                    insts: list[subprocess.Popen[bytes]] = []
                    ngx: subprocess.Popen[bytes] | None = None
                    try:
                        ports = [_free_port() for _ in range(n)]
                        env = {**os.environ, "MCP_STATELESS_KEYS": KEYS}
                        env.pop("MCP_STATELESS_STATE", None)
                        for p in ports:
                            insts.append(subprocess.Popen(
                                [exe, "serve", "bench/cluster_app.py:app", "--http", f"127.0.0.1:{p}",
                                 "--state", state, "--log-level", "warning", "--allowed-host", "*"],
                                cwd=str(ROOT), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
                        for p, proc in zip(ports, insts, strict=True):
                            _wait_port(p, proc, "instance")
                        ndir = work / f"nginx-{n}"
                        ndir.mkdir(exist_ok=True)
                        listen = _free_port()
                        conf = ndir / "nginx.conf"
                        conf.write_text(nginx_config(listen, ports, ndir))
                        ngx = subprocess.Popen([NGINX, "-p", str(ndir), "-c", str(conf), "-g", "daemon off;"],
                                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                        _wait_port(listen, ngx, "nginx")
                        res = run_loadgen(listen, requests(listen), pid=None, duration=cfg.duration,
                                          warmup=cfg.warmup)
                        if res.get("errors"):
                            log(f"cluster {n}: {res['errors']} errors: {res.get('first_error', '')[:200]!r}")
                        rates.append(res["rps"])
                        log(f"cluster {n} instance(s): {res['rps']:,.0f}/s, p50 {res['p50_ms']:.2f} ms, "
                            f"p99 {res['p99_ms']:.2f} ms")
                    finally:
                        _stop(ngx, signal.SIGQUIT)
                        for proc in insts:
                            _stop(proc)
                out[str(n)] = {"rps": statistics.median(rates) if rates else None, "rps_all": [round(r) for r in rates]}
        finally:
            _stop(redis)
    return out
