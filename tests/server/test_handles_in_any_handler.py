"""Any handler can mint and resolve handles: the store comes with the `Context`, not with a tool call."""

from __future__ import annotations

from typing import Any

from mcp_stateless import App, Context, Handle
from mcp_stateless.protocol import envelope
from mcp_stateless.protocol.endpoint import Call
from mcp_stateless.protocol.envelope import Request
from mcp_stateless.protocol.principal import Principal
from mcp_stateless.server.context import Context as ServerContext

PV = "2026-07-28"
ALICE = Call(Principal("alice"))
BOB = Call(Principal("bob"))


class Note(Handle, prefix="note", ttl=60, noun="note", issued_by="draft"):
    """A note drafted by a prompt."""


def request(app: App, method: str, params: dict[str, Any]) -> Request:
    meta = {"io.modelcontextprotocol/protocolVersion": PV, "io.modelcontextprotocol/clientCapabilities": {}}
    decision = envelope.classify({"jsonrpc": "2.0", "id": 1, "method": method,
                                  "params": {**params, "_meta": meta}}, None, app.table)
    assert isinstance(decision, Request), decision
    return decision


def make_app() -> App:
    app = App("notes")

    @app.prompt()
    async def draft(ctx: Context, topic: str) -> str:
        note = await Note.mint(ctx, {"topic": topic})
        return note.id

    @app.resource("notes://{handle}", mime_type="text/plain")
    async def read_note(ctx: Context, handle: str) -> str:
        note = await Note.resolve(handle, ctx)
        return f"{note.data['topic']} (owner {note.principal})"

    @app.resource("notes://first")
    async def first_note(ctx: Context) -> str:
        note = await Note.mint(ctx, {"topic": "from a resource"})
        same = await Note.resolve(note.id, ctx)
        return f"{same.id.split('_')[0]} {same.data['topic']} v{same.version}"

    @app.tool()
    async def topic(note: Note) -> str:
        return str(note.data["topic"])

    return app


async def test_a_prompt_mints_and_a_resource_and_a_tool_resolve() -> None:
    app = make_app()
    got = await app.handle(request(app, "prompts/get", {"name": "draft", "arguments": {"topic": "caching"}}), ALICE)
    assert got.error_code is None, got.message
    handle_id = got.message["result"]["messages"][0]["content"]["text"]
    assert handle_id.startswith("note_") and len(handle_id) == len("note_") + 32

    read = await app.handle(request(app, "resources/read", {"uri": f"notes://{handle_id}"}), ALICE)
    assert read.error_code is None, read.message
    assert read.message["result"]["contents"] == [{"uri": f"notes://{handle_id}", "mimeType": "text/plain",
                                                  "text": "caching (owner alice)"}]

    called = await app.handle(request(app, "tools/call", {"name": "topic", "arguments": {"note": handle_id}}), ALICE)
    assert called.message["result"]["content"] == [{"type": "text", "text": "caching"}]
    assert "isError" not in called.message["result"]

    other = await app.handle(request(app, "tools/call", {"name": "topic", "arguments": {"note": handle_id}}), BOB)
    assert other.message["result"]["isError"] is True
    assert other.message["result"]["content"][0]["text"] == (
        f"Unknown note handle {handle_id!r}: no such note exists (or it was removed). Call draft to get a new one.")


async def test_a_resource_mints_and_resolves_in_one_read() -> None:
    app = make_app()
    read = await app.handle(request(app, "resources/read", {"uri": "notes://first"}), ALICE)
    assert read.error_code is None, read.message
    assert read.message["result"]["contents"][0]["text"] == "note from a resource v1"


async def test_a_context_without_a_store_says_so() -> None:
    app = make_app()
    ctx = ServerContext(request(app, "tools/list", {}), Principal("alice"))
    try:
        await Note.mint(ctx)
    except RuntimeError as e:
        assert str(e) == "this context has no handle store (handles need a Context built by an App)"
    else:
        raise AssertionError("minting without a store succeeded")
