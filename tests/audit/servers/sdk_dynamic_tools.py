"""Broken on purpose, on the official Python SDK (mcp 2.3.0): a tool that unlocks another one for "this
client" by registering it on the server object, i.e. in the memory of whichever process served the call.

Behind a balancer the tool list now depends on which instance a request reaches and on what was called
there before. Expected finding: stateless.history (balancer test), nothing else.

    <mcp venv python> sdk_dynamic_tools.py PORT
"""

import sys

from mcp.server.mcpserver import MCPServer

app = MCPServer("sdk-dynamic-tools")


@app.tool()
def ping() -> str:
    """Answer pong."""
    return "pong"


def export_report() -> str:
    """Export the report (unlocked by enable_reports)."""
    return "report.csv"


@app.tool()
def enable_reports() -> str:
    """Unlock export_report."""
    if not any(t.name == "export_report" for t in app._tool_manager.list_tools()):
        app.add_tool(export_report, name="export_report")
    return "reports enabled"


if __name__ == "__main__":
    app.run("streamable-http", host="127.0.0.1", port=int(sys.argv[1]))
