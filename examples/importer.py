"""An import and a shopping cart that work when every call lands on a different instance.

    mcp-stateless serve examples/importer.py:app --http 127.0.0.1:8000 --state sqlite:///importer.db
    mcp-stateless serve examples/importer.py:app --http 127.0.0.1:8001 --state redis://127.0.0.1:6379/0

Nothing lives in a process: each call names its import or cart by a handle the server minted, and the
data behind it sits in the state store (`--state`). Every handle belongs to the principal that minted
it and is checked on every call.
"""

from __future__ import annotations

from typing import Any

from mcp_stateless import App, Context, Handle, ToolError
from mcp_stateless.endpoint import PrincipalResolver

MAX_FILES = 1000


class Import(Handle, prefix="imp", ttl=15 * 60, sliding=True, noun="import", issued_by="begin_import"):
    """A batch of files being gathered; committed at once."""


class Receipt(Handle, prefix="rcpt", ttl=24 * 3600, noun="receipt", issued_by="commit_import"):
    """What a commit produced: readable for a day."""


class Cart(Handle, prefix="cart", ttl=30 * 60, noun="cart", issued_by="new_cart"):
    """A shopping cart: fixed lifetime from creation."""


def make_app(principal: PrincipalResolver | None = None) -> App:
    app = App("importer", "1.0.0", principal=principal,
              instructions="Start an import with begin_import, add files with add_file, finish with commit_import.")

    @app.tool(description=f"Start a new import. Returns importHandle; the handle {Import.lifetime()}.")
    async def begin_import(ctx: Context) -> dict[str, Any]:
        imp = await Import.mint(ctx, {"files": []})
        return {"importHandle": imp.id}

    @app.tool(description=f"Add one file (by URI) to an import. Returns how many files it holds. "
                          f"An import handle {Import.lifetime()}.")
    async def add_file(importHandle: Import, uri: str) -> dict[str, Any]:
        def add(data: dict[str, Any]) -> None:
            if len(data["files"]) >= MAX_FILES:
                raise ToolError(f"An import holds at most {MAX_FILES} files; commit this one and start another.")
            data["files"].append(uri)

        data = await importHandle.update(add)
        return {"files": len(data["files"])}

    @app.tool(description="Commit an import: its files are recorded and the import handle ends (a second "
                          f"commit is refused). Returns the count and a receipt, which {Receipt.lifetime()}.")
    async def commit_import(ctx: Context, importHandle: Import) -> dict[str, Any]:
        data = await importHandle.end()
        receipt = await Receipt.mint(ctx, {"files": data["files"]})
        return {"committed": len(data["files"]), "receipt": receipt.id}

    @app.tool(description="Cancel an import without committing it.")
    async def cancel_import(importHandle: Import) -> dict[str, Any]:
        await importHandle.revoke()
        return {"cancelled": True}

    @app.tool(description=f"The files a committed import recorded. A receipt {Receipt.lifetime()}.")
    async def read_receipt(receipt: Receipt) -> dict[str, Any]:
        return {"files": receipt.data["files"]}

    @app.tool(description=f"Open a new, empty cart. Returns cartHandle; a cart {Cart.lifetime()}.")
    async def new_cart(ctx: Context) -> dict[str, Any]:
        cart = await Cart.mint(ctx, {"items": {}})
        return {"cartHandle": cart.id, "expiresAt": int(cart.expires_at)}

    @app.tool(description=f"Add quantity of an item to a cart. A cart {Cart.lifetime()}.")
    async def add_to_cart(cartHandle: Cart, item: str, quantity: int = 1) -> dict[str, Any]:
        if quantity < 1:
            raise ToolError("quantity must be at least 1")

        def add(data: dict[str, Any]) -> None:
            data["items"][item] = data["items"].get(item, 0) + quantity

        data = await cartHandle.update(add)
        return {"items": data["items"]}

    @app.tool(description="What a cart holds.")
    async def view_cart(cartHandle: Cart) -> dict[str, Any]:
        return {"items": cartHandle.data["items"], "expiresAt": int(cartHandle.expires_at)}

    return app


app = make_app()
