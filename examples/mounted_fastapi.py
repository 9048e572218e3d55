"""An MCP app inside a FastAPI application, next to its own routes.

    .venv/bin/uvicorn --app-dir examples mounted_fastapi:api --port 8000     # runs in the foreground

MCP endpoint: http://127.0.0.1:8000/mcp (and /mcp/); the FastAPI route: http://127.0.0.1:8000/hello.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from mcp_stateless import App, Context


@asynccontextmanager
async def lifespan(app: App) -> AsyncIterator[dict[str, str]]:
    # Open what every request shares once per process (a database pool, a model); close it on shutdown.
    yield {"greeting": "Hello"}


notes = App("notes", "1.0.0", lifespan=lifespan)


@notes.tool()
def greet(ctx: Context, name: str) -> str:
    """Greet someone with the greeting the lifespan opened."""
    return f"{ctx.lifespan['greeting']}, {name}!"


mcp = notes.asgi()
api = FastAPI(lifespan=mcp.lifespan)  # the MCP app starts and stops with the FastAPI app
api.add_route("/mcp", mcp)  # the exact path ...
api.mount("/mcp", mcp)  # ... and the mount (for /mcp/): neither redirects


@api.get("/hello")
async def hello() -> dict[str, str]:
    return {"message": "a plain FastAPI route"}
