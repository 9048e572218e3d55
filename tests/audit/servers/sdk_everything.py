"""An everything-style server on the official Python SDK (mcp 2.3.0), written the way the SDK's examples
are: tools (echo, add, a long-running one with progress, an MRTR question), a prompt, a static resource, a
resource template, and `test_trigger_tool_change`, which announces tools/list_changed to listen streams.

Not broken on purpose: the audit of three instances should find only what the SDK itself does not do
across processes (its change notifications reach the listen streams of the process that sent them).

    <mcp venv python> sdk_everything.py PORT
"""

import sys

import mcp_types as t
from mcp.server.mcpserver import Context, MCPServer

app = MCPServer("sdk-everything")


@app.tool()
def echo(message: str) -> str:
    """Echo the message back."""
    return message


@app.tool()
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@app.tool()
async def long_running_operation(ctx: Context, steps: int = 3) -> str:
    """Report progress for a few steps, then finish."""
    for i in range(steps):
        await ctx.report_progress(i + 1, steps)
    return f"done after {steps} steps"


@app.tool()
def ask_name(ctx: Context) -> t.CallToolResult | t.InputRequiredResult:
    """Ask the user's name (an input_required round), then greet."""
    got = (ctx.input_responses or {}).get("name")
    if got is not None:
        content = getattr(got, "content", None) or {}
        return t.CallToolResult(content=[t.TextContent(type="text", text=f"Hello, {content.get('name')}!")])
    schema = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
    return t.InputRequiredResult(input_requests={"name": t.ElicitRequest(
        method="elicitation/create", params=t.ElicitRequestFormParams(message="What is your name?",
                                                                      requested_schema=schema))})


@app.tool()
async def test_trigger_tool_change(ctx: Context) -> str:
    """Announce that the tool list changed (the list itself stays as it is)."""
    await ctx.notify_tools_changed()
    return "announced"


@app.prompt()
def simple_prompt(topic: str = "MCP") -> str:
    """A prompt with one optional argument."""
    return f"Tell me about {topic}."


@app.resource("test://static/hello", description="A static text")
def hello() -> str:
    return "hello from the everything server"


@app.resource("test://items/{item_id}", description="One item by id")
def item(item_id: str) -> str:
    return f"item {item_id}"


if __name__ == "__main__":
    app.run("streamable-http", host="127.0.0.1", port=int(sys.argv[1]))
