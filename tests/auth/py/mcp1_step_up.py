"""Drives the official Python SDK's 1.x `ClientSession` with its `OAuthClientProvider` (`mcp==1.30.0`, its
own venv: a 2025-era client) against the protected app: as the pre-registered public client `cli-public`
(a dynamically registered one is limited by oidc-provider to the scope it registered with), it authorizes,
calls a tool, then a tool that needs more scope, so the server's 403 `insufficient_scope` must make it
step up. Prints what happened as one JSON object.

    python mcp1_step_up.py <mcp url>

The user is headless: the authorization URL is followed redirect by redirect (oidc-provider's test
interactions need no input) up to the redirect URI, whose `code` and `state` the callback hands back.
"""

import json
import sys
from typing import Any
from urllib.parse import parse_qs, urljoin, urlsplit

import anyio
import httpx
from mcp import ClientSession
from mcp.client.auth import OAuthClientProvider, TokenStorage
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata, OAuthToken

REDIRECT = "http://127.0.0.1:9/callback"  # never contacted: the headless user stops at it


class Memory(TokenStorage):
    def __init__(self, client: OAuthClientInformationFull) -> None:
        self.tokens: OAuthToken | None = None
        self.client: OAuthClientInformationFull | None = client

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


async def main(url: str) -> dict[str, Any]:
    out: dict[str, Any] = {"authorizations": [], "sessions": []}
    landed: list[tuple[str, str | None]] = []

    async def user(authorization_url: str) -> None:
        out["authorizations"].append(sorted(parse_qs(urlsplit(authorization_url).query).get("scope", [""])[0].split()))
        async with httpx.AsyncClient(timeout=15) as ua:
            at = authorization_url
            for _ in range(12):
                if at.startswith(REDIRECT):
                    query = parse_qs(urlsplit(at).query)
                    if "code" not in query:
                        raise RuntimeError(f"the authorization server refused: {query}")
                    landed.append((query["code"][0], query.get("state", [None])[0]))
                    return
                r = await ua.get(at)
                if r.status_code not in (302, 303):
                    raise RuntimeError(f"the authorization server answered {r.status_code}: {r.text[:300]}")
                at = urljoin(at, r.headers["location"])
        raise RuntimeError("too many redirects")

    async def callback() -> tuple[str, str | None]:
        return landed.pop()

    metadata = OAuthClientMetadata(redirect_uris=[REDIRECT], client_name="mcp1-step-up",  # type: ignore[list-item]
                                   grant_types=["authorization_code"], response_types=["code"],
                                   token_endpoint_auth_method="none")
    registered = OAuthClientInformationFull(client_id="cli-public", **metadata.model_dump(exclude_none=True))
    auth = OAuthClientProvider(url, metadata, Memory(registered), redirect_handler=user, callback_handler=callback)
    async with httpx.AsyncClient(auth=auth, timeout=30) as http, \
            streamable_http_client(url, http_client=http) as (read, write, session_id), \
            ClientSession(read, write) as session:
        init = await session.initialize()
        out["version"] = init.protocolVersion
        out["sessions"].append(session_id())
        who = await session.call_tool("whoami", {})
        out["before"] = who.structuredContent
        reset = await session.call_tool("reset", {})
        out["reset"] = "".join(c.text for c in reset.content if c.type == "text")
        out["sessions"].append(session_id())
        who = await session.call_tool("whoami", {})
        out["after"] = who.structuredContent
    return out


if __name__ == "__main__":
    print(json.dumps(anyio.run(main, sys.argv[1])))
