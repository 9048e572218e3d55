"""Broken on purpose, on the official Python SDK (mcp 2.3.0): business state keyed by the client's
session, the 2025 way (`ctx.session`), so it lives in one process and vanishes with its connection.

Expected findings: flow.cart.instances and flow.cart.restart (a cart added on one instance is not there
on the next), nothing else.

    <mcp venv python> sdk_session_cart.py PORT
"""

import sys
import uuid
from typing import Any

from mcp.server.mcpserver import Context, MCPServer

app = MCPServer("sdk-session-cart")
CARTS: dict[str, dict[str, int]] = {}
SESSION_KEYS: dict[int, str] = {}


def _cart(ctx: Context) -> dict[str, int]:
    key = SESSION_KEYS.setdefault(id(ctx.session), uuid.uuid4().hex)
    return CARTS.setdefault(key, {})


@app.tool()
def new_cart(ctx: Context) -> dict[str, Any]:
    """Open your cart (one per session); returns its id."""
    _cart(ctx).clear()
    return {"cartHandle": SESSION_KEYS[id(ctx.session)]}


@app.tool()
def add_to_cart(cartHandle: str, item: str, ctx: Context, quantity: int = 1) -> dict[str, Any]:
    """Add an item to your cart."""
    cart = CARTS.get(cartHandle)
    if cart is None:
        raise ValueError("no such cart in this session")
    cart[item] = cart.get(item, 0) + quantity
    return {"items": cart}


@app.tool()
def view_cart(cartHandle: str) -> dict[str, Any]:
    """What your cart holds."""
    cart = CARTS.get(cartHandle)
    if cart is None:
        raise ValueError("no such cart in this session")
    return {"items": cart}


if __name__ == "__main__":
    app.run("streamable-http", host="127.0.0.1", port=int(sys.argv[1]))
