"""Every fixture the official conformance suite (@modelcontextprotocol/conformance) looks up at 2026-07-28.

Serve it with `mcp-stateless serve examples/conformance_server.py:app --http 127.0.0.1:3001`.
Names and outputs follow the suite's fixture list exactly; the first tool is argument-free on purpose
(the header-validation scenario calls the first listed tool with `{}`).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncGenerator
from typing import Any

from mcp_stateless import (
    App,
    Context,
    McpError,
    Prompt,
    TaskRuntime,
    Tool,
    ToolError,
    content,
    elicitation,
    roots,
    sampling,
)
from mcp_stateless.endpoint import Call, Handler, ListenItem, Lister, Reply, Request
from mcp_stateless.state import MemoryRecords, RecordStore

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
WAV = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA="

# Tasks live in the app's state: SQLite by default under `mcp-stateless serve`, or `--state redis://…`.
app = App("mcp-stateless-conformance", "0.1.0", instructions="Fixtures for the MCP conformance suite.",
          tasks=TaskRuntime())

NAME_FORM = {"type": "object", "properties": {"name": {"type": "string", "description": "Your name"}},
             "required": ["name"]}


# --------------------------------------------------------------------------- tools
@app.tool()
def test_simple_text() -> str:
    """Tests simple text content response"""
    return "This is a simple text response for testing."


@app.tool()
def test_image_content() -> content.ContentBlock:
    """Tests image content response"""
    return content.image(PNG, "image/png")


@app.tool()
def test_audio_content() -> content.ContentBlock:
    """Tests audio content response"""
    return content.audio(WAV, "audio/wav")


@app.tool()
def test_embedded_resource() -> content.ContentBlock:
    """Tests embedded resource content response"""
    return content.embedded_resource(
        "test://embedded-resource", text="This is an embedded resource content.", mime_type="text/plain"
    )


@app.tool()
def test_multiple_content_types() -> list[content.ContentBlock]:
    """Tests response with multiple content types (text, image, resource)"""
    return [
        content.text("Multiple content types test:"),
        content.image(PNG, "image/png"),
        content.embedded_resource(
            "test://mixed-content-resource", text=json.dumps({"test": "data", "value": 123},
                                                            separators=(",", ":")),
            mime_type="application/json",
        ),
    ]


@app.tool()
async def test_tool_with_progress(ctx: Context) -> str:
    """Tests tool that reports progress notifications"""
    for step in (0, 50, 100):
        ctx.report_progress(step, 100, f"Completed step {step // 50 + 1} of 3")
        if step < 100:
            await asyncio.sleep(0.05)
    return "Progress test completed"


@app.tool()
def test_error_handling() -> Any:
    """Tests error response handling"""
    from mcp_stateless import ToolError

    raise ToolError("This tool intentionally returns an error for testing")


@app.tool()
def test_missing_capability(ctx: Context) -> str:
    """Needs the client's sampling capability (declared on this request), else -32021"""
    ctx.require_capability({"sampling": {}})
    return "The client declared the sampling capability."


@app.tool()
async def test_streaming_elicitation(ctx: Context) -> str:
    """Streams a progress notification and then the result; never sends a server-to-client request"""
    ctx.report_progress(1, 2, "working")
    ctx.log("info", "streaming elicitation fixture is running")
    await asyncio.sleep(0.05)
    ctx.report_progress(2, 2, "done")
    return "Streaming completed without server-to-client requests."


@app.tool()
async def test_logging_tool(ctx: Context) -> str:
    """Emits log notifications only when the request's _meta asked for a logLevel"""
    ctx.log("info", "Tool execution started")
    await asyncio.sleep(0.02)
    ctx.log("info", "Tool processing data")
    ctx.log("info", "Tool execution completed")
    return "Logging test completed"


