"""App behaviour through the ASGI transport: results, cache hints, paging, progress, logging, MRTR binding,
threads, schemas, validation, key rings."""

from __future__ import annotations

import asyncio
import base64
import threading
from collections.abc import Mapping
from typing import Any, Literal

import pydantic
import pytest
from typing_extensions import TypedDict

from helpers import SERVER_INFO_KEY, Driver, text_of
from mcp_stateless import App, CacheHint, Context, KeyRing, ToolError, ToolResult
from mcp_stateless.protocol.envelope import Request
from mcp_stateless.protocol.errors import McpError
from mcp_stateless.protocol.mrtr import MRTR_METHODS
from mcp_stateless.protocol.principal import ANONYMOUS


def paged_app(**kw: Any) -> App:
    app = App("paged", "2.0.0", title="Paged", page_size=2, **kw)
    for i in range(5):
        app.add_tool(
            __import__("mcp_stateless.server.registry", fromlist=["Tool"]).Tool.build(
                lambda: "x", name=f"t{i}", description=f"tool {i}"
            )
        )

    @app.prompt()
    def p1() -> str:
        return "one"

    @app.resource("mem://a", description="a")
    def a() -> str:
        return "A"

    @app.resource("mem://b", description="b", cache=CacheHint(5, "private"))
    def b() -> str:
        return "B"

    @app.resource("mem://t/{n}")
    def t(n: str) -> str:
        return n

    return app


async def test_result_type_and_server_info_everywhere() -> None:
    async with Driver(paged_app()) as d:
        for method, params in (
            ("server/discover", {}),
            ("tools/list", {}),
            ("tools/call", {"name": "t0"}),
            ("prompts/list", {}),
            ("prompts/get", {"name": "p1"}),
            ("resources/list", {}),
            ("resources/templates/list", {}),
            ("resources/read", {"uri": "mem://a"}),
        ):
            r = await d.call(method, params)
            assert r.status == 200, (method, r.response.text)
            assert r.result["resultType"] == "complete"
            assert r.result["_meta"][SERVER_INFO_KEY] == {
                "name": "paged",
                "version": "2.0.0",
                "title": "Paged",
            }


async def test_pagination_with_opaque_cursors() -> None:
    async with Driver(paged_app()) as d:
        names: list[str] = []
        cursor: str | None = None
        pages = 0
        while True:
            r = await d.call("tools/list", {} if cursor is None else {"cursor": cursor})
            res = r.result
            names += [t["name"] for t in res["tools"]]
            assert len(res["tools"]) <= 2
            pages += 1
            assert (res["ttlMs"], res["cacheScope"]) == (60_000, "public")  # every page carries the hints
            cursor = res.get("nextCursor")
            if cursor is None:
                break
            assert isinstance(cursor, str) and cursor not in ("2", "4")  # opaque, not a bare offset
        assert names == ["t0", "t1", "t2", "t3", "t4"] and pages == 3
        first = (await d.call("tools/list")).result
        bad_cursors = ["bogus", "", first["nextCursor"] + "x", 5]
        for bad in bad_cursors:
            e = await d.call("tools/list", {"cursor": bad}, id="c")
            assert (e.status, e.body["id"], e.error["code"], e.error["message"]) == (
                400,
                "c",
                -32602,
                "Invalid cursor",
            )
        # a tools cursor is not a resources cursor
        e = await d.call("resources/list", {"cursor": first["nextCursor"]})
        assert e.error["code"] == -32602


async def test_cache_hints_default_and_per_list() -> None:
    app = paged_app(
        cache={"tools/list": CacheHint(5_000, "private"), "server/discover": CacheHint(0, "public")}
    )
    async with Driver(app) as d:
        assert _hint(await d.call("tools/list")) == (5_000, "private")
        assert _hint(await d.call("prompts/list")) == (60_000, "public")
        assert _hint(await d.call("resources/list")) == (60_000, "public")
        assert _hint(await d.call("resources/templates/list")) == (60_000, "public")
        assert _hint(await d.call("server/discover")) == (0, "public")
        assert _hint(await d.call("resources/read", {"uri": "mem://a"})) == (0, "public")
        assert _hint(await d.call("resources/read", {"uri": "mem://b"})) == (5, "private")  # per resource
        for method, params in (("tools/call", {"name": "t0"}), ("prompts/get", {"name": "p1"})):
            r = (await d.call(method, params)).result
            assert "ttlMs" not in r and "cacheScope" not in r
    async with Driver(paged_app(cache=CacheHint(7, "private"))) as d:
        for method in (
            "tools/list",
            "prompts/list",
            "resources/list",
            "resources/templates/list",
            "server/discover",
        ):
            assert _hint(await d.call(method)) == (7, "private")


