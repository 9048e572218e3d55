"""Running HTTP transports under uvicorn: in this process, or in several worker processes on one socket.

The fastest stack installed is used (httptools + uvloop when present). On shutdown every endpoint served
through `drained` is closed first, so its open listen streams get their final result, and only then
does uvicorn drain connections.

Worker processes cannot be handed objects: each builds its own transport by calling a zero-argument
factory that `run` names by import path ("package.module:function"). How the factory learns its
configuration is its owner's business (the CLI passes its `ServeConfig` in one environment variable).

Limits (`EdgeLimits`, see `edge.py`): idle/header/body timeouts and a connection cap, enforced by our
httptools protocol; the cap is lowered to fit the process's open-file limit (RLIMIT_NOFILE, raised up to
its hard limit when needed), since a connection accept() cannot take a descriptor for is not refused
cleanly, it is not even seen. Sync handlers run in a default executor of `tool_threads` threads (the
state stores have their own threads, so store I/O never queues behind a blocked tool).
"""

from __future__ import annotations

import asyncio
import importlib.util
import inspect
import logging
from collections.abc import Awaitable, Callable, MutableMapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import uvicorn
from uvicorn.supervisors import multiprocess

from ..protocol.endpoint import Endpoint
from .http import HttpTransport
from .limits import LIMITS_ATTR, EdgeLimits

log = logging.getLogger("mcp_stateless.http")

ASGIApp = Callable[[MutableMapping[str, Any], Any, Any], Awaitable[None]]

DEFAULT_TOOL_THREADS = 64
_THREADS_ATTR = "mcp_stateless_tool_threads"
# Descriptors kept free for everything that is not a client connection (listening socket, state
# store, log files, the app's own files).
_FD_RESERVE = 64

# Endpoints of the transports this process serves, closed before uvicorn's own shutdown.
_endpoints: list[Endpoint] = []


def drained(transport: HttpTransport) -> HttpTransport:
    """`transport`, whose endpoint `run` drains on shutdown (its listen streams get their final result
    before uvicorn closes connections)."""
    _endpoints.append(transport.endpoint)
    return transport


class _Server(uvicorn.Server):
    async def serve(self, sockets: Any = None) -> None:
        threads: int | None = getattr(self.config, _THREADS_ATTR, None)
        if threads:
            asyncio.get_running_loop().set_default_executor(
                ThreadPoolExecutor(max_workers=threads, thread_name_prefix="mcp-tool"))
        await super().serve(sockets)

    async def shutdown(self, sockets: Any = None) -> None:
        for endpoint in _endpoints:
            await endpoint.drain()  # listen streams end now; the lifespan shutdown closes after the drain
        await super().shutdown(sockets)


class _WorkerProcess(getattr(multiprocess, "Process", object)):  # type: ignore[misc]
    """One worker of several on uvicorn >= 0.35: serves with _Server (listen streams end gracefully)."""

    @property
    def server(self) -> uvicorn.Server:
        srv: uvicorn.Server | None = getattr(self, "_server", None)
        if srv is None:
            srv = self._server = _Server(config=self.config)
        return srv


def _stack() -> dict[str, str]:
    have = importlib.util.find_spec
    return {
        # without httptools, plain h11: only the idle (keep-alive) timeout applies
        "http": f"{__package__}.edge:GuardedHttpToolsProtocol" if have("httptools") else "h11",
        "loop": "uvloop" if have("uvloop") else "asyncio",
    }


def fit_connection_cap(wanted: int) -> int:
    """`wanted`, or fewer if this process may not open that many descriptors (after raising its soft
    RLIMIT_NOFILE toward the hard limit)."""
    try:
        import resource
    except ImportError:  # not POSIX
        return wanted
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = wanted + _FD_RESERVE
    if soft != resource.RLIM_INFINITY and soft < need:
        target = need if hard == resource.RLIM_INFINITY else min(need, hard)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):
            pass
    if soft == resource.RLIM_INFINITY or soft >= need:
        return wanted
    fitted = max(1, soft - _FD_RESERVE)
    log.warning("connection cap lowered from %d to %d to fit the open-file limit (ulimit -n %d)",
                wanted, fitted, soft)
    return fitted


def _configure(config: uvicorn.Config, limits: EdgeLimits, tool_threads: int) -> uvicorn.Config:
    setattr(config, LIMITS_ATTR, limits)
    setattr(config, _THREADS_ATTR, tool_threads)
    return config


def run(target: ASGIApp | str, *, host: str, port: int, workers: int = 1, log_level: str = "info",
        limits: EdgeLimits | None = None, tool_threads: int = DEFAULT_TOOL_THREADS,
        uvicorn_logging: bool = True) -> int:
    """Serve until SIGINT/SIGTERM, then return the exit status.

    `target` is a transport from `http_transport` (or an ASGI app in front of one; this process only), or
    the import path of a factory returning one, which each of `workers` processes calls for itself.
    `limits`: timeouts and the connection cap (per process); `tool_threads`: threads for sync handlers
    (per process). `uvicorn_logging=False` leaves uvicorn's loggers to the root logger's handlers (the
    caller's format).
    """
    limits = limits or EdgeLimits()
    cap = fit_connection_cap(limits.max_connections)
    if cap != limits.max_connections:
        limits = EdgeLimits(limits.idle_timeout, limits.header_timeout, limits.body_timeout, cap)
    common: dict[str, Any] = {
        "host": host,
        "port": port,
        "log_level": log_level,
        **({} if uvicorn_logging else {"log_config": None}),
        "access_log": False,
        "lifespan": "on",
        "timeout_graceful_shutdown": 5,
        "server_header": False,
        **_stack(),
    }
    if not isinstance(target, str):
        if workers != 1:
            raise ValueError("several workers need the import path of a transport factory, not a transport")
        _Server(_configure(uvicorn.Config(target, **common), limits, tool_threads)).run()
        return 0
    config = _configure(uvicorn.Config(target, factory=True, workers=workers, **common), limits, tool_threads)
    if workers == 1:
        _Server(config).run()
        return 0
    sock = config.bind_socket()
    if "target" in inspect.signature(multiprocess.Multiprocess.__init__).parameters:  # uvicorn < 0.35
        multiprocess.Multiprocess(config, target=_Server(config).run, sockets=[sock]).run()  # type: ignore[call-arg,unused-ignore]
    else:
        # Newer uvicorn builds each worker's Server itself; have it build ours (the class is pickled to the
        # spawned worker by name, so the worker imports this module and runs _Server).
        multiprocess.Process = _WorkerProcess  # type: ignore[misc,unused-ignore]
        multiprocess.Multiprocess(config, sockets=[sock]).run()
    return 0