# ------------------------------------------------------- the fixtures that come and go, in shared state
# Whether test_dynamic_tool / test_dynamic_prompt exist is a record in the app's state store (the one
# `--state` selects), not a fact about the process that served the trigger: every instance behind a
# balancer lists, calls and gets the same set. Each instance brings its own catalog in line with the
# record before a request that reads a list, silently (the instance that made the change announced it
# once, on the shared bus).
DYNAMIC_NS, DYNAMIC_KEY = "conformance-fixtures", "dynamic"
DYNAMIC_TOOL = "test_dynamic_tool"
DYNAMIC_PROMPT = "test_dynamic_prompt"
SWAP_ATTEMPTS = 20
_unserved_records = MemoryRecords()  # an app driven without a state bundle (in-process tests)


def _dynamic_tool() -> str:
    """A tool that comes and goes"""
    return "dynamic"


_DYNAMIC = {
    DYNAMIC_TOOL: Tool.build(_dynamic_tool, name=DYNAMIC_TOOL),
    DYNAMIC_PROMPT: Prompt.build(lambda: "A prompt that comes and goes.", name=DYNAMIC_PROMPT,
                                 description="A prompt that comes and goes"),
}


def _records() -> RecordStore:
    return app.state.records if app.state is not None else _unserved_records


async def _present() -> tuple[set[str], int | None]:
    got = await _records().get(DYNAMIC_NS, DYNAMIC_KEY)
    return (set(json.loads(got.data)), got.version) if got is not None else (set(), None)


def _align(present: set[str]) -> None:
    catalog = app.catalog
    for name, item in _DYNAMIC.items():
        table: dict[str, Any] = catalog.tools if isinstance(item, Tool) else catalog.prompts
        if name in present and name not in table:
            table[name] = item
        elif name not in present:
            table.pop(name, None)


async def _toggle(name: str) -> None:
    for _ in range(SWAP_ATTEMPTS):  # compare-and-swap: two instances toggling at once both count
        present, version = await _present()
        present ^= {name}
        data = json.dumps(sorted(present)).encode()
        done = (await _records().create(DYNAMIC_NS, DYNAMIC_KEY, data) if version is None
                else await _records().swap(DYNAMIC_NS, DYNAMIC_KEY, version, data))
        if done:
            _align(present)
            return
    raise ToolError(f"{name} could not be toggled: the shared record kept changing")


class SharedFixtures:
    """Request middleware: the catalog matches the shared record before anything reads it."""

    READS = frozenset({"tools/list", "tools/call", "prompts/list", "prompts/get"})

    async def handle(self, req: Request, call: Call, call_next: Handler) -> Reply:
        if req.method in self.READS:
            _align((await _present())[0])
        return await call_next(req, call)

    def listen(self, req: Request, call: Call, call_next: Lister) -> AsyncGenerator[ListenItem, None]:
        return call_next(req, call)


app.add_request_middleware(SharedFixtures())


@app.tool()
async def test_trigger_tool_change() -> str:
    """Adds or removes test_dynamic_tool and notifies listen streams (notifications/tools/list_changed)"""
    await _toggle(DYNAMIC_TOOL)
    await app.notify_tools_changed()
    return "Tool list changed."


@app.tool()
async def test_trigger_prompt_change() -> str:
    """Adds or removes test_dynamic_prompt and notifies listen streams (notifications/prompts/list_changed)"""
    await _toggle(DYNAMIC_PROMPT)
    await app.notify_prompts_changed()
    return "Prompt list changed."


@app.tool(
    description="Tool with JSON Schema 2020-12 features",
    input_schema={
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "$defs": {
            "address": {
                "$anchor": "addressDef",
                "type": "object",
                "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
            }
        },
        "properties": {
            "name": {"type": "string"},
            "address": {"$ref": "#/$defs/address"},
            "contactMethod": {"type": "string", "enum": ["phone", "email"]},
            "phone": {"type": "string"},
            "email": {"type": "string"},
        },
        "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
        "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
        "then": {"required": ["phone"]},
        "else": {"required": ["email"]},
        "additionalProperties": False,
    },
)
def json_schema_2020_12_tool(**arguments: Any) -> str:
    return "Received: " + json.dumps(arguments, sort_keys=True)


@app.tool(
    description="Echoes the region, which is mirrored in the Mcp-Param-Region header",
    input_schema={
        "type": "object",
        "properties": {"region": {"type": "string", "x-mcp-header": "Region", "description": "A region name"}},
        "required": ["region"],
    },
)
def test_x_mcp_header(region: str) -> str:
    return f"Region: {region}"


