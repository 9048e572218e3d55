"""Broken on purpose: durable-looking tasks whose records live in each process's memory.

Every instance runs `mcp-stateless serve … --state memory://`, so a task created on one is unknown to the
others and gone after a restart. Expected findings: tasks.instances (step 8) and tasks.restart.
"""

from __future__ import annotations

import asyncio

from mcp_stateless import App, TaskRuntime

app = App("tasks-memory", "1.0.0", tasks=TaskRuntime())


@app.tool(task="required")
async def build_report() -> str:
    """Build the monthly report (a task: about a second)."""
    await asyncio.sleep(1.0)
    return "report ready"
