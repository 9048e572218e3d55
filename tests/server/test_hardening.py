"""Wrong answers found by an adversarial test and by writing a real server (issue 11): big integers,
completion arguments, URI-template variables, structured tool results, JSON resources, the errors that
resource and prompt handlers mean, and registration mistakes refused with a clear message."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
from typing import Any

import pydantic
import pytest
from typing_extensions import TypedDict

from helpers import Driver, text_of
from mcp_stateless import App, Context, TaskRuntime, ToolError
from mcp_stateless.protocol.endpoint import ListenEvent


# --------------------------------------------------------------------------- 13: integers beyond 64 bits
def bigint_app() -> App:
    app = App("bigint")

    @app.tool()
    def add(a: int, b: int) -> int:
        return a + b

    @app.tool()
    def totals(a: int) -> dict[str, int]:
        return {"total": a * 2}

    return app


async def test_an_integer_beyond_64_bits_is_serialised_exactly() -> None:
    async with Driver(bigint_app()) as d:
        r = await d.call("tools/call", {"name": "add", "arguments": {"a": 2**64 - 1, "b": 1}})
        assert r.status == 200
        assert r.result["content"] == [{"type": "text", "text": "18446744073709551616"}]
        assert "isError" not in r.result
        assert b'"text":"18446744073709551616"' in r.response.content
        r = await d.call("tools/call", {"name": "totals", "arguments": {"a": 2**64 - 1}})
        exact = json.loads(r.response.content)["result"]  # orjson (the test's decoder) reads it as a float
        assert exact["structuredContent"] == {"total": 2 * (2**64 - 1)}
        assert exact["content"] == [{"type": "text", "text": '{"total":36893488147419103230}'}]
        assert b'"structuredContent":{"total":36893488147419103230}' in r.response.content


# --------------------------------------------------------------------------- 14: completion argument types
def completion_app() -> App:
    app = App("complete")

    @app.prompt()
    def greet(name: str) -> str:
        return f"hi {name}"

    @app.completion(prompt="greet")
    def names(argument: str, value: str, context: dict[str, str]) -> list[str]:
        if value == "!":
            raise ValueError("names have no punctuation")
        return [n for n in ("ada", "alan") if n.startswith(value)]

    return app


async def test_completion_with_a_non_string_value_is_invalid_params() -> None:
    ref = {"type": "ref/prompt", "name": "greet"}
    async with Driver(completion_app()) as d:
        for value in (3, None, ["a"], {"x": 1}):
            r = await d.call("completion/complete", {"ref": ref, "argument": {"name": "name", "value": value}})
            assert r.error["code"] == -32602
            assert r.error["message"] == "completion/complete needs argument.value (a string)"
        r = await d.call("completion/complete", {"ref": ref, "argument": {"name": "name", "value": "a"},
                                                 "context": {"arguments": {"x": 1}}})
        assert r.error["code"] == -32602
        assert r.error["message"] == "completion/complete context.arguments must be an object of strings"
        r = await d.call("completion/complete", {"ref": ref, "argument": {"name": "name", "value": "al"}})
        assert r.result["completion"] == {"values": ["alan"]}
        r = await d.call("completion/complete", {"ref": ref, "argument": {"name": "name", "value": "!"}})
        assert r.error == {"code": -32602, "message": "names have no punctuation"}


# --------------------------------------------------------------------------- 15: URI template variables
def files_app() -> App:
    app = App("files")

    @app.resource("files://docs/{name}")
    def doc(name: str) -> str:
        return f"doc {name}"

    @app.resource("files://tree/{+path}")
    def tree(path: str) -> str:
        return f"tree {path}"

    return app


async def test_simple_template_variables_are_decoded_then_refuse_a_slash() -> None:
    async with Driver(files_app()) as d:
        for uri in ("files://docs/%2e%2e%2f%2e%2e%2fadmin", "files://docs/a%2Fb", "files://docs/%2e%2e",
                    "files://docs/.", "files://tree/a/%2e%2e/%2e%2e/etc"):
            r = await d.call("resources/read", {"uri": uri})
            assert r.error == {"code": -32602, "message": "Resource not found", "data": {"uri": uri}}, uri
        r = await d.call("resources/read", {"uri": "files://docs/read%20me%2Etxt"})
        assert r.result["contents"][0]["text"] == "doc read me.txt"
        r = await d.call("resources/read", {"uri": "files://tree/a/b%20c"})
        assert r.result["contents"][0]["text"] == "tree a/b c"


# --------------------------------------------------------------------------- 18: structured tool results
class Item(pydantic.BaseModel):
    name: str
    qty: int


@dataclasses.dataclass
class Box:
    label: str
    weight: float


class Row(TypedDict):
    id: int
    tag: str


def structured_app() -> App:
    app = App("structured")

    @app.tool()
    def items() -> list[Item]:
        return [Item(name="a", qty=1), Item(name="b", qty=2)]

    @app.tool()
    def boxes() -> list[Box]:
        return [Box("x", 1.5)]

    @app.tool()
    def rows() -> list[Row]:
        return [{"id": 1, "tag": "t"}]

    @app.tool()
    def mapping() -> dict[str, Any]:
        return {"k": [1, 2], "item": Item(name="c", qty=3)}

    @app.tool()
    def bare() -> dict:  # type: ignore[type-arg]
        return {"k": 1}

    @app.tool()
    def one_box() -> Box:
        return Box("y", 2.0)

    @app.tool()
    def maybe_item(present: bool) -> Item | None:
        return Item(name="m", qty=0) if present else None

    @app.tool()
    def unannotated():  # type: ignore[no-untyped-def]
        return [Item(name="u", qty=9), Box("v", 0.5)]

    @app.tool()
    def blocks() -> list[dict[str, Any]]:
        return [{"type": "text", "text": "one"}, {"type": "text", "text": "two"}]

    return app


async def test_tools_returning_models_and_lists_give_json_and_a_matching_output_schema() -> None:
    async with Driver(structured_app()) as d:
        tools = {t["name"]: t for t in (await d.call("tools/list")).result["tools"]}
        wrapped = {"items": [{"name": "a", "qty": 1}, {"name": "b", "qty": 2}],
                   "boxes": [{"label": "x", "weight": 1.5}],
                   "rows": [{"id": 1, "tag": "t"}]}
        for name, value in wrapped.items():
            schema = tools[name]["outputSchema"]
            assert schema["type"] == "object" and schema["required"] == ["result"], schema
            assert schema["properties"]["result"]["type"] == "array"
            r = await d.call("tools/call", {"name": name})
            assert r.result["structuredContent"] == {"result": value}
            assert text_of(r.result) == pydantic.TypeAdapter(Any).dump_json({"result": value}).decode()
        assert tools["items"]["outputSchema"]["$defs"]["Item"]["required"] == ["name", "qty"]
        r = await d.call("tools/call", {"name": "mapping"})
        assert r.result["structuredContent"] == {"k": [1, 2], "item": {"name": "c", "qty": 3}}
        assert text_of(r.result) == '{"k":[1,2],"item":{"name":"c","qty":3}}'
        assert tools["mapping"]["outputSchema"] == {"type": "object", "additionalProperties": True}
        r = await d.call("tools/call", {"name": "bare"})
        assert r.result["structuredContent"] == {"k": 1}
        assert tools["bare"]["outputSchema"] == {"type": "object", "additionalProperties": True}
        r = await d.call("tools/call", {"name": "one_box"})
        assert r.result["structuredContent"] == {"label": "y", "weight": 2.0}
        assert tools["one_box"]["outputSchema"]["required"] == ["label", "weight"]
        r = await d.call("tools/call", {"name": "maybe_item", "arguments": {"present": True}})
        assert r.result["structuredContent"] == {"result": {"name": "m", "qty": 0}}
        r = await d.call("tools/call", {"name": "maybe_item", "arguments": {"present": False}})
        assert r.result["structuredContent"] == {"result": None}
        assert text_of(r.result) == '{"result":null}'
        r = await d.call("tools/call", {"name": "unannotated"})  # no schema: JSON text, never a repr
        assert "outputSchema" not in tools["unannotated"] and "structuredContent" not in r.result
        assert text_of(r.result) == '[{"name":"u","qty":9},{"label":"v","weight":0.5}]'
        r = await d.call("tools/call", {"name": "blocks"})  # content blocks stay content blocks
        assert r.result["content"] == [{"type": "text", "text": "one"}, {"type": "text", "text": "two"}]
        assert "structuredContent" not in r.result


# --------------------------------------------------------------------------- 19: JSON resources
def json_resources_app() -> App:
    app = App("json-resources")

    @app.resource("data://rows")
    def rows() -> list[dict[str, Any]]:
        return [{"id": 1, "name": "a"}, {"id": 2, "name": "b"}]

    @app.resource("data://one")
    def one() -> dict[str, Any]:
        return {"text": "not a contents entry", "author": "x"}

    @app.resource("data://item/{name}")
    def item(name: str) -> Item:
        return Item(name=name, qty=1)

    @app.resource("data://typed", mime_type="application/vnd.example+json")
    def typed() -> list[Box]:
        return [Box("b", 1.0)]

    @app.resource("data://count")
    def count() -> int:
        return 3

    @app.resource("data://texts")
    def texts() -> list[str]:
        return ["one", "two"]

    @app.resource("data://entry")
    def entry() -> dict[str, Any]:
        return {"text": "hello", "mimeType": "text/markdown"}

    return app


async def test_resources_returning_data_give_one_json_text_content() -> None:
    async with Driver(json_resources_app()) as d:
        expect = {
            "data://rows": ('[{"id":1,"name":"a"},{"id":2,"name":"b"}]', "application/json"),
            "data://one": ('{"text":"not a contents entry","author":"x"}', "application/json"),
            "data://item/z": ('{"name":"z","qty":1}', "application/json"),
            "data://typed": ('[{"label":"b","weight":1.0}]', "application/vnd.example+json"),
            "data://count": ("3", "application/json"),
        }
        for uri, (text, mime) in expect.items():
            r = await d.call("resources/read", {"uri": uri})
            assert r.result["contents"] == [{"uri": uri, "text": text, "mimeType": mime}], uri
        r = await d.call("resources/read", {"uri": "data://texts"})  # strings stay text contents
        assert [c["text"] for c in r.result["contents"]] == ["one", "two"]
        r = await d.call("resources/read", {"uri": "data://entry"})  # an explicit contents entry stays one
        assert r.result["contents"] == [{"uri": "data://entry", "text": "hello", "mimeType": "text/markdown"}]


# --------------------------------------------------------------------------- 20: handler exceptions
def failing_app() -> App:
    app = App("failing")

    @app.resource("things://{name}")
    def thing(name: str) -> str:
        if name == "missing":
            raise KeyError(name)
        if name == "file":
            raise FileNotFoundError(f"/srv/{name}")
        if name == "bad":
            raise ValueError("name must be lowercase")
        if name == "tool":
            raise ToolError("thing is archived")
        raise RuntimeError("database exploded: password=hunter2")

    @app.prompt()
    def review(kind: str) -> str:
        if kind == "missing":
            raise KeyError(kind)
        if kind == "bad":
            raise ValueError("kind must be code or prose")
        if kind == "tool":
            raise ToolError("reviews are closed")
        raise RuntimeError("secret detail")

    return app


async def test_resource_and_prompt_handler_exceptions_become_the_error_they_meant() -> None:
    async with Driver(failing_app()) as d:
        for name in ("missing", "file"):
            r = await d.call("resources/read", {"uri": f"things://{name}"})
            assert r.error == {"code": -32602, "message": "Resource not found", "data": {"uri": f"things://{name}"}}
        r = await d.call("resources/read", {"uri": "things://bad"})
        assert r.error == {"code": -32602, "message": "name must be lowercase", "data": {"uri": "things://bad"}}
        r = await d.call("resources/read", {"uri": "things://tool"})
        assert r.error == {"code": -32602, "message": "thing is archived", "data": {"uri": "things://tool"}}
        r = await d.call("resources/read", {"uri": "things://other"})
        assert r.error == {"code": -32603, "message": "Internal error"}  # no detail leaks
        r = await d.call("prompts/get", {"name": "review", "arguments": {"kind": "missing"}})
        assert r.error == {"code": -32602, "message": "Prompt review: not found: 'missing'",
                           "data": {"name": "review"}}
        r = await d.call("prompts/get", {"name": "review", "arguments": {"kind": "bad"}})
        assert r.error == {"code": -32602, "message": "kind must be code or prose", "data": {"name": "review"}}
        r = await d.call("prompts/get", {"name": "review", "arguments": {"kind": "tool"}})
        assert r.error == {"code": -32602, "message": "reviews are closed", "data": {"name": "review"}}
        r = await d.call("prompts/get", {"name": "review", "arguments": {"kind": "x"}})
        assert r.error == {"code": -32603, "message": "Internal error"}


# --------------------------------------------------------------------------- 21: registration mistakes
def test_duplicate_names_are_refused_at_registration() -> None:
    app = App("dups")

    @app.tool()
    def t() -> str:
        return "1"

    with pytest.raises(ValueError, match=r"^tool 't' is already registered \(remove_tool\('t'\) first"):
        app.tool(name="t")(lambda: "2")

    @app.prompt()
    def p() -> str:
        return "1"

    with pytest.raises(ValueError, match=r"^prompt 'p' is already registered"):
        app.prompt(name="p")(lambda: "2")

    @app.resource("mem://r")
    def r() -> str:
        return "1"

    with pytest.raises(ValueError, match=r"^resource 'mem://r' is already registered"):
        app.resource("mem://r")(lambda: "2")

    @app.resource("mem://t/{x}")
    def tpl(x: str) -> str:
        return x

    with pytest.raises(ValueError, match=r"^resource template 'mem://t/\{x\}' is already registered"):
        app.resource("mem://t/{x}")(tpl)
    assert app.remove_tool("t")
    app.tool(name="t")(lambda: "2")  # replacing on purpose: remove, then add


def test_template_variables_must_match_the_parameters() -> None:
    app = App("tpl")
    with pytest.raises(ValueError, match=r"^resource template 'mem://u/\{user_id\}': variable 'user_id' is not a "
                                         r"parameter of profile \(parameters: uid\)$"):
        @app.resource("mem://u/{user_id}")
        def profile(uid: str) -> str:
            return uid
    with pytest.raises(ValueError, match=r"^resource template 'mem://v/\{a\}': parameter 'b' of pair has no "
                                         r"template variable and no default$"):
        @app.resource("mem://v/{a}")
        def pair(a: str, b: str) -> str:
            return a + b
    with pytest.raises(ValueError, match=r"^resource 'mem://fixed': parameter 'x' of fixed has no template "
                                         r"variable and no default$"):
        @app.resource("mem://fixed")
        def fixed(x: str) -> str:
            return x

    @app.resource("mem://ok/{a}{?page}")
    def ok(a: str, ctx: Context, page: str = "1", extra: int = 0) -> str:
        return a + page


async def test_template_variables_are_converted_as_declared() -> None:
    app = App("conv")

    @app.resource("mem://n/{n}")
    def number(n: int) -> str:
        return f"{n + 1}"

    async with Driver(app) as d:
        assert (await d.call("resources/read", {"uri": "mem://n/41"})).result["contents"][0]["text"] == "42"
        r = await d.call("resources/read", {"uri": "mem://n/x"})
        assert r.error["code"] == -32602 and r.error["data"] == {"uri": "mem://n/x"}
        assert r.error["message"].startswith("Invalid resource URI: n: Input should be a valid integer")


async def test_prompt_parameters_are_converted_as_declared_or_refused() -> None:
    app = App("prompt-types")

    @app.prompt()
    def repeat(word: str, times: int, loud: bool = False) -> str:
        out = " ".join([word] * times)
        return out.upper() if loud else out

    async with Driver(app) as d:
        r = await d.call("prompts/get", {"name": "repeat", "arguments": {"word": "hi", "times": "3"}})
        assert r.result["messages"][0]["content"]["text"] == "hi hi hi"
        r = await d.call("prompts/get", {"name": "repeat", "arguments": {"word": "a", "times": "2", "loud": "true"}})
        assert r.result["messages"][0]["content"]["text"] == "A A"
        r = await d.call("prompts/get", {"name": "repeat", "arguments": {"word": "hi", "times": "three"}})
        assert r.error["code"] == -32602 and r.error["data"] == {"name": "repeat"}
        assert r.error["message"].startswith("Invalid arguments for prompt repeat: times: Input should be a valid "
                                             "integer")


async def test_task_required_without_a_task_runtime_is_refused_at_startup_and_first_use() -> None:
    app = App("no-tasks")

    @app.tool(task="required")
    async def job() -> str:
        return "ran"

    with pytest.raises(RuntimeError, match=r"^tool 'job' is registered with task='required' but the app has no task "
                                           r"runtime"):
        await app.startup()
    async with Driver(app) as d:  # served without startup(): refused at the call, never run synchronously
        r = await d.call("tools/call", {"name": "job"})
        assert r.error["code"] == -32603
        assert r.error["message"].startswith("the server could not start: tool 'job' is registered with "
                                             "task='required' but the app has no task runtime")
    app.enable_tasks(TaskRuntime())
    await app.startup()
    await app.aclose()


# --------------------------------------------------------------------------- 8: listen filters
async def test_listen_subscriptions_are_capped_per_stream_with_a_clear_error() -> None:
    app = App("cap", listen_max_subscriptions=1000)
    app.declare("resources")
    async with Driver(app) as d:
        uris = [f"mem://r/{i}" for i in range(1001)]
        r = await d.call("subscriptions/listen", {"notifications": {"resourceSubscriptions": uris}})
        assert r.error == {"code": -32602, "message": "notifications.resourceSubscriptions has 1001 entries; "
                                                      "at most 1000 per listen stream",
                           "data": {"limit": 1000}}


async def test_listen_matching_costs_no_more_with_many_subscriptions() -> None:
    app = App("many", listen_max_subscriptions=20_000)
    app.declare("resources")
    many = [f"mem://big/{i}" for i in range(10_000)]
    want = ["mem://watched", "mem://tree/"]
    from helpers import rpc
    from mcp_stateless.protocol import envelope

    def request(uris: list[str], rid: int) -> Any:
        return envelope.classify(rpc("subscriptions/listen", {"notifications": {"resourceSubscriptions": uris}},
                                     id=rid), None, app.table)

    async def matched(uris: list[str], rid: int, events: int) -> tuple[list[str], float]:
        stream = app.listen(request(uris, rid))
        ack = await anext(stream)
        assert isinstance(ack, ListenEvent)
        got: list[str] = []
        start = time.perf_counter()
        for i in range(events):
            await app.notify_resource_updated(f"mem://other/{i}")
        await app.notify_resource_updated("mem://watched")
        await app.notify_resource_updated("mem://tree/a/b")
        await app.notify_resource_updated("mem://treetop")
        while len(got) < 2:
            item = await asyncio.wait_for(anext(stream), 5)
            assert isinstance(item, ListenEvent)
            got.append(item.message["params"]["uri"])
        elapsed = time.perf_counter() - start
        await stream.aclose()
        return got, elapsed

    small, t_small = await matched(want, 1, 2000)
    big, t_big = await matched(many + want, 2, 2000)
    assert small == big == ["mem://watched", "mem://tree/a/b"]
    # O(subscriptions) per event made this ~10,000 times the work; per-event lookups keep it level
    assert t_big < t_small * 3 + 0.1, (t_small, t_big)


def test_uri_filter_matches_exactly_what_the_scan_matched() -> None:
    from mcp_stateless.server.listen import UriFilter

    subs = ["file:///dir/", "file:///one", "mem://a/b", "", "x:"]
    events = ["file:///dir/a", "file:///dir", "file:///dirt", "file:///one", "file:///one/two", "file:///on",
              "mem://a/b/c", "mem://a/bc", "mem://a", "/abs", "x:/y", "x:y", "other"]
    for chosen in (subs, subs[:2], subs[2:3], []):
        f = UriFilter(chosen)
        for uri in events:
            scan = any(uri == u or uri.startswith(u.rstrip("/") + "/") for u in chosen)
            assert f.matches(uri) == scan, (chosen, uri)
