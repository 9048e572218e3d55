"""A tool's `outputSchema` is a promise: every result but an error one carries `structuredContent`
conforming to it (the spec's MUST; the official clients refuse a result without it). Content-typed
returns advertise no schema; zero-argument tools list `properties: {}`; a `typing.TypedDict` return
keeps its structured output on Python 3.11 (pydantic refuses `typing.TypedDict` there)."""

from __future__ import annotations

import dataclasses
import sys
import typing
from typing import Any

import jsonschema
import pydantic
import pytest

from helpers import Driver
from mcp_stateless import App, Context, ToolResult, content

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
IMAGE = {"type": "image", "data": PNG, "mimeType": "image/png"}
EMPTY_INPUT = {"type": "object", "properties": {}, "additionalProperties": False}


class Item(pydantic.BaseModel):
    name: str


# typing's TypedDict on purpose (not typing_extensions'): the one pydantic refuses before Python 3.12.
class Leaf(typing.TypedDict):
    """A leaf."""

    n: int


class Node(typing.TypedDict, total=False):
    name: typing.Required[str]
    kids: list[Node]
    leaf: Leaf | None


def promise_app() -> App:
    app = App("promise")

    @app.tool()
    def loose_image() -> dict[str, Any]:
        return content.image(PNG, "image/png")

    @app.tool()
    def typed_image() -> content.ContentBlock:
        return content.image(PNG, "image/png")

    @app.tool()
    def typed_blocks() -> list[content.ContentBlock]:
        return [content.text("a"), content.image(PNG, "image/png")]

    @app.tool()
    def full() -> ToolResult:
        return ToolResult([content.text("as given")])

    @app.tool()
    def loose_none() -> dict[str, Any]:
        return None  # type: ignore[return-value]  # the tool's bug, reported as such

    @app.tool()
    def item_none() -> Item:
        return None  # type: ignore[return-value]

    @app.tool()
    def loose_list() -> dict[str, Any]:
        return [1, 2]  # type: ignore[return-value]

    @app.tool()
    def result_without_structured() -> dict[str, Any]:
        return ToolResult([content.text("no structured copy")])  # type: ignore[return-value]

    @app.tool()
    def error_without_structured() -> dict[str, Any]:
        return ToolResult([content.text("failed")], is_error=True)  # type: ignore[return-value]

    @app.tool()
    def no_args() -> str:
        return "ok"

    @app.tool()
    def only_injected(ctx: Context) -> str:
        return "ok"

    return app


def typeddict_app() -> App:
    app = App("typeddicts")

    @app.tool()
    def leaf() -> Leaf:
        return {"n": 1}

    @app.tool()
    def tree() -> Node:
        return {"name": "root", "kids": [{"name": "kid", "leaf": {"n": 2}}]}

    @app.tool()
    def leaves() -> list[Leaf]:
        return [{"n": 1}, {"n": 2}]

    return app


async def tools_of(d: Driver) -> dict[str, dict[str, Any]]:
    return {t["name"]: t for t in (await d.call("tools/list")).result["tools"]}


async def call(d: Driver, name: str, arguments: dict[str, Any] | None = None) -> Any:
    return await d.call("tools/call", {"name": name, "arguments": arguments or {}})


def bare(result: dict[str, Any]) -> dict[str, Any]:
    """A result without the members every result has (`resultType`, `_meta`)."""
    return {k: v for k, v in result.items() if k not in ("resultType", "_meta")}


async def test_a_loose_dict_returning_a_block_sends_the_block_and_its_structured_copy() -> None:
    async with Driver(promise_app()) as d:
        tools = await tools_of(d)
        assert tools["loose_image"]["outputSchema"] == {"type": "object", "additionalProperties": True}
        r = await call(d, "loose_image")
        assert bare(r.result) == {"content": [IMAGE], "structuredContent": IMAGE}
        jsonschema.validate(r.result["structuredContent"], tools["loose_image"]["outputSchema"])


async def test_content_typed_returns_advertise_no_schema_and_send_content_only() -> None:
    async with Driver(promise_app()) as d:
        tools = await tools_of(d)
        for name in ("typed_image", "typed_blocks", "full"):
            assert "outputSchema" not in tools[name], name
        assert bare((await call(d, "typed_image")).result) == {"content": [IMAGE]}
        assert bare((await call(d, "typed_blocks")).result) == {"content": [{"type": "text", "text": "a"}, IMAGE]}
        assert bare((await call(d, "full")).result) == {"content": [{"type": "text", "text": "as given"}]}


