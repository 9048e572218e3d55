"""Broken on purpose: each process answers with something of its own. `PER_INSTANCE=names` registers a tool
named after the process; `PER_INSTANCE=details` keeps the names and varies only a tool's description. Both are
results (never errors) on every instance, so only a comparison of the whole answer sees the difference."""

from __future__ import annotations

import os

from mcp_stateless import App

app = App("per-instance", "1.0.0")
MODE = os.environ.get("PER_INSTANCE", "names")
PROCESS = os.getpid()


@app.tool()
def ping() -> str:
    """Answers at once."""
    return "pong"


if MODE == "names":
    @app.tool(name=f"local_{PROCESS}")
    def local() -> str:
        """Exists on this process only."""
        return "here"
else:
    @app.tool(description=f"Served by process {PROCESS}.")
    def where() -> str:
        return "here"
