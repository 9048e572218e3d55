"""Broken on purpose, on fastmcp 4.1.6: a feature-flag tool that reveals another tool by adding it to the
server object at runtime, the way fastmcp apps unlock tools "after login" — in the memory of whichever
process served the call.

Behind a balancer the tool list now depends on which instance a request reaches and on what was called
there before. Expected finding: stateless.history (balancer test), nothing else.

    <fastmcp venv python> fastmcp_unlock_tools.py PORT
"""

import sys

from fastmcp import FastMCP

mcp = FastMCP("fastmcp-unlock-tools")


@mcp.tool
def ping() -> str:
    """Answer pong."""
    return "pong"


def export_report() -> str:
    """Export the report (revealed by enable_reports)."""
    return "report.csv"


@mcp.tool
async def enable_reports() -> str:
    """Reveal export_report."""
    if "export_report" not in {t.name for t in await mcp.list_tools()}:
        mcp.add_tool(export_report)
    return "reports enabled"


if __name__ == "__main__":
    mcp.run("http", host="127.0.0.1", port=int(sys.argv[1]), path="/mcp", show_banner=False)
