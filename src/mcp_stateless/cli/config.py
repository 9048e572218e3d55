"""`ServeConfig`: everything `mcp-stateless serve` was told, as one immutable object.

The command line (plus the documented environment settings it falls back to) builds it once; the process
that serves, and every worker process of `--workers N`, derives all it does from it. Workers are separate
processes started by uvicorn, so the config reaches them serialised as JSON in one environment variable
(`SERVE_CONFIG_ENV`), written by `to_env` in the parent and read by `from_env` in each worker. Nothing else
travels through the environment.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass, field
from typing import Any, Literal

from ..protocol.security import LOOPBACK_HOSTS, OriginPolicy

SERVE_CONFIG_ENV = "MCP_STATELESS_SERVE"
DEFAULT_MAX_BODY = 4 * 1024 * 1024
# The edge limits' defaults (transports/limits.py, transports/serve_http.py), restated here so that parsing
# the command line imports no server code.
DEFAULT_IDLE_TIMEOUT = 5.0
DEFAULT_HEADER_TIMEOUT = 10.0
DEFAULT_BODY_TIMEOUT = 30.0
DEFAULT_MAX_CONNECTIONS = 1000
DEFAULT_TOOL_THREADS = 64
DEFAULT_MAX_INFLIGHT = 32
DEFAULT_MAX_LISTEN_STREAMS = 100  # transports/http: per principal, or peer address when anonymous

Transport = Literal["stdio", "http"]
LogLevel = Literal["debug", "info", "warning", "error", "critical"]
LOG_LEVELS: tuple[LogLevel, ...] = ("debug", "info", "warning", "error", "critical")
LogFormat = Literal["text", "json"]
LOG_FORMATS: tuple[LogFormat, ...] = ("text", "json")
LegacyMode = Literal["serve", "reject"]
LEGACY_MODES: tuple[LegacyMode, ...] = ("serve", "reject")


@dataclass(frozen=True, slots=True)
class ServeConfig:
    """`app`: `path/to/file.py:attr` or `package.module:attr` (attr defaults to `app`).
    `state`: the state URL; None keeps the app's own state, or opens the per-app SQLite default.
    `keys`: the MRTR key ring (`kid:base64secret[,...]`); None keeps the app's own.
    `allowed_hosts`/`allowed_origins`: added to the Host/Origin policy ('*' host: no check).
    `instance_name`: sent as `X-Mcp-Instance` on every HTTP response (None: not sent).
    `legacy`: "serve" answers 2025-era clients on the same endpoint; "reject" is modern only.
    `legacy_sse`: also serve the 2024-11-05 HTTP+SSE transport; `legacy_until`: the legacy retirement
    date (ISO 8601, as given; `protocol.retirement.parse` reads it), None for none.
    `auth_issuers`: trusted OAuth issuers (empty: no authentication); `resource_url`: this server's
    canonical URI, the audience tokens must carry; `auth_required_scopes`: needed on every request;
    `auth_refresh_seconds`: the least time between two JWKS fetches of one issuer.

    `idle_timeout`/`header_timeout`/`body_timeout` (seconds), `max_connections`: HTTP edge limits, per
    process; `tool_threads`: threads running sync handlers, per process; `max_inflight`: stdio requests
    running at once; `listen_max_subscriptions`: URIs/task ids one listen stream may name (None: the app's);
    `max_listen_streams`: open listen streams per principal (per peer address when anonymous);
    `metrics`: Prometheus metrics off (None), at GET /metrics on the HTTP port (""), or on "host:port"."""

    app: str
    transport: Transport = "http"
    host: str = "127.0.0.1"
    port: int = 8000
    path: str = "/mcp"
    workers: int = 1
    state: str | None = None
    keys: str | None = field(default=None, repr=False)  # a secret: never in logs or tracebacks
    allowed_hosts: tuple[str, ...] = ()
    allowed_origins: tuple[str, ...] = ()
    instance_name: str | None = None
    max_body: int = DEFAULT_MAX_BODY
    log_level: LogLevel = "info"
    log_format: LogFormat = "text"
    legacy: LegacyMode = "serve"
    legacy_sse: bool = False
    legacy_until: str | None = None
    auth_issuers: tuple[str, ...] = ()
    resource_url: str | None = None
    auth_required_scopes: tuple[str, ...] = ()
    auth_refresh_seconds: int = 30
    idle_timeout: float = DEFAULT_IDLE_TIMEOUT
    header_timeout: float = DEFAULT_HEADER_TIMEOUT
    body_timeout: float = DEFAULT_BODY_TIMEOUT
    max_connections: int = DEFAULT_MAX_CONNECTIONS
    tool_threads: int = DEFAULT_TOOL_THREADS
    max_inflight: int = DEFAULT_MAX_INFLIGHT
    listen_max_subscriptions: int | None = None
    max_listen_streams: int = DEFAULT_MAX_LISTEN_STREAMS
    metrics: str | None = None  # None: off; "": GET /metrics on the HTTP port; "host:port": a listener of their own

    @property
    def processes(self) -> int:
        """How many processes serve the app with this config (each needs the same MRTR key)."""
        return self.workers if self.transport == "http" else 1

    def origin_policy(self) -> OriginPolicy:
        """The Host/Origin check. Every bind refuses a foreign Origin (only the allowed hosts' own and the
        listed Origins pass; '*' origin: any). A loopback bind also refuses foreign Hosts; a public bind
        accepts any Host unless hosts are named ('*' host: any)."""
        hosts = {h.lower() for h in self.allowed_hosts}
        origins = frozenset(o.lower() for o in self.allowed_origins)
        if "*" in hosts or (not hosts and self.host not in LOOPBACK_HOSTS):
            return OriginPolicy.public(origins)
        base = LOOPBACK_HOSTS if self.host in LOOPBACK_HOSTS else frozenset()
        return OriginPolicy(base | hosts, origins)

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self))

    @classmethod
    def from_json(cls, text: str) -> ServeConfig:
        raw: dict[str, Any] = json.loads(text)
        raw["allowed_hosts"] = tuple(raw["allowed_hosts"])
        raw["allowed_origins"] = tuple(raw["allowed_origins"])
        raw["auth_issuers"] = tuple(raw["auth_issuers"])
        raw["auth_required_scopes"] = tuple(raw["auth_required_scopes"])
        return cls(**raw)

    def to_env(self, environ: MutableMapping[str, str] = os.environ) -> None:
        """Hand this config to the worker processes about to be started from this one."""
        environ[SERVE_CONFIG_ENV] = self.to_json()

    @classmethod
    def from_env(cls, environ: Mapping[str, str] = os.environ) -> ServeConfig:
        """The config the parent process handed over (inside a worker)."""
        return cls.from_json(environ[SERVE_CONFIG_ENV])
