"""The handle API end to end (in-process HTTP), over every backend: examples/importer.py's flow, scoping to
the principal, expiry, ending, forged handles and concurrent updates."""

from __future__ import annotations

import asyncio
import re
import sys
import time
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from helpers import Driver  # type: ignore[import-not-found]
from mcp_stateless import App, Context, Handle, open_state

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples"))
import importer  # noqa: E402

sys.path.remove(str(ROOT / "examples"))


class Ticket(Handle, prefix="tkt", ttl=0.6, noun="ticket", issued_by="new_ticket"):
    pass


class Pass(Handle, prefix="pass", ttl=0.8, sliding=True, noun="pass", issued_by="new_pass"):
    pass


def bearer(headers: Mapping[str, str] | None) -> str:
    auth = (headers or {}).get("authorization", "")
    return auth.removeprefix("Bearer ") if auth.startswith("Bearer ") else "anonymous"


def build() -> App:
    app = importer.make_app(principal=bearer)

    @app.tool()
    async def new_ticket(ctx: Context) -> dict[str, Any]:
        return {"ticket": (await Ticket.mint(ctx, {"n": 0})).id}

    @app.tool()
    async def use_ticket(ticket: Ticket) -> dict[str, Any]:
        return {"n": ticket.data["n"]}

    @app.tool()
    async def new_pass(ctx: Context) -> dict[str, Any]:
        return {"pass": (await Pass.mint(ctx)).id}

    @app.tool()
    async def use_pass(p: Pass) -> dict[str, Any]:
        return {"ok": True}

    return app


@pytest.fixture
async def drv(state_url: str) -> AsyncIterator[Driver]:
    app = build()
    bundle = open_state(state_url)
    app.use_state(bundle)
    async with Driver(app) as d:
        yield d
    await bundle.aclose()


async def call(d: Driver, name: str, args: dict[str, Any], who: str = "alice") -> dict[str, Any]:
    r = await d.call("tools/call", {"name": name, "arguments": args}, headers={"authorization": f"Bearer {who}"})
    assert r.status == 200, r.body
    result: dict[str, Any] = r.result
    return result


def text(result: dict[str, Any]) -> str:
    t: str = result["content"][0]["text"]
    return t


async def test_the_import_flow_of_the_seed(drv: Driver) -> None:
    begun = await call(drv, "begin_import", {})
    handle = begun["structuredContent"]["importHandle"]
    assert re.fullmatch(r"imp_[A-Za-z0-9_-]{32}", handle)  # 24 random bytes = 192 bits
    assert (await call(drv, "add_file", {"importHandle": handle, "uri": "file:///a.csv"}))["structuredContent"] == {
        "files": 1}
    assert (await call(drv, "add_file", {"importHandle": handle, "uri": "file:///b.csv"}))["structuredContent"] == {
        "files": 2}
    committed = await call(drv, "commit_import", {"importHandle": handle})
    assert committed["structuredContent"]["committed"] == 2
    receipt = committed["structuredContent"]["receipt"]
    assert (await call(drv, "read_receipt", {"receipt": receipt}))["structuredContent"] == {
        "files": ["file:///a.csv", "file:///b.csv"]}
    again = await call(drv, "commit_import", {"importHandle": handle})
    assert again["isError"] is True
    assert text(again) == (f"The import handle {handle!r} was already ended (committed or revoked) and cannot be "
                           "used again. Call begin_import to get a new one.")
    late = await call(drv, "add_file", {"importHandle": handle, "uri": "file:///c.csv"})
    assert late["isError"] is True and "already ended" in text(late)


async def test_the_handle_argument_is_a_string_with_its_pattern_and_lifetime(drv: Driver) -> None:
    r = await drv.call("tools/list")
    tools = {t["name"]: t for t in r.result["tools"]}
    prop = tools["add_file"]["inputSchema"]["properties"]["importHandle"]
    assert prop["type"] == "string"
    assert prop["pattern"] == "^imp_[A-Za-z0-9_-]{32}$"
    assert prop["description"] == ("An import handle (imp_…), as returned by begin_import; it expires 15 minutes "
                                   "after its last use.")
    assert tools["add_file"]["inputSchema"]["required"] == ["importHandle", "uri"]
    assert "expires 15 minutes after its last use" in tools["begin_import"]["description"]
    assert "expires 30 minutes after it is created" in tools["new_cart"]["description"]
    assert "ctx" not in tools["commit_import"]["inputSchema"]["properties"]


