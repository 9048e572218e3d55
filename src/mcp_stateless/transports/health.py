"""`GET /healthz` and `GET /readyz` for orchestrators, off the MCP path.

`/healthz` says the process answers (liveness: restart it if not). `/readyz` asks the endpoint's owner
why it should not get traffic (readiness: the state store unreachable, no key), 200 when nothing, else
503 with the reasons; load balancers and Kubernetes stop routing to it meanwhile and resume on their own.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import orjson

from ..protocol.asgi import AsgiApp, Receive, Scope, Send

HEALTH_PATH = "/healthz"
READY_PATH = "/readyz"

Readiness = Callable[[], Awaitable[list[str]]]


async def _answer(send: Send, status: int, body: dict[str, object], method: str) -> None:
    data = orjson.dumps(body)
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(data)),
               (b"cache-control", b"no-store")]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": b"" if method == "HEAD" else data})


async def _not_allowed(send: Send) -> None:
    await send({"type": "http.response.start", "status": 405,
                "headers": [(b"allow", b"GET, HEAD"), (b"content-length", b"0")]})
    await send({"type": "http.response.body", "body": b""})


def health_routes(readiness: Readiness) -> dict[str, AsgiApp]:
    """The two routes, for `HttpTransport(routes=...)`; `readiness()` lists what keeps it from being ready."""

    async def healthz(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["method"] not in ("GET", "HEAD"):
            await _not_allowed(send)
            return
        await _answer(send, 200, {"status": "ok"}, scope["method"])

    async def readyz(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["method"] not in ("GET", "HEAD"):
            await _not_allowed(send)
            return
        reasons = await readiness()
        if reasons:
            await _answer(send, 503, {"status": "not ready", "reasons": reasons}, scope["method"])
        else:
            await _answer(send, 200, {"status": "ready"}, scope["method"])

    return {HEALTH_PATH: healthz, READY_PATH: readyz}
