"""Running the HTTP transport under uvicorn, one process or several workers on one socket.

The fastest stack installed is used (httptools + uvloop when present). On shutdown every open listen
stream first gets its final result, then uvicorn drains connections.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import inspect
import json
import os
import sys
from typing import Any

import uvicorn
from uvicorn.supervisors import multiprocess

from ..server.app import App
from .http import HttpTransport

SETTINGS_ENV = "MCP_STATELESS_SERVE"


@dataclasses.dataclass(frozen=True)
class Settings:
    app_spec: str
    host: str
    port: int
    path: str = "/mcp"
    workers: int = 1
    allowed_hosts: tuple[str, ...] = ()
    allowed_origins: tuple[str, ...] = ()
    max_body: int = 4 * 1024 * 1024
    log_level: str = "info"


_transports: list[HttpTransport] = []


def build_transport(settings: Settings, app: App) -> HttpTransport:
    from ..cli import origin_policy

    policy = origin_policy(settings.host, list(settings.allowed_hosts), list(settings.allowed_origins))
    transport = HttpTransport(app, path=settings.path, origin_policy=policy, max_body=settings.max_body)
    _transports.append(transport)
    return transport


def worker_app() -> HttpTransport:
    """uvicorn factory run inside each worker process."""
    from ..cli import configure_keys, configure_state, load_app

    raw = json.loads(os.environ[SETTINGS_ENV])
    raw["allowed_hosts"] = tuple(raw["allowed_hosts"])
    raw["allowed_origins"] = tuple(raw["allowed_origins"])
    settings = Settings(**raw)
    app = load_app(settings.app_spec)
    configure_keys(app, settings.workers)
    configure_state(app, None, settings.workers)  # the store the parent chose, via MCP_STATELESS_STATE
    return build_transport(settings, app)


class _Server(uvicorn.Server):
    async def shutdown(self, sockets: Any = None) -> None:
        for t in _transports:
            await t.endpoint.aclose()
        await super().shutdown(sockets)


class _WorkerProcess(getattr(multiprocess, "Process", object)):  # type: ignore[misc]
    """One worker of `--workers N` on uvicorn >= 0.35: serves with _Server (listen streams end gracefully)."""

    @property
    def server(self) -> uvicorn.Server:
        srv: uvicorn.Server | None = getattr(self, "_server", None)
        if srv is None:
            srv = self._server = _Server(config=self.config)
        return srv


def _stack() -> dict[str, str]:
    have = importlib.util.find_spec
    return {
        "http": "httptools" if have("httptools") else "h11",
        "loop": "uvloop" if have("uvloop") else "asyncio",
    }


def run(settings: Settings, app: App) -> int:
    common: dict[str, Any] = {
        "host": settings.host,
        "port": settings.port,
        "log_level": settings.log_level,
        "access_log": False,
        "lifespan": "on",
        "timeout_graceful_shutdown": 5,
        "server_header": False,
        **_stack(),
    }
    if settings.workers == 1:
        config = uvicorn.Config(build_transport(settings, app), **common)
        _Server(config).run()
        return 0
    os.environ[SETTINGS_ENV] = json.dumps(dataclasses.asdict(settings))
    config = uvicorn.Config(
        "mcp_stateless.transports.serve_http:worker_app", factory=True, workers=settings.workers, **common
    )
    sock = config.bind_socket()
    if "target" in inspect.signature(multiprocess.Multiprocess.__init__).parameters:  # uvicorn < 0.35
        multiprocess.Multiprocess(config, target=_Server(config).run, sockets=[sock]).run()  # type: ignore[call-arg,unused-ignore]
    else:
        # Newer uvicorn builds each worker's Server itself; have it build ours (the class is pickled to the
        # spawned worker by name, so the worker imports this module and runs _Server).
        multiprocess.Process = _WorkerProcess  # type: ignore[misc,unused-ignore]
        multiprocess.Multiprocess(config, sockets=[sock]).run()
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(0)