def _hint(r: Any) -> tuple[int, str]:
    return r.result["ttlMs"], r.result["cacheScope"]


# --------------------------------------------------------------------------- progress and logging
notify = App("notify")
seen_threads: dict[str, threading.Thread] = {}


@notify.tool()
async def jumpy(ctx: Context) -> str:
    for p in (1, 1, 0.5, 2, 3, 2.5, 10):
        await ctx.report_progress(p, 10)
    return "done"


@notify.tool()
async def chatty(ctx: Context) -> str:
    for level in ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"):
        await ctx.log(level, {"at": level}, logger="chatty")
    return "logged"


@notify.tool()
def sync_progress(ctx: Context) -> str:
    seen_threads["sync"] = threading.current_thread()
    ctx.report_progress(1, 2)
    ctx.info("from a thread")
    ctx.report_progress(2, 2)
    return "sync done"


@notify.tool()
async def async_tool() -> str:
    seen_threads["async"] = threading.current_thread()
    return "async done"


async def test_progress_strictly_increasing() -> None:
    async with Driver(notify) as d:
        r = await d.call("tools/call", {"name": "jumpy"}, progressToken=99)
        assert r.sse and r.headers["x-accel-buffering"] == "no" and r.headers["cache-control"] == "no-cache"
        assert [n["params"]["progress"] for n in r.notifications] == [1, 2, 3, 10]
        assert all(n["params"]["progressToken"] == 99 and "_meta" not in n["params"] for n in r.notifications)
        assert text_of(r.result) == "done"


async def test_log_only_with_level_and_at_or_above() -> None:
    async with Driver(notify) as d:
        r = await d.call("tools/call", {"name": "chatty"})
        assert not r.sse and r.notifications == []
        r = await d.call("tools/call", {"name": "chatty"}, **{"io.modelcontextprotocol/logLevel": "error"})
        assert [n["params"] for n in r.notifications] == [
            {"level": lv, "data": {"at": lv}, "logger": "chatty"}
            for lv in ("error", "critical", "alert", "emergency")
        ]
        r = await d.call("tools/call", {"name": "chatty"}, **{"io.modelcontextprotocol/logLevel": "debug"})
        assert len(r.notifications) == 8
        bad = await d.call("tools/call", {"name": "chatty"}, **{"io.modelcontextprotocol/logLevel": "loud"})
        assert (bad.status, bad.error["code"]) == (400, -32602)


async def test_sync_handlers_run_off_the_event_loop() -> None:
    seen_threads.clear()
    async with Driver(notify) as d:
        r = await d.call(
            "tools/call",
            {"name": "sync_progress"},
            progressToken="s",
            **{"io.modelcontextprotocol/logLevel": "info"},
        )
        loop_thread = threading.current_thread()
        assert seen_threads["sync"] is not loop_thread
        assert [n["method"] for n in r.notifications] == [
            "notifications/progress",
            "notifications/message",
            "notifications/progress",
        ]
        assert text_of(r.result) == "sync done"
        await d.call("tools/call", {"name": "async_tool"})
        assert seen_threads["async"] is loop_thread


async def test_sync_handler_does_not_block_the_loop() -> None:
    app = App("blocking")
    gate = threading.Event()

    @app.tool()
    def wait_for_gate() -> str:
        assert gate.wait(5)
        return "released"

    @app.tool()
    def release() -> str:
        gate.set()
        return "ok"

    async with Driver(app) as d:
        slow = asyncio.ensure_future(d.call("tools/call", {"name": "wait_for_gate"}))
        await asyncio.sleep(0.05)
        assert text_of((await asyncio.wait_for(d.call("tools/call", {"name": "release"}), 5)).result) == "ok"
        assert text_of((await asyncio.wait_for(slow, 5)).result) == "released"


