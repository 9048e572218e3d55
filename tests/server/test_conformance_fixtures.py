"""examples/conformance_server.py: the exact output of every fixture, since the official
suite only checks shapes. Every reply is also validated against the 2026-07-28 schema by the driver."""

from __future__ import annotations

import json
from typing import Any

import pytest

from helpers import SERVER_INFO_KEY, Driver, text_of
from mcp_stateless import App

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
WAV = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA="
ALL_CAPS = {"elicitation": {"form": {}}, "sampling": {}, "roots": {}}


@pytest.fixture
async def d(conformance_app: App) -> Any:
    async with Driver(conformance_app) as drv:
        yield drv


async def tool(d: Driver, name: str, arguments: dict[str, Any] | None = None, **kw: Any) -> dict[str, Any]:
    r = await d.call("tools/call", {"name": name, "arguments": arguments or {}}, **kw)
    assert r.status == 200, r.response.text
    assert r.result["resultType"] == "complete"
    assert r.result["_meta"][SERVER_INFO_KEY] == {"name": "mcp-stateless-conformance", "version": "0.1.0"}
    return r.result


async def test_discover(d: Driver) -> None:
    r = await d.call("server/discover", id="d1")
    assert r.body["id"] == "d1"
    res = r.result
    assert res["supportedVersions"] == ["2026-07-28"]
    caps = dict(res["capabilities"])
    caps.pop("extensions", None)  # the tasks extension is covered by tests/tasks
    assert caps == {
        "tools": {"listChanged": True},
        "prompts": {"listChanged": True},
        "resources": {"subscribe": True, "listChanged": True},
        "completions": {},
        "logging": {},
    }
    assert res["instructions"] == "Fixtures for the MCP conformance suite."
    assert (res["ttlMs"], res["cacheScope"]) == (3_600_000, "public")
    assert "serverInfo" not in res


async def test_tools_list_is_deterministic_and_first_is_argument_free(d: Driver) -> None:
    a = (await d.call("tools/list")).result
    b = (await d.call("tools/list")).result
    assert a == b and "nextCursor" not in a
    names = [t["name"] for t in a["tools"]]
    assert names[0] == "test_simple_text"
    assert a["tools"][0]["inputSchema"] == {"type": "object", "properties": {}, "additionalProperties": False}
    assert a["tools"][0]["description"] == "Tests simple text content response"
    for required in (
        "test_image_content",
        "test_audio_content",
        "test_embedded_resource",
        "test_multiple_content_types",
        "test_tool_with_progress",
        "test_error_handling",
        "test_missing_capability",
        "test_streaming_elicitation",
        "test_logging_tool",
        "test_trigger_tool_change",
        "test_trigger_prompt_change",
        "json_schema_2020_12_tool",
        "test_x_mcp_header",
        "test_input_required_result_elicitation",
    ):
        assert required in names
    assert (a["ttlMs"], a["cacheScope"]) == (60_000, "public")


async def test_simple_text(d: Driver) -> None:
    r = await tool(d, "test_simple_text")
    assert r["content"] == [{"type": "text", "text": "This is a simple text response for testing."}]
    assert "isError" not in r or r["isError"] is False


async def test_image_audio_embedded(d: Driver) -> None:
    assert (await tool(d, "test_image_content"))["content"] == [
        {"type": "image", "data": PNG, "mimeType": "image/png"}
    ]
    assert (await tool(d, "test_audio_content"))["content"] == [
        {"type": "audio", "data": WAV, "mimeType": "audio/wav"}
    ]
    assert (await tool(d, "test_embedded_resource"))["content"] == [
        {
            "type": "resource",
            "resource": {
                "uri": "test://embedded-resource",
                "mimeType": "text/plain",
                "text": "This is an embedded resource content.",
            },
        }
    ]


