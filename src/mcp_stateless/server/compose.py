"""The one assembly of an app served over HTTP: `App.asgi()` (a team mounting it in FastAPI or Starlette,
or running it under uvicorn) and `mcp-stateless serve --http` both call `http_transport`, so a mounted
app serves what `serve` serves: 2025 clients beside modern ones, the Server Card, `/healthz` and
`/readyz`, the app's own routes and middleware, and (when asked) `/metrics`. The defaults are written here
and nowhere else.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal, Protocol

from ..protocol.asgi import AsgiApp
from ..protocol.endpoint import LegacyEndpoint
from ..protocol.principal import Authenticator
from ..protocol.retirement import Retirement
from ..protocol.security import OriginPolicy
from ..transports.health import health_routes
from ..transports.http import DEFAULT_MAX_BODY, DEFAULT_MAX_LISTEN_STREAMS, HttpTransport

if TYPE_CHECKING:
    from .app import App

LegacyMode = Literal["serve", "reject"]
# 2025 clients are served unless refused: the same endpoint answers both eras, as the spec's
# backward-compatibility section lets a server do.
DEFAULT_LEGACY: LegacyMode = "serve"
DEFAULT_PATH = "/mcp"
METRICS_PATH = "/metrics"


class Renderer(Protocol):
    """Metrics in the Prometheus text format (`observability.PrometheusMetrics`)."""

    def render(self) -> tuple[bytes, str]: ...


def legacy_branch(app: App, legacy: LegacyMode | LegacyEndpoint | None) -> LegacyEndpoint | None:
    """The 2025-era branch `legacy` asks for: "serve" builds `LegacyServer(app)` (imported only then: a
    modern-only server never loads it), "reject" or None serves modern clients only, and a
    `LegacyEndpoint` given is used as it is."""
    if legacy is None or legacy == "reject":
        return None
    if legacy == "serve":
        from .legacy import LegacyServer

        return LegacyServer(app)
    if isinstance(legacy, str):
        raise ValueError(f"legacy must be 'serve' or 'reject' (or a LegacyEndpoint), not {legacy!r}")
    return legacy


def http_transport(
    app: App,
    *,
    path: str | None = DEFAULT_PATH,
    legacy: LegacyMode | LegacyEndpoint | None = DEFAULT_LEGACY,
    legacy_sse: bool = False,
    legacy_until: Retirement | None = None,
    health: bool = True,
    metrics: bool | Renderer = False,
    origin_policy: OriginPolicy | None = None,
    max_body: int = DEFAULT_MAX_BODY,
    instance: str | None = None,
    public_url: str | None = None,
    server_card: bool = True,
    authenticator: Authenticator | None = None,
    max_listen_streams: int = DEFAULT_MAX_LISTEN_STREAMS,
) -> HttpTransport:
    """`app` as an ASGI application.

    `legacy`: 2025-era clients are served ("serve", the default) or refused ("reject"); `legacy_sse`
    adds the 2024-11-05 HTTP+SSE transport, `legacy_until` retires the era (`protocol.retirement`).
    `health`: `GET /healthz` and `GET /readyz` (relative to a mount; an app route on either path
    replaces it). `metrics`: True instruments the app with a `PrometheusMetrics` (the ``metrics``
    extra) and answers `GET /metrics`; a `Renderer` given (what `serve` made) is answered as it is.
    The other options are `HttpTransport`'s.
    """
    branch = legacy_branch(app, legacy)
    routes: dict[str, AsgiApp] = dict(health_routes(app.readiness)) if health else {}
    routes.update(app.http_routes)  # the app's own routes may replace ours
    if metrics is not False:
        routes[METRICS_PATH] = _metrics_route(app, metrics, branch, origin_policy)
    return HttpTransport(app, authenticator=authenticator, path=path, origin_policy=origin_policy,
                         max_body=max_body, instance=instance, legacy=branch, legacy_sse=legacy_sse,
                         legacy_until=legacy_until, server_card=server_card, public_url=public_url,
                         routes=routes, middleware=app.http_middleware, max_listen_streams=max_listen_streams)


def _metrics_route(app: App, metrics: bool | Renderer, branch: LegacyEndpoint | None,
                   origin_policy: OriginPolicy | None) -> AsgiApp:
    from ..observability import instrument, metrics_endpoint

    renderer: Any = metrics
    if metrics is True:
        counters = getattr(branch, "counters", None)  # the 2025 branch's exchanges, when it counts them
        renderer = instrument(app, metrics=True, tracing=False, legacy_counters=counters)
    # The route checks Host/Origin as the endpoint does, so a browser page cannot read the metrics either.
    return metrics_endpoint(renderer, origin_policy)
