"""Shared fixtures. `served(app)` runs a real uvicorn server for an App on a free 127.0.0.1 port."""

from __future__ import annotations

import asyncio
import socket
import sys
import threading
import time
from collections.abc import Callable, Coroutine, Iterator
from pathlib import Path
from typing import Any

import pytest
import uvicorn

from mcp_stateless import App, HttpTransport
from services import PostgresServer, RedisCluster, RedisServer, valkey_server

ROOT = Path(__file__).resolve().parent.parent
# The fast lane (`pytest -m "not slow"`) stays in process: a test not marked slow that starts a process
# fails. The audit hook is process-wide and cannot be removed, so it only records while `_guard` holds the
# running test's id (set for the setup, call and teardown of unmarked tests, so a fixture that starts
# redis-server counts too). It records rather than only raising, because a test may swallow the error.
_PROCESS_EVENTS = frozenset({"subprocess.Popen", "os.posix_spawn", "os.exec", "os.fork", "os.forkpty",
                             "os.spawn", "os.system", "pty.spawn"})
_guard: dict[str, str | list[str] | None] = {"test": None, "seen": []}


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if _guard["test"] is None or event not in _PROCESS_EVENTS:
        return
    seen = _guard["seen"]
    assert isinstance(seen, list)
    what = f"{event} {args[0]!r}" if args else event
    seen.append(what)
    raise RuntimeError(f"{_guard['test']} starts a process ({what}) but is not marked @pytest.mark.slow")


sys.addaudithook(_audit)


# Fixtures that start a process (a server, an authorization server): a test using one is slow by definition.
_PROCESS_FIXTURES = frozenset({"served", "redis_server", "redis_cluster", "valkey_standalone", "valkey_cluster",
                               "postgres_server", "auth_server"})


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if _PROCESS_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    slow = item.get_closest_marker("slow") is not None
    _guard["test"], _guard["seen"] = (None if slow else item.nodeid), []
    try:
        yield
    finally:
        _guard["test"] = None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    seen = _guard["seen"]
    if isinstance(seen, list) and seen:
        if report.passed:  # the test swallowed the guard's error: it still started (or tried) a process
            report.outcome = "failed"
            report.longrepr = (f"{item.nodeid} started a process ({'; '.join(seen)}) but is not marked "
                               "@pytest.mark.slow: mark it, or keep it in process")
        seen.clear()  # reported once, in the phase that did it


class Served:
    """A running uvicorn server (in a thread of this process) for one App."""

    def __init__(self, app: App, *, http: str = "h11", **transport_kw: Any) -> None:
        self.app = app
        self.transport = HttpTransport(app, **transport_kw)
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.port: int = self.sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        config = uvicorn.Config(
            self.transport,
            log_level="warning",
            access_log=False,
            lifespan="on",
            http=http,
            loop="asyncio",
            timeout_graceful_shutdown=2,
        )
        self.server = uvicorn.Server(config)
        self.loop: asyncio.AbstractEventLoop | None = None
        self.thread = threading.Thread(target=self._run, name=f"uvicorn-{self.port}", daemon=True)

    def _run(self) -> None:
        async def main() -> None:
            self.loop = asyncio.get_running_loop()
            await self.server.serve(sockets=[self.sock])

        asyncio.run(main())

    def start(self) -> Served:
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.01)
        return self

    def run(self, coro: Coroutine[Any, Any, Any], timeout: float = 5) -> Any:
        """Run a coroutine on the server's event loop (e.g. `app.aclose()`, change notifications)."""
        assert self.loop is not None
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(10)
        self.sock.close()
        assert not self.thread.is_alive(), "uvicorn did not stop"


@pytest.fixture
def served() -> Iterator[Callable[..., Served]]:
    """Factory: `served(app, **HttpTransport kwargs)` starts a server; all are stopped after the test."""
    running: list[Served] = []

    def start(app: App, **kw: Any) -> Served:
        s = Served(app, **kw).start()
        running.append(s)
        return s

    yield start
    for s in running:
        s.stop()


@pytest.fixture(scope="session")
def conformance_app() -> App:
    """examples/conformance_server.py:app, imported once."""
    sys.path.insert(0, str(ROOT / "examples"))
    try:
        import conformance_server
    finally:
        sys.path.remove(str(ROOT / "examples"))
    app: App = conformance_server.app
    return app


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """The one real redis-server of the test session (a free port, never the machine's 6379); each test
    takes its own key prefix with `isolated_url()`."""
    server = RedisServer(tmp_path_factory.mktemp("redis")).start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def redis_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisCluster]:
    """The session's one real 3-master, 3-replica Redis Cluster (six redis-server processes on free ports);
    each test takes its own key prefix with `isolated_url()`. A test that kills a node starts its own."""
    cluster = RedisCluster(tmp_path_factory.mktemp("redis-cluster")).start()
    yield cluster
    cluster.stop()


@pytest.fixture(scope="session")
def valkey_standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """The session's one real valkey-server (Valkey 9), for the engines' contract on Valkey."""
    server = RedisServer(tmp_path_factory.mktemp("valkey"), exe=valkey_server()).start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def valkey_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisCluster]:
    """The session's one real 3-master, 3-replica Valkey cluster (six valkey-server processes)."""
    cluster = RedisCluster(tmp_path_factory.mktemp("valkey-cluster"), exe=valkey_server()).start()
    yield cluster
    cluster.stop()


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """The session's one real Postgres cluster (initdb into a temp dir, its own port, never the machine's
    5432); each test takes its own schema with `isolated_url()`."""
    server = PostgresServer().start()
    yield server
    server.remove()