async def test_content_tools_advertise_no_output_schema_and_send_exactly_their_blocks(d: Driver) -> None:
    """An advertised outputSchema would oblige every result to carry structuredContent (the official
    clients refuse the call without it): the content tools advertise none and send only their blocks."""
    tools = {t["name"]: t for t in (await d.call("tools/list")).result["tools"]}
    names = ("test_image_content", "test_audio_content", "test_embedded_resource", "test_multiple_content_types")
    for name in names:
        assert "outputSchema" not in tools[name], name
        r = await tool(d, name)
        assert set(r) == {"resultType", "content", "_meta"}, (name, r)
    assert (await tool(d, "test_image_content"))["content"] == [{"type": "image", "data": PNG, "mimeType": "image/png"}]
    # every tool that does advertise one is one whose results carry structuredContent
    assert [n for n, t in tools.items() if "outputSchema" in t] == []


async def test_mixed_content(d: Driver) -> None:
    c = (await tool(d, "test_multiple_content_types"))["content"]
    assert c[0] == {"type": "text", "text": "Multiple content types test:"}
    assert c[1] == {"type": "image", "data": PNG, "mimeType": "image/png"}
    assert c[2]["type"] == "resource"
    assert c[2]["resource"]["uri"] == "test://mixed-content-resource"
    assert c[2]["resource"]["mimeType"] == "application/json"
    assert json.loads(c[2]["resource"]["text"]) == {"test": "data", "value": 123}
    assert len(c) == 3


async def test_error_handling_is_an_iserror_result(d: Driver) -> None:
    r = await tool(d, "test_error_handling")
    assert r["isError"] is True
    assert r["content"] == [{"type": "text", "text": "This tool intentionally returns an error for testing"}]


async def test_progress_fixture(d: Driver) -> None:
    r = await d.call("tools/call", {"name": "test_tool_with_progress"}, progressToken="pt-1")
    assert r.sse and r.headers["x-accel-buffering"] == "no"
    progress = [m["params"] for m in r.notifications]
    assert progress == [
        {"progressToken": "pt-1", "progress": p, "total": 100, "message": f"Completed step {i} of 3"}
        for i, p in ((1, 0), (2, 50), (3, 100))
    ]
    assert text_of(r.result) == "Progress test completed"
    # without a token: plain JSON, no notifications
    plain = await d.call("tools/call", {"name": "test_tool_with_progress"})
    assert not plain.sse and text_of(plain.result) == "Progress test completed"


async def test_missing_capability(d: Driver) -> None:
    r = await d.call("tools/call", {"name": "test_missing_capability"}, id=3)
    assert r.status == 400
    assert r.error["code"] == -32021 and r.error["data"] == {"requiredCapabilities": {"sampling": {}}}
    ok = await tool(d, "test_missing_capability", caps={"sampling": {}})
    assert text_of(ok) == "The client declared the sampling capability."


async def test_streaming_elicitation(d: Driver) -> None:
    r = await d.call("tools/call", {"name": "test_streaming_elicitation"}, progressToken=5)
    assert [m["method"] for m in r.notifications] == ["notifications/progress", "notifications/progress"]
    assert [m["params"] for m in r.notifications] == [
        {"progressToken": 5, "progress": 1, "total": 2, "message": "working"},
        {"progressToken": 5, "progress": 2, "total": 2, "message": "done"},
    ]
    assert text_of(r.result) == "Streaming completed without server-to-client requests."


async def test_logging_tool(d: Driver) -> None:
    quiet = await d.call("tools/call", {"name": "test_logging_tool"})
    assert not quiet.sse and quiet.notifications == []
    loud = await d.call(
        "tools/call", {"name": "test_logging_tool"}, **{"io.modelcontextprotocol/logLevel": "info"}
    )
    assert [m["params"] for m in loud.notifications] == [
        {"level": "info", "data": "Tool execution started"},
        {"level": "info", "data": "Tool processing data"},
        {"level": "info", "data": "Tool execution completed"},
    ]
    above = await d.call(
        "tools/call", {"name": "test_logging_tool"}, **{"io.modelcontextprotocol/logLevel": "warning"}
    )
    assert above.notifications == [] and text_of(above.result) == "Logging test completed"


