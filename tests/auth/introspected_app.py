"""An app that carries its own authenticator (the Python API for mounted apps): opaque tokens checked by
RFC 7662 introspection. The tests set AUTH_TEST_ISSUER and AUTH_TEST_RESOURCE."""

from __future__ import annotations

import os
from typing import Any

from mcp_stateless import App, Context
from mcp_stateless.auth import BearerAuthenticator, Introspection

app = App("introspected", "1.0.0", authenticator=BearerAuthenticator(
    os.environ["AUTH_TEST_RESOURCE"], [os.environ["AUTH_TEST_ISSUER"]],
    introspection=Introspection("rs", "rs-secret", cache_seconds=1.0)))


@app.tool(scopes=["tools:read"], blocking=False)
def whoami(ctx: Context) -> dict[str, Any]:
    return {"id": ctx.principal.id, "scopes": sorted(ctx.principal.scopes)}
