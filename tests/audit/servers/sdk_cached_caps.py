"""Broken on purpose, on the official Python SDK (mcp 2.3.0) over stdio: the client's capabilities kept
for the process once a request declared them (the 2025 habit of reading them at initialize), so a later
request that declares none is served as if it had. Expected finding: stateless.capabilities, nothing else.

    <mcp venv python> sdk_cached_caps.py
"""

from typing import Any

from mcp.server.mcpserver import Context, MCPServer

app = MCPServer("sdk-cached-caps")
CLIENT_CAN: dict[str, bool] = {}


@app.tool()
def features(ctx: Context) -> dict[str, Any]:
    """Which client features this server will use for you."""
    caps = ctx.client_capabilities
    if caps is not None:
        for name in ("elicitation", "sampling", "roots"):
            if getattr(caps, name, None) is not None:
                CLIENT_CAN[name] = True
    return {"elicitation": CLIENT_CAN.get("elicitation", False), "sampling": CLIENT_CAN.get("sampling", False)}


if __name__ == "__main__":
    app.run("stdio")
