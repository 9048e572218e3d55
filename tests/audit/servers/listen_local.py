"""Broken on purpose: change events published on an in-process bus.

Each instance runs `mcp-stateless serve … --state memory://`, so `notify_tools_changed` reaches only the
listen streams held by the instance that made the change. Expected finding: listen.fan-out (step 6).
"""

from __future__ import annotations

from mcp_stateless import App

app = App("listen-local", "1.0.0")


@app.tool()
async def publish_catalog() -> str:
    """Announce that the catalog changed (to every listening client, supposedly)."""
    await app.notify_tools_changed()
    return "published"
