"""Broken on purpose: MRTR sealed with a key each process makes up at start.

The team wrote a correct MRTR tool but deploys every instance with `mcp-stateless serve` and no shared
`MCP_STATELESS_KEYS`, so `requestState` minted by one instance fails verification on another and after a
restart. Expected findings: mrtr.instances and mrtr.restart (step 5 / restart test), nothing else.
"""

from __future__ import annotations

from mcp_stateless import App, Context

app = App("mrtr-process-key", "1.0.0")


@app.tool()
def delete_everything(ctx: Context) -> str:
    """Asks for confirmation first (MRTR), then pretends to delete."""
    answer = ctx.elicit("Really delete everything?", {"type": "object", "properties": {
        "confirm": {"type": "boolean"}}, "required": ["confirm"]})
    return "deleted" if answer.accepted and answer.content.get("confirm") else "kept"


@app.tool()
def status() -> str:
    """Always fine."""
    return "ok"