@pytest.mark.parametrize(("name", "what"), [
    ("loose_none", "returned None"),
    ("item_none", "returned None"),
    ("loose_list", "returned a list"),
    ("result_without_structured", "returned a ToolResult without structured content"),
])
async def test_a_value_that_cannot_keep_the_promise_is_an_internal_error(name: str, what: str) -> None:
    async with Driver(promise_app()) as d:
        r = await call(d, name)
        assert (r.status, r.error["code"]) == (200, -32603)  # a JSON-RPC error, as for a verbatim schema's violation
        assert r.error["message"].startswith(f"tool {name!r} {what}, but its outputSchema promises structured content")


async def test_an_error_result_needs_no_structured_content() -> None:
    async with Driver(promise_app()) as d:
        r = await call(d, "error_without_structured")
        assert bare(r.result) == {"content": [{"type": "text", "text": "failed"}], "isError": True}


async def test_zero_argument_tools_list_empty_properties() -> None:
    async with Driver(promise_app()) as d:
        tools = await tools_of(d)
        assert tools["no_args"]["inputSchema"] == EMPTY_INPUT
        assert tools["only_injected"]["inputSchema"] == EMPTY_INPUT


async def test_typing_typeddict_returns_keep_their_structured_output() -> None:
    async with Driver(typeddict_app()) as d:
        tools = await tools_of(d)
        schema = tools["leaf"]["outputSchema"]
        assert schema == {"type": "object", "description": "A leaf.",
                          "properties": {"n": {"title": "N", "type": "integer"}}, "required": ["n"]}
        assert bare((await call(d, "leaf")).result) == {"content": [{"type": "text", "text": '{"n":1}'}],
                                                         "structuredContent": {"n": 1}}
        tree = tools["tree"]["outputSchema"]
        assert tree["$ref"] == "#/$defs/Node"  # the tree refers to itself
        node = tree["$defs"]["Node"]
        # `Required[...]` is honoured under `from __future__ import annotations` too (typing misses it on 3.11)
        assert node["required"] == ["name"] and set(node["properties"]) == {"name", "kids", "leaf"}
        assert node["properties"]["kids"]["items"] == {"$ref": "#/$defs/Node"}
        r = await call(d, "tree")
        assert r.result["structuredContent"] == {"name": "root", "kids": [{"name": "kid", "leaf": {"n": 2}}]}
        jsonschema.validate(r.result["structuredContent"], tree)
        assert tools["leaves"]["outputSchema"]["properties"]["result"]["items"] == {"$ref": "#/$defs/Leaf"}
        assert (await call(d, "leaves")).result["structuredContent"] == {"result": [{"n": 1}, {"n": 2}]}


async def test_a_typing_typeddict_argument_is_described_and_checked() -> None:
    app = App("typeddict-argument")

    @app.tool()
    def takes_leaf(x: Leaf) -> int:
        return x["n"] * 10

    async with Driver(app) as d:
        tools = await tools_of(d)
        assert tools["takes_leaf"]["inputSchema"]["properties"]["x"] == {"$ref": "#/$defs/Leaf"}
        assert (await call(d, "takes_leaf", {"x": {"n": 4}})).result["content"] == [{"type": "text", "text": "40"}]
        assert (await call(d, "takes_leaf", {"x": {}})).result["isError"] is True


def test_this_python_is_one_where_pydantic_refuses_typing_typeddict() -> None:
    """The test above is the regression test only where pydantic refuses `typing.TypedDict`."""
    if sys.version_info >= (3, 12):  # pydantic accepts typing.TypedDict there: nothing is rewritten
        pydantic.TypeAdapter(Leaf)
        return
    with pytest.raises(pydantic.PydanticUserError, match=r"typing_extensions\.TypedDict"):
        pydantic.TypeAdapter(Leaf)


class Opaque:
    pass


@dataclasses.dataclass
class Holder:
    thing: Opaque


def test_a_return_type_without_a_json_schema_fails_at_registration_with_the_reason() -> None:
    app = App("opaque")

    def holder() -> Holder:
        return Holder(Opaque())

    with pytest.raises(TypeError, match=r"holder: the return type .*Holder.* has no JSON Schema \(.*Opaque"):
        app.tool()(holder)