async def test_json_schema_2020_12_preserved_verbatim(d: Driver) -> None:
    tools = {t["name"]: t for t in (await d.call("tools/list")).result["tools"]}
    s = tools["json_schema_2020_12_tool"]["inputSchema"]
    assert s["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert s["$defs"]["address"]["$anchor"] == "addressDef"
    assert s["properties"]["address"] == {"$ref": "#/$defs/address"}
    assert s["allOf"] == [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}]
    assert s["if"] == {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]}
    assert s["then"] == {"required": ["phone"]} and s["else"] == {"required": ["email"]}
    assert s["additionalProperties"] is False
    ok = await tool(d, "json_schema_2020_12_tool", {"name": "a", "contactMethod": "phone", "phone": "1"})
    assert text_of(ok) == 'Received: {"contactMethod": "phone", "name": "a", "phone": "1"}'
    bad = await tool(d, "json_schema_2020_12_tool", {"name": "a", "contactMethod": "phone", "email": "e"})
    assert bad["isError"] is True
    assert text_of(bad).startswith("Invalid arguments for tool json_schema_2020_12_tool: ")


async def test_x_mcp_header(d: Driver) -> None:
    tools = {t["name"]: t for t in (await d.call("tools/list")).result["tools"]}
    assert tools["test_x_mcp_header"]["inputSchema"]["properties"]["region"]["x-mcp-header"] == "Region"
    ok = await tool(d, "test_x_mcp_header", {"region": "us-west1"}, headers={"mcp_param_region": "us-west1"})
    assert text_of(ok) == "Region: us-west1"
    r = await d.call("tools/call", {"name": "test_x_mcp_header", "arguments": {"region": "us-west1"}}, id=4)
    assert (r.status, r.error["code"], r.body["id"]) == (400, -32020, 4)


async def test_trigger_tool_change_toggles(conformance_app: App) -> None:
    async with Driver(conformance_app) as d:
        before = [t["name"] for t in (await d.call("tools/list")).result["tools"]]
        assert "test_dynamic_tool" not in before
        assert text_of(await tool(d, "test_trigger_tool_change")) == "Tool list changed."
        mid = [t["name"] for t in (await d.call("tools/list")).result["tools"]]
        assert mid == [*before, "test_dynamic_tool"]
        assert text_of(await tool(d, "test_dynamic_tool")) == "dynamic"
        await tool(d, "test_trigger_tool_change")
        assert [t["name"] for t in (await d.call("tools/list")).result["tools"]] == before
        await tool(d, "test_trigger_prompt_change")
        names = [p["name"] for p in (await d.call("prompts/list")).result["prompts"]]
        assert "test_dynamic_prompt" in names
        await tool(d, "test_trigger_prompt_change")
        names = [p["name"] for p in (await d.call("prompts/list")).result["prompts"]]
        assert "test_dynamic_prompt" not in names


# --------------------------------------------------------------------------- MRTR fixtures
async def round1(
    d: Driver,
    name: str,
    caps: dict[str, Any] | None = None,
    method: str = "tools/call",
    arguments: dict[str, Any] | None = None,
) -> dict[str, Any]:
    params: dict[str, Any] = {"name": name, "arguments": arguments or {}}
    r = await d.call(method, params, caps=ALL_CAPS if caps is None else caps)
    assert r.status == 200, r.response.text
    assert r.result["resultType"] == "input_required"
    assert "ttlMs" not in r.result and "cacheScope" not in r.result
    return r.result


async def round2(
    d: Driver,
    name: str,
    state: str | None,
    responses: dict[str, Any],
    *,
    method: str = "tools/call",
    id: Any = 2,
    arguments: dict[str, Any] | None = None,
) -> Any:
    params: dict[str, Any] = {"name": name, "arguments": arguments or {}, "inputResponses": responses}
    if state is not None:
        params["requestState"] = state
    return await d.call(method, params, caps=ALL_CAPS, id=id)


