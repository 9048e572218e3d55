"""A 2025-era Streamable HTTP server (official Python SDK `mcp` 1.30.0: its low-level `Server`, its
session manager and its bearer-token middleware) that takes bearer tokens and keeps one board per caller,
so a test can tell whose resource update reached whom.

    <mcp 1.30.0 venv python> boards_http.py PORT        endpoint http://127.0.0.1:PORT/mcp

Tokens: `token-p` is caller `p`, `token-q` caller `q`; any other request is refused with 401 by the SDK's
`RequireAuthMiddleware`. Resources `board://mine` (the caller's own board) and `board://sentinel`;
`resources/subscribe` is declared. Tool `post {uri, text}` writes the caller's board and sends
`notifications/resources/updated` for `uri` to every session of the same caller subscribed to it (never to
another caller's: each caller's board is its own); it answers `posted for CALLER to N sessions`. Tool
`announce` sends `notifications/tools/list_changed` to every session of the caller (tools `listChanged`
is declared) and answers `announced for CALLER to N sessions`.
"""

import sys
from typing import Any

import mcp.types as types
import uvicorn
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser, BearerAuthBackend, RequireAuthMiddleware
from mcp.server.auth.provider import AccessToken
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.session import ServerSession
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from pydantic import AnyUrl
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.authentication import AuthenticationMiddleware
from starlette.routing import Route

TOKENS = {"token-p": "p", "token-q": "q"}
URIS = ("board://mine", "board://sentinel")


class Verifier:
    async def verify_token(self, token: str) -> AccessToken | None:
        caller = TOKENS.get(token)
        return None if caller is None else AccessToken(token=token, client_id=caller, scopes=[])


class BoardServer(Server[Any, Any]):
    def get_capabilities(self, notification_options: NotificationOptions,
                         experimental_capabilities: dict[str, dict[str, Any]]) -> types.ServerCapabilities:
        caps = super().get_capabilities(notification_options, experimental_capabilities)
        if caps.resources is not None:  # the SDK 1.x leaves subscribe False even with a handler
            caps.resources.subscribe = True
        if caps.tools is not None:
            caps.tools.listChanged = True
        return caps


server = BoardServer("boards", version="1.0.0")
boards: dict[str, str] = {}
subscribed: dict[str, set[tuple[str, ServerSession]]] = {uri: set() for uri in URIS}
sessions: dict[str, set[ServerSession]] = {}  # every session a caller made a request on


def caller() -> str:
    request = server.request_context.request
    user = getattr(request, "user", None)
    assert isinstance(user, AuthenticatedUser), "RequireAuthMiddleware lets no anonymous request through"
    who = user.access_token.client_id
    sessions.setdefault(who, set()).add(server.request_context.session)
    return who


@server.list_resources()
async def list_resources() -> list[types.Resource]:
    return [types.Resource(uri=AnyUrl(uri), name=uri.split("//")[1]) for uri in URIS]


@server.read_resource()
async def read_resource(uri: AnyUrl) -> str:
    return boards.get(caller(), "") if str(uri) == "board://mine" else "sentinel"


@server.subscribe_resource()
async def subscribe(uri: AnyUrl) -> None:
    subscribed.setdefault(str(uri), set()).add((caller(), server.request_context.session))


@server.unsubscribe_resource()
async def unsubscribe(uri: AnyUrl) -> None:
    subscribed.get(str(uri), set()).discard((caller(), server.request_context.session))


@server.list_tools()
async def list_tools() -> list[types.Tool]:
    return [types.Tool(name="post", description="Write your board; tell your subscribed sessions.",
                       inputSchema={"type": "object", "required": ["uri", "text"],
                                    "properties": {"uri": {"type": "string"}, "text": {"type": "string"}}}),
            types.Tool(name="announce", description="Tell every session of yours that the tools changed.",
                       inputSchema={"type": "object", "properties": {}})]


@server.call_tool()
async def call_tool(name: str, arguments: dict[str, Any]) -> list[types.TextContent]:
    if name == "announce":
        who = caller()
        mine = list(sessions.get(who, ()))
        for session in mine:
            await session.send_tool_list_changed()
        return [types.TextContent(type="text", text=f"announced for {who} to {len(mine)} sessions")]
    who, uri = caller(), str(arguments["uri"])
    boards[who] = str(arguments["text"])
    told = [session for owner, session in list(subscribed.get(uri, ())) if owner == who]
    for session in told:
        await session.send_resource_updated(AnyUrl(uri))
    return [types.TextContent(type="text", text=f"posted for {who} to {len(told)} sessions")]


def main() -> None:
    manager = StreamableHTTPSessionManager(app=server)
    endpoint = RequireAuthMiddleware(manager.handle_request, required_scopes=[])
    app = Starlette(routes=[Route("/mcp", endpoint=endpoint)],
                    middleware=[Middleware(AuthenticationMiddleware, backend=BearerAuthBackend(Verifier()))],
                    lifespan=lambda _app: manager.run())
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")


if __name__ == "__main__":
    main()
