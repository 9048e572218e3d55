"""The app the authorization tests serve with `mcp-stateless serve --auth-issuer …`."""

from __future__ import annotations

from typing import Any

from mcp_stateless import App, Context, Handle


class Cart(Handle, prefix="cart", ttl=600, noun="cart", issued_by="new_cart"):
    """A cart bound to the principal that opened it."""


app = App("protected", "1.0.0")


@app.tool(scopes=["tools:read"], blocking=False)
def whoami(ctx: Context) -> dict[str, Any]:
    """Who the token says the caller is."""
    p = ctx.principal
    return {"id": p.id, "scopes": sorted(p.scopes), "client_id": p.claims.get("client_id")}


@app.tool(scopes=["tools:admin"], blocking=False)
def reset() -> str:
    """An admin-only tool."""
    return "reset"


@app.tool()
async def new_cart(ctx: Context) -> dict[str, Any]:
    cart = await Cart.mint(ctx, {"items": []})
    return {"cartHandle": cart.id}


@app.tool()
async def peek_cart(cartHandle: Cart) -> dict[str, Any]:
    return {"items": cartHandle.data["items"]}


@app.prompt(scopes=["tools:admin"])
def audit() -> str:
    """An admin-only prompt."""
    return "audit everything"


@app.resource("memo://public")
def public_memo() -> str:
    return "hello"


@app.resource("memo://secret", scopes=["tools:admin"])
def secret_memo() -> str:
    return "the secret"