# --------------------------------------------------------------------------- MRTR binding over the wire
def mrtr_app(**kw: Any) -> App:
    def principal(headers: Mapping[str, str] | None) -> str:
        return (headers or {}).get("x-user", "anonymous")

    app = App("mrtr", key_ring=kw.pop("key_ring", KeyRing({"k1": b"1" * 32})), principal=principal, **kw)

    @app.tool()
    def delete(ctx: Context, path: str) -> str:
        ok = ctx.elicit(
            "Delete?", {"type": "object", "properties": {"ok": {"type": "boolean"}}}, key="confirm"
        )
        return f"deleted {path}" if (ok.content or {}).get("ok") else "kept"

    @app.tool()
    def other(ctx: Context, path: str) -> str:
        ctx.elicit("Other?", {"type": "object", "properties": {"ok": {"type": "boolean"}}}, key="confirm")
        return "other ran"

    @app.prompt()
    def delete_prompt(ctx: Context) -> str:
        ctx.elicit("Prompt?", {"type": "object", "properties": {"ok": {"type": "boolean"}}}, key="confirm")
        return "prompt ran"

    return app


ELICIT = {"elicitation": {}}
YES = {"confirm": {"action": "accept", "content": {"ok": True}}}


async def _state(d: Driver, user: str = "alice", path: str = "/tmp/x") -> str:
    r = await d.call(
        "tools/call", {"name": "delete", "arguments": {"path": path}}, caps=ELICIT, headers={"x_user": user}
    )
    assert r.result["resultType"] == "input_required"
    s: str = r.result["requestState"]
    return s


async def _retry(
    d: Driver,
    state: str,
    *,
    name: str = "delete",
    path: str = "/tmp/x",
    user: str = "alice",
    method: str = "tools/call",
) -> Any:
    params: dict[str, Any] = {"name": name, "inputResponses": YES, "requestState": state}
    if method == "tools/call":
        params["arguments"] = {"path": path}
    return await d.call(method, params, caps=ELICIT, id="r", headers={"x_user": user})


def _refused(r: Any, message: str) -> None:
    assert (r.status, r.body["id"], r.error["code"], r.error["message"]) == (400, "r", -32602, message)


async def test_mrtr_honest_retry_completes() -> None:
    async with Driver(mrtr_app()) as d:
        state = await _state(d)
        assert text_of((await _retry(d, state)).result) == "deleted /tmp/x"


