"""Running HTTP transports under uvicorn: in this process, or in several worker processes on one socket.

The fastest stack installed is used (httptools + uvloop when present). On shutdown every endpoint served
through `http_transport` is closed first, so its open listen streams get their final result, and only then
does uvicorn drain connections.

Worker processes cannot be handed objects: each builds its own transport by calling a zero-argument
factory that `run` names by import path ("package.module:function"). How the factory learns its
configuration is its owner's business (the CLI passes its `ServeConfig` in one environment variable).
"""

from __future__ import annotations

import importlib.util
import inspect
from typing import Any

import uvicorn
from uvicorn.supervisors import multiprocess

from ..protocol.endpoint import Endpoint, LegacyEndpoint
from ..protocol.principal import Authenticator
from ..protocol.security import OriginPolicy
from .http import DEFAULT_MAX_BODY, HttpTransport

# Endpoints of the transports this process serves, closed before uvicorn's own shutdown.
_endpoints: list[Endpoint] = []


def http_transport(
    endpoint: Endpoint,
    *,
    path: str | None = "/mcp",
    origin_policy: OriginPolicy | None = None,
    max_body: int = DEFAULT_MAX_BODY,
    instance: str | None = None,
    authenticator: Authenticator | None = None,
    legacy: LegacyEndpoint | None = None,
) -> HttpTransport:
    """An `HttpTransport` for `endpoint` whose listen streams `run` ends gracefully on shutdown
    (`authenticator`: None applies the endpoint's own, as `HttpTransport` does)."""
    _endpoints.append(endpoint)
    return HttpTransport(endpoint, authenticator=authenticator, path=path, origin_policy=origin_policy,
                         max_body=max_body, instance=instance, legacy=legacy)


class _Server(uvicorn.Server):
    async def shutdown(self, sockets: Any = None) -> None:
        for endpoint in _endpoints:
            await endpoint.aclose()
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
        "http": "httptools" if have("httptools") else "h11",
        "loop": "uvloop" if have("uvloop") else "asyncio",
    }


def run(target: HttpTransport | str, *, host: str, port: int, workers: int = 1, log_level: str = "info") -> int:
    """Serve until SIGINT/SIGTERM, then return the exit status.

    `target` is a transport from `http_transport` (this process only), or the import path of a factory
    returning one, which each of `workers` processes calls for itself.
    """
    common: dict[str, Any] = {
        "host": host,
        "port": port,
        "log_level": log_level,
        "access_log": False,
        "lifespan": "on",
        "timeout_graceful_shutdown": 5,
        "server_header": False,
        **_stack(),
    }
    if isinstance(target, HttpTransport):
        if workers != 1:
            raise ValueError("several workers need the import path of a transport factory, not a transport")
        _Server(uvicorn.Config(target, **common)).run()
        return 0
    config = uvicorn.Config(target, factory=True, workers=workers, **common)
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