async def test_another_principals_handle_reads_exactly_like_one_that_does_not_exist(drv: Driver) -> None:
    handle = (await call(drv, "begin_import", {}, who="alice"))["structuredContent"]["importHandle"]
    theirs = await call(drv, "add_file", {"importHandle": handle, "uri": "x"}, who="mallory")
    forged_id = "imp_" + "A" * 32
    forged = await call(drv, "add_file", {"importHandle": forged_id, "uri": "x"}, who="mallory")
    assert theirs["isError"] is True and forged["isError"] is True
    expected = ("Unknown import handle {!r}: no such import exists (or it was removed). "
                "Call begin_import to get a new one.")
    assert text(theirs) == expected.format(handle)
    assert text(forged) == expected.format(forged_id)
    # and the owner's import is untouched by the refused call
    assert (await call(drv, "add_file", {"importHandle": handle, "uri": "y"}))["structuredContent"] == {"files": 1}


async def test_a_handle_of_another_kind_is_refused_by_the_schema(drv: Driver) -> None:
    cart = (await call(drv, "new_cart", {}))["structuredContent"]["cartHandle"]
    r = await call(drv, "add_file", {"importHandle": cart, "uri": "x"})
    assert r["isError"] is True
    assert text(r).startswith("Invalid arguments for tool add_file: importHandle: String should match pattern")


async def test_a_fixed_ttl_handle_expires_with_an_actionable_error(drv: Driver) -> None:
    t = (await call(drv, "new_ticket", {}))["structuredContent"]["ticket"]
    assert (await call(drv, "use_ticket", {"ticket": t}))["structuredContent"] == {"n": 0}
    await asyncio.sleep(0.8)
    r = await call(drv, "use_ticket", {"ticket": t})
    assert r["isError"] is True
    assert re.fullmatch(
        rf"The ticket handle '{re.escape(t)}' expired at \d{{4}}-\d\d-\d\dT\d\d:\d\d:\d\dZ \(a ticket handle "
        r"expires 0\.6 seconds after it is created\)\. Call new_ticket to get a new one\.", text(r)), text(r)


async def test_a_sliding_handle_lives_while_it_is_used(drv: Driver) -> None:
    p = (await call(drv, "new_pass", {}))["structuredContent"]["pass"]
    start = time.monotonic()
    while time.monotonic() - start < 1.6:  # twice its ttl, used every 0.3 s
        r = await call(drv, "use_pass", {"p": p})
        assert r.get("isError") is not True, text(r)
        await asyncio.sleep(0.3)
    await asyncio.sleep(1.0)
    r = await call(drv, "use_pass", {"p": p})
    assert r["isError"] is True and "expires 0.8 seconds after its last use" in text(r)


async def test_concurrent_add_file_calls_lose_no_update(drv: Driver) -> None:
    handle = (await call(drv, "begin_import", {}))["structuredContent"]["importHandle"]
    results = await asyncio.gather(
        *(call(drv, "add_file", {"importHandle": handle, "uri": f"file:///{i}"}) for i in range(25)))
    counts = sorted(r["structuredContent"]["files"] for r in results)
    assert counts == list(range(1, 26))
    assert (await call(drv, "commit_import", {"importHandle": handle}))["structuredContent"]["committed"] == 25


async def test_only_one_of_two_concurrent_commits_wins(drv: Driver) -> None:
    handle = (await call(drv, "begin_import", {}))["structuredContent"]["importHandle"]
    await call(drv, "add_file", {"importHandle": handle, "uri": "a"})
    a, b = await asyncio.gather(call(drv, "commit_import", {"importHandle": handle}),
                                call(drv, "commit_import", {"importHandle": handle}))
    assert sorted([bool(a.get("isError")), bool(b.get("isError"))]) == [False, True]


async def test_a_cart_keeps_items_and_refuses_bad_quantities(drv: Driver) -> None:
    cart = (await call(drv, "new_cart", {}))["structuredContent"]["cartHandle"]
    await call(drv, "add_to_cart", {"cartHandle": cart, "item": "apple", "quantity": 2})
    r = await call(drv, "add_to_cart", {"cartHandle": cart, "item": "apple"})
    assert r["structuredContent"] == {"items": {"apple": 3}}
    bad = await call(drv, "add_to_cart", {"cartHandle": cart, "item": "pear", "quantity": 0})
    assert bad["isError"] is True and text(bad) == "quantity must be at least 1"
    view = (await call(drv, "view_cart", {"cartHandle": cart}))["structuredContent"]
    assert view["items"] == {"apple": 3} and view["expiresAt"] > time.time() + 29 * 60
