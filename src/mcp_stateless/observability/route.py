"""``GET /metrics`` in front of any ASGI app: the Prometheus text of a `PrometheusMetrics`, everything
else (other paths, lifespan) passed through untouched."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any, Protocol

from ..protocol.security import OriginPolicy

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class Renderer(Protocol):
    def render(self) -> tuple[bytes, str]: ...


def metrics_endpoint(metrics: Renderer, origin_policy: OriginPolicy | None = None) -> ASGIApp:
    """An ASGI app answering ``GET``/``HEAD`` with `metrics.render()` on whatever path routes to it (an
    `HttpTransport` route: `/metrics`, relative to a mount), after the Host/Origin check `origin_policy`
    (None checks nothing); any other method is 405."""

    async def answer(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["method"] not in ("GET", "HEAD"):
            await _answer(send, 405, b"GET only\n", "text/plain", [(b"allow", b"GET")])
            return
        if origin_policy is not None:
            headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
            why = origin_policy.check(headers.get("host"), headers.get("origin"))
            if why is not None:
                await _answer(send, 403, why.encode() + b"\n", "text/plain")
                return
        body, ctype = metrics.render()
        await _answer(send, 200, body if scope["method"] == "GET" else b"", ctype)

    return answer


class MetricsRoute:
    """`inner` with ``GET path`` answered from `metrics.render()`. `origin_policy`: the Host/Origin check
    the MCP endpoint applies (so a browser page cannot read the metrics either); None checks nothing."""

    def __init__(self, inner: ASGIApp, metrics: Renderer, *, path: str = "/metrics",
                 origin_policy: OriginPolicy | None = None) -> None:
        self.inner = inner
        self.metrics = metrics
        self.path = path
        self.origin_policy = origin_policy
        self._answer = metrics_endpoint(metrics, origin_policy)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("path") != self.path:
            await self.inner(scope, receive, send)
            return
        await self._answer(scope, receive, send)


async def _answer(send: Send, status: int, body: bytes, ctype: str,
                  extra: list[tuple[bytes, bytes]] | None = None) -> None:
    headers = [(b"content-type", ctype.encode("latin-1")), (b"content-length", b"%d" % len(body)), *(extra or [])]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