# --------------------------------------------------------------------------- MRTR tools
@app.tool()
def test_input_required_result_elicitation(ctx: Context) -> str:
    """Asks the user's name through MRTR elicitation"""
    answer = ctx.elicit("What is your name?", NAME_FORM, key="user_name")
    if not answer.accepted:
        return f"Elicitation was {answer.action}."
    return f"Hello, {(answer.content or {}).get('name', '')}!"


@app.tool()
def test_input_required_result_sampling(ctx: Context) -> str:
    """Asks the client to sample an answer through MRTR"""
    got = ctx.sample("What is the capital of France?", 100, key="capital_question")
    c = got.get("content")
    text = c.get("text", "") if isinstance(c, dict) else ""
    return f"Sampled: {text}"


@app.tool()
def test_input_required_result_list_roots(ctx: Context) -> str:
    """Asks the client for its roots through MRTR"""
    found = ctx.list_roots(key="client_roots")
    return "Roots: " + ", ".join(r["uri"] for r in found)


@app.tool()
def test_input_required_result_request_state(ctx: Context) -> str:
    """Confirms through MRTR, carrying opaque (sealed) requestState between rounds"""
    ctx.state.setdefault("marker", "state-ok")
    ok = ctx.elicit("Please confirm", {"type": "object", "properties": {"ok": {"type": "boolean"}},
                                       "required": ["ok"]}, key="confirm")
    return f"{ctx.state['marker']}: confirmed={bool((ok.content or {}).get('ok'))}"


@app.tool()
def test_input_required_result_multiple_inputs(ctx: Context) -> str:
    """Asks for an elicitation, a sampling and the roots in one round"""
    got = ctx.ask({
        "user_name": elicitation("What is your name?", NAME_FORM),
        "greeting": sampling("Generate a greeting", 50),
        "client_roots": roots(),
    })
    name = (got["user_name"].content or {}).get("name", "")
    greet = got["greeting"].get("content", {})
    return f"{name}: {greet.get('text', '') if isinstance(greet, dict) else ''} ({len(got['client_roots'])} roots)"


@app.tool()
def test_input_required_result_multi_round(ctx: Context) -> str:
    """Two rounds of elicitation; the first answer travels in requestState"""
    name = ctx.elicit("Step 1: What is your name?", NAME_FORM, key="step1")
    color = ctx.elicit("Step 2: What is your favorite color?",
                       {"type": "object", "properties": {"color": {"type": "string"}}, "required": ["color"]},
                       key="step2")
    return f"{(name.content or {}).get('name')} likes {(color.content or {}).get('color')}"


@app.tool()
def test_input_required_result_tampered_state(ctx: Context) -> str:
    """Round 2 must echo the HMAC-sealed requestState unchanged"""
    ok = ctx.elicit("Please confirm", {"type": "object", "properties": {"ok": {"type": "boolean"}},
                                       "required": ["ok"]}, key="confirm")
    return f"state verified, ok={bool((ok.content or {}).get('ok'))}"


@app.tool()
def test_input_required_result_capabilities(ctx: Context) -> str:
    """Asks only for what the client declared on this request"""
    wanted: dict[str, Any] = {}
    if ctx.has_capability({"elicitation": {}}):
        wanted["user_name"] = elicitation("What is your name?", NAME_FORM)
    if ctx.has_capability({"sampling": {}}):
        wanted["greeting"] = sampling("Generate a greeting", 50)
    if ctx.has_capability({"roots": {}}):
        wanted["client_roots"] = roots()
    if not wanted:
        ctx.require_capability({"elicitation": {}})
    got = ctx.ask(wanted)
    return "Received: " + ", ".join(sorted(got))


# --------------------------------------------------------------------------- prompts
@app.prompt()
def test_simple_prompt() -> str:
    """A simple prompt without arguments"""
    return "This is a simple prompt for testing."


@app.prompt()
def test_prompt_with_arguments(arg1: str, arg2: str) -> str:
    """A prompt with required arguments"""
    return f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"


