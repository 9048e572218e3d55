"""An official Python SDK (mcp 2.3.0) server for our client's interop tests: echo, an MRTR tool, a resource,
and `toggle`, which adds or removes the `extra` tool and publishes tools/list_changed to listen streams.

    <mcp venv python> py_mcp_server.py stdio
    <mcp venv python> py_mcp_server.py http PORT
"""

import sys

import mcp_types as t
from mcp.server.mcpserver import Context, MCPServer

app = MCPServer("py-interop")


@app.tool()
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


@app.tool()
def greet(ctx: Context) -> t.CallToolResult | t.InputRequiredResult:
    """Ask the user's name (MRTR), then greet."""
    answers = ctx.input_responses or {}
    got = answers.get("name")
    if got is not None:
        content = getattr(got, "content", None) or {}
        return t.CallToolResult(content=[t.TextContent(type="text", text=f"Hello, {content.get('name')}!")])
    schema = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
    return t.InputRequiredResult(input_requests={"name": t.ElicitRequest(
        method="elicitation/create", params=t.ElicitRequestFormParams(message="What is your name?",
                                                                      requested_schema=schema))})


def extra() -> str:
    """Comes and goes."""
    return "extra"


@app.tool()
async def toggle(ctx: Context) -> str:
    """Add or remove the `extra` tool, then notify subscriptions/listen streams."""
    if any(tool.name == "extra" for tool in await app.list_tools()):
        app.remove_tool("extra")
        state = "removed"
    else:
        app.add_tool(extra, name="extra")
        state = "added"
    await ctx.notify_tools_changed()
    return state


@app.resource("test://hello", description="A static text")
def hello() -> str:
    return "hello from python"


if __name__ == "__main__":
    if sys.argv[1] == "stdio":
        app.run("stdio")
    else:
        app.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