async def test_mrtr_tampered_state() -> None:
    async with Driver(mrtr_app()) as d:
        state = await _state(d)
        v, kid, body, tag = state.split(".")
        raw = bytearray(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
        assert b'"alice"' in raw
        raw = bytearray(bytes(raw).replace(b'"alice"', b'"mally"'))  # still valid JSON, other principal
        forged_body = base64.urlsafe_b64encode(bytes(raw)).rstrip(b"=").decode()
        _refused(await _retry(d, f"{v}.{kid}.{forged_body}.{tag}"), "requestState failed verification")
        _refused(
            await _retry(d, state[:-1] + ("A" if state[-1] != "A" else "B")),
            "requestState failed verification",
        )
        _refused(await _retry(d, "not-a-state"), "requestState is not valid")


async def test_mrtr_expired_state() -> None:
    async with Driver(mrtr_app(mrtr_ttl_s=-2)) as d:
        state = await _state(d)
        _refused(await _retry(d, state), "requestState has expired; start the request again without it")


async def test_mrtr_wrong_principal() -> None:
    async with Driver(mrtr_app()) as d:
        state = await _state(d, user="alice")
        _refused(await _retry(d, state, user="mallory"), "requestState is not valid")  # as a forged one


async def test_mrtr_replay_onto_other_method_tool_or_params() -> None:
    async with Driver(mrtr_app()) as d:
        state = await _state(d)
        _refused(
            await _retry(d, state, name="delete_prompt", method="prompts/get"),
            "requestState belongs to a different request",
        )
        _refused(await _retry(d, state, name="other"), "requestState belongs to a different request")
        _refused(await _retry(d, state, path="/etc"), "requestState belongs to a different request")


async def test_mrtr_state_from_another_key_ring_is_refused_but_rotation_opens_it() -> None:
    old_secret = base64.b64encode(b"o" * 32).decode()
    new_secret = base64.b64encode(b"n" * 32).decode()
    async with Driver(mrtr_app(key_ring=KeyRing.from_config(f"old:{old_secret}"))) as old:
        state = await _state(old)
    # another instance, keys rotated: the new key seals, the old one still opens
    rotated = mrtr_app(key_ring=KeyRing.from_config(f"new:{new_secret},old:{old_secret}"))
    async with Driver(rotated) as d:
        assert text_of((await _retry(d, state)).result) == "deleted /tmp/x"
        fresh = await _state(d)
        assert fresh.startswith("s1.new.")
    # an instance that never had the old key refuses it
    async with Driver(mrtr_app(key_ring=KeyRing.from_config(f"new:{new_secret}"))) as d:
        _refused(await _retry(d, state), "requestState was sealed with an unknown key")
    async with Driver(mrtr_app(key_ring=KeyRing.from_config(f"old:{new_secret}"))) as d:
        _refused(await _retry(d, state), "requestState failed verification")


@pytest.mark.parametrize("method", ["completion/complete", "tools/list", "server/discover", "tasks/get"])
async def test_mrtr_rejects_input_required_on_other_methods(method: str) -> None:
    assert method not in MRTR_METHODS
    req = Request(1, method, {}, "2026-07-28", dict(ELICIT), None, None, None)
    ctx = Context(req, ANONYMOUS, loop=asyncio.get_running_loop())  # what the app builds outside MRTR methods
    with pytest.raises(McpError) as e:
        ctx.elicit("Sure?", {"type": "object", "properties": {"ok": {"type": "boolean"}}}, key="c")
    assert (e.value.code, e.value.message) == (-32603, f"{method} cannot ask the client for input")


async def test_a_completion_never_answers_input_required() -> None:
    app = App("x")

    @app.resource("mem://ask")
    def ask(ctx: Context) -> str:
        return "no ask here"

    @app.completion(resource="mem://ask")
    def comp(argument: str, value: str, context: dict[str, str]) -> list[str]:
        return ["a"]

    async with Driver(app) as d:
        r = await d.call(
            "completion/complete",
            {"ref": {"type": "ref/resource", "uri": "mem://ask"}, "argument": {"name": "x", "value": ""}},
            caps=ELICIT,
        )
        assert (r.result["resultType"], r.result["completion"]) == ("complete", {"values": ["a"]})


# --------------------------------------------------------------------------- schemas and validation
class Point(pydantic.BaseModel):
    x: int
    y: int = 0


class Total(TypedDict):
    total: int


schemas = App("schemas")


@schemas.tool()
def typed(
    a: int,
    b: str = "z",
    mode: Literal["fast", "slow"] = "fast",
    tags: list[str] | None = None,
    ctx: Context | None = None,
) -> Total:
    """Typed."""
    return {"total": a + len(b) + len(tags or [])}


@schemas.tool()
def model_in_out(p: Point) -> Point:
    return Point(x=p.x * 2, y=p.y)


VERBATIM = {
    "type": "object",
    "properties": {"n": {"type": "integer", "minimum": 1}},
    "required": ["n"],
    "additionalProperties": False,
    "$comment": "kept as written",
}


@schemas.tool(
    input_schema=VERBATIM,
    output_schema={
        "type": "object",
        "properties": {"double": {"type": "integer"}},
        "required": ["double"],
        "additionalProperties": False,
    },
)
def verbatim(n: int) -> dict[str, Any]:
    if n == 13:
        return {"double": "thirteen"}  # violates the output schema
    return {"double": n * 2}


@schemas.tool()
def no_args() -> str:
    return "none"


@schemas.tool()
def fails_softly(reason: str) -> str:
    raise ToolError(f"cannot: {reason}")


@schemas.tool(output_schema={"type": "object", "properties": {"v": {"type": "integer"}}, "required": ["v"]})
def full_result(bad: bool = False) -> ToolResult:
    return ToolResult([{"type": "text", "text": "custom"}], structured={"v": "x" if bad else 1})


async def test_schema_derivation_from_hints() -> None:
    async with Driver(schemas) as d:
        tools = {t["name"]: t for t in (await d.call("tools/list")).result["tools"]}
    t = tools["typed"]
    assert t["description"] == "Typed."
    s = t["inputSchema"]
    assert s["type"] == "object" and s["required"] == ["a"]
    assert set(s["properties"]) == {"a", "b", "mode", "tags"}  # ctx is injected, not an argument
    assert s["properties"]["a"]["type"] == "integer"
    assert s["properties"]["b"]["type"] == "string" and s["properties"]["b"]["default"] == "z"
    assert s["properties"]["mode"]["enum"] == ["fast", "slow"]
    assert {"type": "array", "items": {"type": "string"}} in s["properties"]["tags"]["anyOf"]
    assert t["outputSchema"] == {
        "type": "object",
        "properties": {"total": {"title": "Total", "type": "integer"}},
        "required": ["total"],
    }
    m = tools["model_in_out"]
    assert m["inputSchema"]["properties"]["p"] == {"$ref": "#/$defs/Point"}
    assert m["inputSchema"]["$defs"]["Point"]["required"] == ["x"]
    assert m["outputSchema"]["properties"]["x"]["type"] == "integer"
    assert tools["verbatim"]["inputSchema"] == VERBATIM
    assert tools["no_args"]["inputSchema"] == {"type": "object", "properties": {}, "additionalProperties": False}


async def test_structured_output() -> None:
    async with Driver(schemas) as d:
        r = (
            await d.call("tools/call", {"name": "typed", "arguments": {"a": 1, "b": "xy", "tags": ["t"]}})
        ).result
        assert r["structuredContent"] == {"total": 4}
        assert r["content"] == [{"type": "text", "text": '{"total":4}'}]
        r = (await d.call("tools/call", {"name": "model_in_out", "arguments": {"p": {"x": 2}}})).result
        assert r["structuredContent"] == {"x": 4, "y": 0}
        r = (await d.call("tools/call", {"name": "verbatim", "arguments": {"n": 4}})).result
        assert r["structuredContent"] == {"double": 8}


@pytest.mark.parametrize(
    ("name", "arguments", "fragment"),
    [
        ("typed", {}, "a: Field required"),
        ("typed", {"a": "not a number"}, "a: Input should be a valid integer"),
        ("typed", {"a": 1, "mode": "medium"}, "mode: Input should be 'fast' or 'slow'"),
        ("model_in_out", {"p": {"y": 1}}, "p.x: Field required"),
        ("verbatim", {"n": 0}, "n: 0 is less than the minimum of 1"),
        ("verbatim", {"n": 2, "extra": 1}, "Additional properties are not allowed"),
        ("verbatim", {}, "'n' is a required property"),
    ],
)
async def test_argument_validation_is_an_iserror_result(
    name: str, arguments: dict[str, Any], fragment: str
) -> None:
    async with Driver(schemas) as d:
        r = await d.call("tools/call", {"name": name, "arguments": arguments})
        assert r.status == 200 and r.result["isError"] is True
        text = text_of(r.result)
        assert text.startswith(f"Invalid arguments for tool {name}: ")
        assert fragment in text


async def test_non_object_arguments_is_invalid_params() -> None:
    async with Driver(schemas) as d:
        r = await d.call("tools/call", {"name": "typed", "arguments": [1]})
        assert (r.status, r.error["code"]) == (400, -32602)


async def test_output_schema_violation_is_an_internal_error() -> None:
    async with Driver(schemas) as d:
        r = await d.call("tools/call", {"name": "verbatim", "arguments": {"n": 13}}, id=13)
        assert (r.status, r.body["id"], r.error["code"]) == (200, 13, -32603)
        assert r.error["message"].startswith(
            "tool 'verbatim' returned structuredContent that violates its outputSchema"
        )
        ok = await d.call("tools/call", {"name": "full_result"})
        assert ok.result["structuredContent"] == {"v": 1} and ok.result["content"][0]["text"] == "custom"
        bad = await d.call("tools/call", {"name": "full_result", "arguments": {"bad": True}})
        assert bad.error["code"] == -32603


async def test_tool_error_is_iserror() -> None:
    async with Driver(schemas) as d:
        r = await d.call("tools/call", {"name": "fails_softly", "arguments": {"reason": "disk full"}})
        assert r.result["isError"] is True and text_of(r.result) == "cannot: disk full"


def test_registration_rejects_bad_names_and_annotations() -> None:
    app = App("bad")
    with pytest.raises(ValueError):
        app.tool(name="has space")(lambda: None)
    with pytest.raises(ValueError):
        app.tool(name="x" * 129)(lambda: None)
    with pytest.raises(ValueError):
        app.tool(
            input_schema={"type": "object", "properties": {"f": {"type": "number", "x-mcp-header": "F"}}}
        )(lambda f: f)


def test_catalog_scopes_are_every_scope_registered_sorted_and_follow_removals() -> None:
    app = App("scoped", "1")

    @app.tool(scopes=["b:write", "a:read"])
    def write() -> str:
        return "w"

    @app.prompt(scopes=["c:prompt"])
    def brief() -> str:
        return "p"

    @app.resource("memo://x", scopes=["a:read", "d:memo"])
    def memo() -> str:
        return "m"

    @app.resource("memo://{name}", scopes=["e:template"])
    def named(name: str) -> str:
        return name

    @app.tool()
    def open_tool() -> str:
        return "o"

    assert app.catalog.scopes() == ["a:read", "b:write", "c:prompt", "d:memo", "e:template"]
    app.catalog.remove_tool("write")
    assert app.catalog.scopes() == ["a:read", "c:prompt", "d:memo", "e:template"]
    assert App("bare", "1").catalog.scopes() == []