async def test_mrtr_elicitation(d: Driver) -> None:
    r1 = await round1(d, "test_input_required_result_elicitation")
    assert r1["inputRequests"] == {
        "user_name": {
            "method": "elicitation/create",
            "params": {
                "mode": "form",
                "message": "What is your name?",
                "requestedSchema": {
                    "type": "object",
                    "properties": {"name": {"type": "string", "description": "Your name"}},
                    "required": ["name"],
                },
            },
        }
    }
    r2 = await round2(
        d,
        "test_input_required_result_elicitation",
        r1.get("requestState"),
        {"user_name": {"action": "accept", "content": {"name": "Ada"}}, "unrelated_extra": {"ignored": True}},
    )
    assert r2.result["resultType"] == "complete" and text_of(r2.result) == "Hello, Ada!"
    # missing / wrong key: a fresh InputRequiredResult, not an error
    again = await round2(d, "test_input_required_result_elicitation", None, {"wrong": {"action": "accept"}})
    assert again.result["resultType"] == "input_required"
    assert list(again.result["inputRequests"]) == ["user_name"]
    # structurally invalid answer: JSON-RPC -32602
    bad = await round2(d, "test_input_required_result_elicitation", None, {"user_name": {"action": "maybe"}})
    assert (bad.status, bad.error["code"]) == (400, -32602)
    assert (await round2(d, "test_input_required_result_elicitation", None, {"user_name": 3})).error[
        "code"
    ] == -32602
    declined = await round2(
        d, "test_input_required_result_elicitation", None, {"user_name": {"action": "decline"}}
    )
    assert text_of(declined.result) == "Elicitation was decline."


async def test_mrtr_sampling_and_roots(d: Driver) -> None:
    r1 = await round1(d, "test_input_required_result_sampling")
    assert r1["inputRequests"] == {
        "capital_question": {
            "method": "sampling/createMessage",
            "params": {
                "messages": [
                    {"role": "user", "content": {"type": "text", "text": "What is the capital of France?"}}
                ],
                "maxTokens": 100,
            },
        }
    }
    r2 = await round2(
        d,
        "test_input_required_result_sampling",
        r1.get("requestState"),
        {
            "capital_question": {
                "role": "assistant",
                "content": {"type": "text", "text": "Paris"},
                "model": "m",
                "stopReason": "endTurn",
            }
        },
    )
    assert text_of(r2.result) == "Sampled: Paris"
    r1 = await round1(d, "test_input_required_result_list_roots")
    assert r1["inputRequests"] == {"client_roots": {"method": "roots/list"}}
    r2 = await round2(
        d,
        "test_input_required_result_list_roots",
        r1.get("requestState"),
        {"client_roots": {"roots": [{"uri": "file:///a", "name": "a"}, {"uri": "file:///b"}]}},
    )
    assert text_of(r2.result) == "Roots: file:///a, file:///b"


async def test_mrtr_request_state(d: Driver) -> None:
    r1 = await round1(d, "test_input_required_result_request_state")
    assert isinstance(r1["requestState"], str)
    assert list(r1["inputRequests"]) == ["confirm"]
    r2 = await round2(
        d,
        "test_input_required_result_request_state",
        r1["requestState"],
        {"confirm": {"action": "accept", "content": {"ok": True}}},
    )
    assert text_of(r2.result) == "state-ok: confirmed=True"


async def test_mrtr_multiple_inputs(d: Driver) -> None:
    r1 = await round1(d, "test_input_required_result_multiple_inputs")
    assert sorted(r1["inputRequests"]) == ["client_roots", "greeting", "user_name"]
    assert r1["inputRequests"]["greeting"]["params"]["maxTokens"] == 50
    answers = {
        "user_name": {"action": "accept", "content": {"name": "Ada"}},
        "greeting": {"role": "assistant", "content": {"type": "text", "text": "Hi"}, "model": "m"},
        "client_roots": {"roots": [{"uri": "file:///r"}]},
    }
    partial = await round2(
        d,
        "test_input_required_result_multiple_inputs",
        r1["requestState"],
        {"user_name": answers["user_name"]},
    )
    assert partial.result["resultType"] == "input_required"
    done = await round2(d, "test_input_required_result_multiple_inputs", r1["requestState"], answers)
    assert text_of(done.result) == "Ada: Hi (1 roots)"


