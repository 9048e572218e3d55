"""Broken on purpose: explicit handles (good), but what they name lives in a dict in process memory.

Works in a single-process demo; behind a balancer the next call lands on an instance that never saw the
cart, and a restart loses every cart. Expected findings: flow.cart.instances and flow.cart.restart.
"""

from __future__ import annotations

import uuid
from typing import Any

from mcp_stateless import App, ToolError

app = App("memory-handles", "1.0.0")
CARTS: dict[str, dict[str, int]] = {}


@app.tool()
def new_cart() -> dict[str, Any]:
    """Open a cart; returns cartHandle."""
    handle = f"cart_{uuid.uuid4().hex}"
    CARTS[handle] = {}
    return {"cartHandle": handle}


@app.tool()
def add_to_cart(cartHandle: str, item: str, quantity: int = 1) -> dict[str, Any]:
    """Add an item to a cart."""
    cart = CARTS.get(cartHandle)
    if cart is None:
        raise ToolError(f"no such cart: {cartHandle}")
    cart[item] = cart.get(item, 0) + quantity
    return {"items": cart}


@app.tool()
def view_cart(cartHandle: str) -> dict[str, Any]:
    """What a cart holds."""
    cart = CARTS.get(cartHandle)
    if cart is None:
        raise ToolError(f"no such cart: {cartHandle}")
    return {"items": cart}
