"""Helpers for tests/cluster: redis-server, nginx (round-robin, no affinity, deploy/nginx.conf) and three
`mcp-stateless serve` subprocesses sharing one state store (SQLite, Redis, or a Redis Cluster or Postgres the
caller runs) and one MRTR key."""

from __future__ import annotations

import base64
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx

from services import RedisServer, free_port, wait_port

ROOT = Path(__file__).resolve().parents[2]
APP = str(Path(__file__).with_name("cluster_app.py")) + ":app"
EXE = str(Path(sys.executable).with_name("mcp-stateless"))
NGINX = shutil.which("nginx") or "/usr/sbin/nginx"
KEYS = "k1:" + base64.urlsafe_b64encode(b"cluster-test-shared-mrtr-key-0001").decode()
PV = "2026-07-28"




def stop(proc: subprocess.Popen[bytes] | None, sig: int = signal.SIGTERM) -> None:
    if proc is None or proc.poll() is not None:
        return
    proc.send_signal(sig)
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)


class Instance:
    def __init__(self, name: str, state: str, logdir: Path) -> None:
        self.name, self.state, self.port = name, state, free_port()
        self.log = logdir / f"{name}.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> Instance:
        # the caller's MCP_STATELESS_* (state, auth, instance name) must not reach the instances
        env = {k: v for k, v in os.environ.items() if not k.startswith("MCP_STATELESS_")} | {"MCP_STATELESS_KEYS": KEYS}
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(
                [EXE, "serve", APP, "--http", f"127.0.0.1:{self.port}", "--state", self.state,
                 "--instance-name", self.name, "--log-level", "warning"],
                stdout=log, stderr=log, env=env, cwd=str(ROOT))
        return self

    def wait(self) -> Instance:
        assert self.proc is not None
        wait_port(self.port, self.proc, f"instance {self.name} (log: {self.log.read_text()[-2000:]})")
        return self

    def stop(self, sig: int = signal.SIGTERM) -> None:
        stop(self.proc, sig)
        self.proc = None


def nginx_config(listen: int, upstreams: list[int], workdir: Path) -> str:
    """deploy/nginx.conf with this machine's addresses and paths (everything else as shipped)."""
    conf = (ROOT / "deploy" / "nginx.conf").read_text()
    servers = "".join(f"        server 127.0.0.1:{p} max_fails=1 fail_timeout=5s;\n" for p in upstreams)
    conf, n = re.subn(r"(?m)^\s*server 10\.0\.0\.\d+:8000[^\n]*\n", "", conf)
    assert n == 3, "deploy/nginx.conf changed shape: update tests/cluster/conftest.py"
    conf = conf.replace("        keepalive 64;", servers + "        keepalive 64;", 1)
    conf = conf.replace("listen 8080;", f"listen 127.0.0.1:{listen};", 1)
    conf = conf.replace("worker_processes auto;", (
        f"worker_processes 1;\npid {workdir}/nginx.pid;\nerror_log {workdir}/error.log warn;"), 1)
    temp = "".join(f"    {k}_temp_path {workdir}/{k};\n" for k in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
    conf = conf.replace("http {\n", f"http {{\n    access_log {workdir}/access.log;\n{temp}", 1)
    return conf


class Cluster:
    def __init__(self, backend: str, workdir: Path, state: str | None = None) -> None:
        self.backend = backend
        self.workdir = workdir
        self.redis: RedisServer | None = None
        if state is not None:
            pass  # a shared engine the caller runs (Redis Cluster, Postgres)
        elif backend == "redis":
            self.redis = RedisServer(workdir).start()
            state = self.redis.url
        else:
            state = f"sqlite:///{workdir / 'state.db'}"
        self.instances = [Instance(f"i{n}", state, workdir) for n in (1, 2, 3)]
        for i in self.instances:
            i.start()
        for i in self.instances:
            i.wait()
        self.port = free_port()
        ngx = workdir / "nginx"
        ngx.mkdir()
        ngx.chmod(0o777)
        conf = ngx / "nginx.conf"
        conf.write_text(nginx_config(self.port, [i.port for i in self.instances], ngx))
        self.nginx = subprocess.Popen([NGINX, "-p", str(ngx), "-c", str(conf), "-g", "daemon off;"],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        wait_port(self.port, self.nginx, "nginx")
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.http = httpx.Client(timeout=15)

    def restart_all(self) -> None:
        for i in self.instances:
            i.stop()
        for i in self.instances:
            i.start()
        for i in self.instances:
            i.wait()

    def close(self) -> None:
        self.http.close()
        stop(self.nginx, signal.SIGQUIT)
        for i in self.instances:
            i.stop()
        if self.redis is not None:
            self.redis.stop()

    # -- a minimal client ---------------------------------------------------------------------
    def post(self, method: str, params: dict[str, Any], *, who: str = "alice", id_: int = 1,
             caps: dict[str, Any] | None = None) -> httpx.Response:
        p = dict(params)
        p["_meta"] = {"io.modelcontextprotocol/protocolVersion": PV,
                      "io.modelcontextprotocol/clientCapabilities": caps or {}}
        headers = {"content-type": "application/json", "accept": "application/json, text/event-stream",
                   "mcp-protocol-version": PV, "mcp-method": method, "authorization": f"Bearer {who}"}
        if method == "tools/call":
            headers["mcp-name"] = params["name"]
        return self.http.post(self.url, json={"jsonrpc": "2.0", "id": id_, "method": method, "params": p},
                              headers=headers)

    def tool(self, name: str, args: dict[str, Any], **kw: Any) -> tuple[dict[str, Any], str]:
        """(the JSON-RPC response, the instance that answered)."""
        r = self.post("tools/call", {"name": name, "arguments": args}, **kw)
        assert r.status_code == 200, r.text
        body: dict[str, Any] = r.json()
        return body, r.headers["x-mcp-instance"]