async def test_mrtr_multi_round(d: Driver) -> None:
    name = "test_input_required_result_multi_round"
    r1 = await round1(d, name)
    assert r1["inputRequests"]["step1"]["params"]["message"] == "Step 1: What is your name?"
    r2 = await round2(
        d, name, r1["requestState"], {"step1": {"action": "accept", "content": {"name": "Ada"}}}
    )
    res2 = r2.result
    assert res2["resultType"] == "input_required"
    assert list(res2["inputRequests"]) == ["step2"]
    assert res2["inputRequests"]["step2"]["params"]["message"] == "Step 2: What is your favorite color?"
    assert res2["requestState"] != r1["requestState"]
    r3 = await round2(
        d, name, res2["requestState"], {"step2": {"action": "accept", "content": {"color": "red"}}}, id=3
    )
    assert text_of(r3.result) == "Ada likes red"


async def test_mrtr_tampered_state(d: Driver) -> None:
    name = "test_input_required_result_tampered_state"
    r1 = await round1(d, name)
    state = r1["requestState"]
    answer = {"confirm": {"action": "accept", "content": {"ok": True}}}
    assert text_of((await round2(d, name, state, answer)).result) == "state verified, ok=True"
    tampered = state[:-3] + ("AAA" if not state.endswith("AAA") else "BBB")
    bad = await round2(d, name, tampered, answer, id="t")
    assert (bad.status, bad.error["code"], bad.body["id"]) == (400, -32602, "t")
    assert bad.error["message"] == "requestState failed verification"


async def test_mrtr_capabilities(d: Driver) -> None:
    name = "test_input_required_result_capabilities"
    only_roots = await round1(d, name, caps={"roots": {}})
    assert list(only_roots["inputRequests"]) == ["client_roots"]
    both = await round1(d, name, caps={"elicitation": {}, "sampling": {}})
    assert sorted(both["inputRequests"]) == ["greeting", "user_name"]
    none = await d.call("tools/call", {"name": name, "arguments": {}}, id=7)
    assert (none.status, none.error["code"]) == (400, -32021)


async def test_mrtr_prompt(d: Driver) -> None:
    r = await d.call("prompts/get", {"name": "test_input_required_result_prompt"}, caps=ALL_CAPS)
    r1 = r.result
    assert r1["resultType"] == "input_required"
    assert r1["inputRequests"]["user_context"]["params"]["message"] == "What context should the prompt use?"
    r2 = await d.call(
        "prompts/get",
        {
            "name": "test_input_required_result_prompt",
            "requestState": r1["requestState"],
            "inputResponses": {"user_context": {"action": "accept", "content": {"context": "docs"}}},
        },
        caps=ALL_CAPS,
    )
    assert r2.result["messages"] == [{"role": "user", "content": {"type": "text", "text": "Context: docs"}}]


# --------------------------------------------------------------------------- prompts, resources, completion
async def test_prompts(d: Driver) -> None:
    listed = (await d.call("prompts/list")).result
    by = {p["name"]: p for p in listed["prompts"]}
    assert by["test_prompt_with_arguments"]["arguments"] == [
        {"name": "arg1", "required": True},
        {"name": "arg2", "required": True},
    ]
    assert all(p.get("description") for p in listed["prompts"])
    assert (listed["ttlMs"], listed["cacheScope"]) == (60_000, "public")
    simple = (await d.call("prompts/get", {"name": "test_simple_prompt"})).result
    assert simple["messages"] == [
        {"role": "user", "content": {"type": "text", "text": "This is a simple prompt for testing."}}
    ]
    args = (
        await d.call(
            "prompts/get",
            {"name": "test_prompt_with_arguments", "arguments": {"arg1": "hello", "arg2": "world"}},
        )
    ).result
    assert args["messages"][0]["content"]["text"] == "Prompt with arguments: arg1='hello', arg2='world'"
    emb = (
        await d.call(
            "prompts/get",
            {"name": "test_prompt_with_embedded_resource", "arguments": {"resourceUri": "test://x"}},
        )
    ).result
    assert emb["messages"] == [
        {
            "role": "user",
            "content": {
                "type": "resource",
                "resource": {
                    "uri": "test://x",
                    "mimeType": "text/plain",
                    "text": "Embedded resource content for testing.",
                },
            },
        },
        {"role": "user", "content": {"type": "text", "text": "Please process the embedded resource above."}},
    ]
    img = (await d.call("prompts/get", {"name": "test_prompt_with_image"})).result
    assert img["messages"] == [
        {"role": "user", "content": {"type": "image", "data": PNG, "mimeType": "image/png"}},
        {"role": "user", "content": {"type": "text", "text": "Please analyze the image above."}},
    ]
    missing = await d.call(
        "prompts/get", {"name": "test_prompt_with_arguments", "arguments": {"arg1": "a"}}, id=2
    )
    assert (missing.status, missing.error["code"]) == (400, -32602)
    assert missing.error["message"] == "Missing required prompt arguments: arg2"
    unknown = await d.call("prompts/get", {"name": "nope"})
    assert (unknown.status, unknown.error["code"]) == (400, -32602)