@app.prompt()
def test_prompt_with_embedded_resource(resourceUri: str) -> list[dict[str, Any]]:
    """A prompt that includes an embedded resource"""
    return [
        {"role": "user", "content": content.embedded_resource(
            resourceUri, text="Embedded resource content for testing.", mime_type="text/plain")},
        {"role": "user", "content": content.text("Please process the embedded resource above.")},
    ]


@app.prompt()
def test_prompt_with_image() -> list[dict[str, Any]]:
    """A prompt that includes image content"""
    return [
        {"role": "user", "content": content.image(PNG, "image/png")},
        {"role": "user", "content": content.text("Please analyze the image above.")},
    ]


@app.prompt()
def test_input_required_result_prompt(ctx: Context) -> list[dict[str, Any]]:
    """A prompt that asks the client for context through MRTR"""
    got = ctx.elicit("What context should the prompt use?",
                     {"type": "object", "properties": {"context": {"type": "string"}}, "required": ["context"]},
                     key="user_context")
    return [{"role": "user", "content": content.text(f"Context: {(got.content or {}).get('context', '')}")}]


@app.completion(prompt="test_prompt_with_arguments")
def complete_prompt_args(argument: str, value: str, context: dict[str, str]) -> list[str]:
    options = {"arg1": ["paris", "park", "party"], "arg2": ["red", "green", "blue"]}.get(argument, [])
    return [o for o in options if o.startswith(value)]


# --------------------------------------------------------------------------- resources
@app.resource("test://static-text", name="static-text", description="A static text resource for testing",
              mime_type="text/plain")
def static_text() -> str:
    return "This is the content of the static text resource."


@app.resource("test://static-binary", name="static-binary", description="A static binary resource (PNG)",
              mime_type="image/png")
def static_binary() -> dict[str, Any]:
    return content.blob_resource("test://static-binary", PNG, "image/png")


@app.resource("test://template/{id}/data", name="template-data",
              description="A resource template with an id parameter", mime_type="application/json")
def template_data(id: str) -> str:
    return json.dumps({"id": id, "templateTest": True, "data": f"Data for ID: {id}"}, separators=(",", ":"))


# --------------------------------------------------------------------------- Tasks extension
@app.tool()
def greet(name: str) -> str:
    """Greets synchronously (never a task)"""
    return f"Hello, {name}!"


@app.tool(task="optional", retry_safe=True)
async def slow_compute(seconds: float, ctx: Context, label: str = "compute") -> str:
    """Computes for `seconds` seconds; runs as a task for clients that declare the tasks extension"""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + max(0.0, seconds)
    while loop.time() < deadline:
        await asyncio.sleep(min(0.05, deadline - loop.time()))
    return f"{label}: done after {seconds:g}s"


@app.tool(task="required")
async def failing_job() -> str:
    """Fails with a tool error after about a second (only runs as a task)"""
    await asyncio.sleep(1.0)
    raise ToolError("The job failed: simulated tool error")


@app.tool(task="optional")
async def protocol_error_job() -> str:
    """Fails with a JSON-RPC (protocol-level) error"""
    await asyncio.sleep(0.1)
    raise McpError(-32603, "Simulated protocol error in a task")


@app.tool(task="optional")
def confirm_delete(filename: str, ctx: Context) -> str:
    """Asks for confirmation (the task parks in input_required), then deletes (pretend)"""
    answer = ctx.elicit(f"Delete {filename}?", {"type": "object", "properties": {"confirm": {"type": "boolean"}},
                                                "required": ["confirm"]}, key="confirm_delete")
    confirmed = answer.accepted and bool((answer.content or {}).get("confirm"))
    return f"Deleted {filename}" if confirmed else f"Kept {filename}"


@app.tool(task="optional")
def multi_input(ctx: Context) -> str:
    """Asks two questions at once; a partial tasks/update keeps the task waiting for the other"""
    got = ctx.ask({
        "name": elicitation("What is your name?", NAME_FORM),
        "confirm": elicitation("Proceed?", {"type": "object", "properties": {"confirm": {"type": "boolean"}},
                                            "required": ["confirm"]}),
    })
    return f"name={(got['name'].content or {}).get('name')} confirm={(got['confirm'].content or {}).get('confirm')}"


