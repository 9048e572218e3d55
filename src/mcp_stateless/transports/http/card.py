"""`GET <endpoint>/server-card`: the SEP-2127 Server Card, with the CORS, caching and validator headers
the SEP asks for (an `If-None-Match` naming the current card gets 304)."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import TYPE_CHECKING, Any

import orjson

from ...protocol import card
from ...protocol.card import CardIdentity, Compatibility

if TYPE_CHECKING:
    from . import HttpTransport

Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]


def compatibility(transport: HttpTransport, now: float) -> Compatibility:
    """What `transport` serves at `now` (a retired legacy era is listed as not served)."""
    legacy = transport.legacy
    return card.compatibility(tuple(transport.endpoint.supported_versions),
                              tuple(legacy.versions) if legacy is not None else (), transport.legacy_sse,
                              transport.legacy_until, now)


class CardRoute:
    def __init__(self, transport: HttpTransport) -> None:
        self.transport = transport

    def identity(self) -> CardIdentity:
        # Read per request: an app may still gain extensions after its transport was built.
        identity: CardIdentity = self.transport.endpoint.card_identity()  # type: ignore[attr-defined]
        return identity

    def url(self, scope: MutableMapping[str, Any]) -> str:
        """The endpoint's URL as this client reached it (or as configured)."""
        t = self.transport
        if t.public_url is not None:
            return t.public_url
        host = next((v.decode("latin-1") for k, v in scope["headers"] if k == b"host"), None)
        if host is None:
            server = scope.get("server") or ("localhost", None)
            host = server[0] if server[1] is None else f"{server[0]}:{server[1]}"
        path = scope.get("root_path", "") + (t.path if t.path is not None
                                             else scope.get("path", "").removesuffix(card.SUFFIX))
        return f"{scope.get('scheme', 'http')}://{host}{path}"

    async def serve(self, scope: MutableMapping[str, Any], send: Send) -> None:
        method = scope["method"]
        cors = [(k.encode(), v.encode()) for k, v in card.CORS_HEADERS]
        if method == "OPTIONS":  # a browser's preflight (If-None-Match is not a safelisted header)
            await send({"type": "http.response.start", "status": 204, "headers": cors})
            await send({"type": "http.response.body", "body": b""})
            return
        if method not in ("GET", "HEAD"):
            await send({"type": "http.response.start", "status": 405, "headers": [(b"allow", b"GET"), *cors]})
            await send({"type": "http.response.body", "body": b""})
            return
        document = card.server_card(self.identity(), compatibility(self.transport, time.time()), self.url(scope))
        body = orjson.dumps(document)
        tag = card.etag(body)
        headers = [*cors, (b"cache-control", card.CACHE_CONTROL.encode()), (b"etag", tag.encode())]
        wanted = next((v.decode("latin-1") for k, v in scope["headers"] if k == b"if-none-match"), None)
        if card.not_modified(wanted, tag):
            await send({"type": "http.response.start", "status": 304, "headers": headers})
            await send({"type": "http.response.body", "body": b""})
            return
        headers += [(b"content-type", card.MEDIA_TYPE.encode()), (b"content-length", b"%d" % len(body))]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": b"" if method == "HEAD" else body})
