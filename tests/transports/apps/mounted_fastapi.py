"""An `App` mounted in FastAPI with `App.asgi()` (nothing else configured), as a team that adds MCP to its
API writes it; run by uvicorn in a subprocess (tests/transports/test_mounted_assembly.py).

    python -m uvicorn --app-dir tests/transports/apps mounted_fastapi:api --port 8000
"""

from __future__ import annotations

from fastapi import FastAPI

from mcp_stateless import App

notes = App("mounted-notes", "1.0.0")


@notes.tool()
async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


mcp = notes.asgi()
api = FastAPI(lifespan=mcp.lifespan)
api.add_route("/mcp", mcp)
api.mount("/mcp", mcp)


@api.get("/hello")
async def hello() -> dict[str, str]:
    return {"message": "a plain FastAPI route"}
