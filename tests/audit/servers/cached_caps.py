"""Broken on purpose: client capabilities remembered per process ("the client said it can elicit").

A port from 2025 code that captured capabilities at initialize: each request's capabilities are merged
into a process-wide cache and a request that declares none borrows them. Audited over stdio the finding is
stateless.capabilities (step 1), nothing else.
"""

from __future__ import annotations

from typing import Any

from mcp_stateless import App, Context

app = App("cached-caps", "1.0.0")
SEEN: dict[str, Any] = {}


@app.tool()
def features(ctx: Context) -> dict[str, Any]:
    """Which client features this server will use for you."""
    SEEN.update(ctx.client_capabilities)
    return {"elicitation": "elicitation" in SEEN, "sampling": "sampling" in SEEN}