@app.tool(task="required", detach="manual")
async def test_tool_with_task(ctx: Context) -> str:
    """Asks the user's name synchronously (MRTR), then continues as a task"""
    answer = ctx.elicit("What is your name?", NAME_FORM, key="user_name")
    await ctx.detach()
    await asyncio.sleep(0.2)
    return f"Hello, {(answer.content or {}).get('name', '')}! (finished as a task)"


# --------------------------------------------------------------------------- 2025-11-25 fixtures
# The same handlers serve both eras: on the legacy path `ctx.elicit` / `ctx.sample` become real
# server->client requests on the call's stream; on the modern path they are MRTR input requests.
@app.tool()
async def test_tool_with_logging(ctx: Context) -> str:
    """Sends three info log notifications during execution"""
    ctx.log("info", "Tool execution started")
    await asyncio.sleep(0.05)
    ctx.log("info", "Tool processing data")
    await asyncio.sleep(0.05)
    ctx.log("info", "Tool execution completed")
    return "Logging test completed"


@app.tool()
def test_sampling(prompt: str, ctx: Context) -> str:
    """Asks the client to sample an answer to `prompt`"""
    got = ctx.sample(prompt, 100, key="sampling")
    c = got.get("content")
    text = c.get("text", "") if isinstance(c, dict) else ""
    return f"LLM response: {text}"


@app.tool()
def test_elicitation(message: str, ctx: Context) -> str:
    """Asks the user for a username and an email"""
    answer = ctx.elicit(message, {
        "type": "object",
        "properties": {"username": {"type": "string", "description": "User's response"},
                       "email": {"type": "string", "description": "User's email address"}},
        "required": ["username", "email"]}, key="user_info")
    return f"User response: action={answer.action}, content={json.dumps(answer.content or {})}"


@app.tool()
def test_elicitation_sep1034_defaults(ctx: Context) -> str:
    """Elicits a form whose fields all carry defaults (SEP-1034)"""
    answer = ctx.elicit("Please review your details", {
        "type": "object",
        "properties": {
            "name": {"type": "string", "default": "John Doe"},
            "age": {"type": "integer", "default": 30},
            "score": {"type": "number", "default": 95.5},
            "status": {"type": "string", "enum": ["active", "inactive", "pending"], "default": "active"},
            "verified": {"type": "boolean", "default": True},
        }}, key="defaults")
    return f"Elicitation completed: action={answer.action}, content={json.dumps(answer.content or {})}"


@app.tool()
def test_elicitation_sep1330_enums(ctx: Context) -> str:
    """Elicits every enum shape (SEP-1330)"""
    answer = ctx.elicit("Please choose", {
        "type": "object",
        "properties": {
            "untitledSingle": {"type": "string", "enum": ["option1", "option2", "option3"]},
            "titledSingle": {"type": "string", "oneOf": [{"const": "value1", "title": "First Option"},
                                                         {"const": "value2", "title": "Second Option"},
                                                         {"const": "value3", "title": "Third Option"}]},
            "legacyEnum": {"type": "string", "enum": ["opt1", "opt2", "opt3"],
                           "enumNames": ["Option One", "Option Two", "Option Three"]},
            "untitledMulti": {"type": "array", "items": {"type": "string", "enum": ["option1", "option2", "option3"]}},
            "titledMulti": {"type": "array", "items": {"anyOf": [{"const": "value1", "title": "First Choice"},
                                                                 {"const": "value2", "title": "Second Choice"},
                                                                 {"const": "value3", "title": "Third Choice"}]}},
        }}, key="enums")
    return f"Elicitation completed: action={answer.action}, content={json.dumps(answer.content or {})}"


@app.resource("test://watched-resource", name="watched-resource", description="A resource to subscribe to",
              mime_type="text/plain")
def watched_resource() -> str:
    return "Watched resource content."


@app.tool()
async def test_reconnection(ctx: Context) -> str:
    """Closes its SSE stream mid-call (2025 clients resume with Last-Event-ID); a no-op elsewhere"""
    from mcp_stateless.legacy import close_stream

    close_stream(ctx)
    await asyncio.sleep(0.2)
    return "Reconnection test completed"
