"""`GET <endpoint>/server-card`: the SEP-2127 Server Card, with the CORS, caching and validator headers
the SEP asks for (an `If-None-Match` naming the current card gets 304)."""

from __future__ import annotations

import time
from dataclasses import dataclass

from ...protocol import card
from ...protocol.asgi import Receive, Scope, Send
from ...protocol.card import CardIdentity, Compatibility
from ...protocol.encoding import encode_message
from ...protocol.endpoint import Endpoint, LegacyEndpoint
from ...protocol.retirement import Retirement


@dataclass(frozen=True, slots=True)
class CardSource:
    """What the card describes: the endpoint (which has a `card_identity()`, as `App` does), the legacy
    branch served beside it (None: none), whether HTTP+SSE is on and when the legacy era retires, and
    where clients reach it (`public_url`, else from the request and `path`)."""

    endpoint: Endpoint
    legacy: LegacyEndpoint | None
    legacy_sse: bool
    legacy_until: Retirement | None
    public_url: str | None
    path: str | None

    def compatibility(self, now: float) -> Compatibility:
        """What is served at `now` (a retired legacy era is listed as not served)."""
        legacy = self.legacy
        return card.compatibility(tuple(self.endpoint.supported_versions),
                                  tuple(legacy.versions) if legacy is not None else (), self.legacy_sse,
                                  self.legacy_until, now)


class CardRoute:
    def __init__(self, source: CardSource) -> None:
        self.source = source

    def identity(self) -> CardIdentity:
        # Read per request: an app may still gain extensions after its transport was built.
        identity: CardIdentity = self.source.endpoint.card_identity()  # type: ignore[attr-defined]
        return identity

    def url(self, scope: Scope) -> str:
        """The endpoint's URL as this client reached it (or as configured)."""
        t = self.source
        if t.public_url is not None:
            return t.public_url
        host = next((v.decode("latin-1") for k, v in scope["headers"] if k == b"host"), None)
        if host is None:
            server = scope.get("server") or ("localhost", None)
            host = server[0] if server[1] is None else f"{server[0]}:{server[1]}"
        path = scope.get("root_path", "") + (t.path if t.path is not None
                                             else scope.get("path", "").removesuffix(card.SUFFIX))
        return f"{scope.get('scheme', 'http')}://{host}{path}"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.serve(scope, send)

    async def serve(self, scope: Scope, send: Send) -> None:
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
        document = card.server_card(self.identity(), self.source.compatibility(time.time()), self.url(scope))
        body = encode_message(document)
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