async def test_resources(d: Driver) -> None:
    listed = (await d.call("resources/list")).result
    assert listed["resources"] == [
        {
            "uri": "test://static-text",
            "name": "static-text",
            "description": "A static text resource for testing",
            "mimeType": "text/plain",
        },
        {
            "uri": "test://static-binary",
            "name": "static-binary",
            "description": "A static binary resource (PNG)",
            "mimeType": "image/png",
        },
        {  # the 2025-11-25 leg subscribes to it
            "uri": "test://watched-resource",
            "name": "watched-resource",
            "description": "A resource to subscribe to",
            "mimeType": "text/plain",
        },
    ]
    templates = (await d.call("resources/templates/list")).result
    assert templates["resourceTemplates"] == [
        {
            "uriTemplate": "test://template/{id}/data",
            "name": "template-data",
            "description": "A resource template with an id parameter",
            "mimeType": "application/json",
        }
    ]
    for res in (listed, templates):
        assert (
            isinstance(res["ttlMs"], int) and res["ttlMs"] >= 0 and res["cacheScope"] in ("public", "private")
        )
    text = (await d.call("resources/read", {"uri": "test://static-text"})).result
    assert text["contents"] == [
        {
            "uri": "test://static-text",
            "mimeType": "text/plain",
            "text": "This is the content of the static text resource.",
        }
    ]
    assert (text["ttlMs"], text["cacheScope"]) == (0, "public")
    blob = (await d.call("resources/read", {"uri": "test://static-binary"})).result
    assert blob["contents"] == [{"uri": "test://static-binary", "mimeType": "image/png", "blob": PNG}]
    tpl = (await d.call("resources/read", {"uri": "test://template/123/data"})).result
    assert tpl["contents"][0]["uri"] == "test://template/123/data"
    assert tpl["contents"][0]["mimeType"] == "application/json"
    assert json.loads(tpl["contents"][0]["text"]) == {
        "id": "123",
        "templateTest": True,
        "data": "Data for ID: 123",
    }
    nf = await d.call(
        "resources/read", {"uri": "test://nonexistent-resource-for-conformance-testing"}, id="nf"
    )
    assert (nf.status, nf.body["id"]) == (400, "nf")
    assert nf.error == {
        "code": -32602,
        "message": "Resource not found",
        "data": {"uri": "test://nonexistent-resource-for-conformance-testing"},
    }


async def test_completion(d: Driver) -> None:
    r = await d.call(
        "completion/complete",
        {
            "ref": {"type": "ref/prompt", "name": "test_prompt_with_arguments"},
            "argument": {"name": "arg1", "value": "par"},
        },
    )
    assert r.result["completion"] == {"values": ["paris", "park", "party"]}
    assert "ttlMs" not in r.result
    r = await d.call(
        "completion/complete",
        {
            "ref": {"type": "ref/prompt", "name": "test_prompt_with_arguments"},
            "argument": {"name": "arg2", "value": "x"},
        },
    )
    assert r.result["completion"] == {"values": []}
    bad = await d.call(
        "completion/complete",
        {"ref": {"type": "ref/prompt", "name": "nope"}, "argument": {"name": "a", "value": ""}},
    )
    assert bad.error["code"] == -32602


async def test_unsupported_methods_never_input_required(d: Driver) -> None:
    for method in ("tools/list", "prompts/list", "resources/list", "server/discover"):
        r = await d.call(method, caps=ALL_CAPS)
        assert r.result["resultType"] == "complete"
