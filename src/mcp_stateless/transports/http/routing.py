"""Which ASGI app answers a request's path, before anything of MCP is looked at: the authenticator's
metadata documents (RFC 9728), exact routes (health, the app's own), the Server Card under the endpoint,
404 for any other path off the endpoint; `None` means the MCP endpoint itself (its own path, the root of
a mount, and `<endpoint>/sse` when HTTP+SSE is served)."""

from __future__ import annotations

from collections.abc import Mapping

from ...protocol.asgi import AsgiApp, Receive, Scope, Send
from ...protocol.card import SUFFIX as CARD_SUFFIX
from . import respond
from .card import CardRoute

CHANNEL_PARAM = "session"  # the query parameter naming a 2024-11-05 channel (its POSTs go there)
SSE_SUFFIX = "/sse"  # <endpoint>/sse: where 2024-11-05 clients configured with that conventional path GET


def document(doc: bytes) -> AsgiApp:
    """A JSON document any origin may read (a GET route)."""
    headers = [*respond.json_headers(len(doc)), (b"access-control-allow-origin", b"*")]

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": doc})

    return app


async def not_found(scope: Scope, receive: Receive, send: Send) -> None:
    await respond.plain(send, 404, b"Not Found")


class Router:
    """The route table of one endpoint. `owner`: the ASGI app a host router names in the scope when it
    routes an exact path to it (Starlette's `endpoint`)."""

    __slots__ = ("_card", "_documents", "_sse", "owner", "path", "routes")

    def __init__(self, owner: object, path: str | None, routes: dict[str, AsgiApp],
                 documents: Mapping[str, bytes], card: CardRoute | None, sse_suffix: bool) -> None:
        self.owner = owner
        self.path = path
        self.routes = routes  # shared with the transport: added to after it was built
        self._documents = {p: document(doc) for p, doc in documents.items()}
        self._card = card
        self._sse = sse_suffix

    def match(self, scope: Scope) -> AsgiApp | None:
        """The app answering `scope`, or None for the MCP endpoint."""
        if self._documents and scope["method"] == "GET":
            doc = self._documents.get(scope.get("path", ""))
            if doc is not None:
                return doc
        if self.routes or self.path is not None:
            path = scope.get("path", "")
            root = scope.get("root_path", "")
            if root and path.startswith(root):  # Starlette >= 0.35 keeps the full path beside root_path
                path = path[len(root) :] or "/"
            route = self.routes.get(path)
            if route is not None:
                return route
            if self.path is not None:
                base = self.path.rstrip("/")
                if path.rstrip("/") != base and not self._routed_here(scope, path):
                    # Off the endpoint's own path: only its sub-resources (looked at only here, off the hot path).
                    sub = path[len(base):].rstrip("/") if path.startswith(base + "/") else None
                    if sub == CARD_SUFFIX and self._card is not None:
                        return self._card
                    if not (sub == SSE_SUFFIX and self._sse and scope["method"] == "GET"):
                        return not_found
        if self.path is None and self._card is not None and scope.get("path", "").endswith(CARD_SUFFIX):
            return self._card
        return None

    def _routed_here(self, scope: Scope, path: str) -> bool:
        """A host app sent this request here: the root of a mount (`root_path` set, nothing after it), or
        an exact route to this transport (Starlette names the matched endpoint in the scope; a match by
        a Mount also sets `app_root_path`, and only the mount's root is ours)."""
        if scope.get("root_path") and path == "/":
            return True
        return scope.get("endpoint") is self.owner and "app_root_path" not in scope
