"""`detach="manual"` through App: the handler runs inline (its MRTR question answered synchronously), and
the same run continues as the task once it awaits ctx.detach() — the tool is not run again from the top."""

from __future__ import annotations

import asyncio
from typing import Any

from mcp_stateless import App, Context, TaskRuntime
from mcp_stateless.tasks.store import MemoryTaskStore

from .test_runtime import EXT_ELICIT, FORM, call, poll


def _app() -> tuple[App, dict[str, Any]]:
    seen: dict[str, Any] = {"starts": 0, "after_detach": 0}
    app = App("detach-test", tasks=TaskRuntime(MemoryTaskStore(), poll_interval_ms=50))

    @app.tool(task="required", detach="manual")
    async def import_repo(ctx: Context) -> str:
        seen["starts"] += 1
        answer = ctx.elicit("Which repository?", FORM, key="repo")
        await ctx.detach()
        seen["after_detach"] += 1
        await asyncio.sleep(0.05)
        return f"imported ({answer.content})"

    return app, seen


async def test_a_manually_detached_handler_asks_inline_then_continues_as_the_task_without_rerunning() -> None:
    app, seen = _app()
    first = (await call(app, "tools/call", {"name": "import_repo"}, caps=EXT_ELICIT))["result"]
    assert first["resultType"] == "input_required" and list(first["inputRequests"]) == ["repo"]
    assert seen == {"starts": 1, "after_detach": 0}
    again = (await call(app, "tools/call", {
        "name": "import_repo", "requestState": first["requestState"],
        "inputResponses": {"repo": {"action": "accept", "content": {"ok": True}}}}, caps=EXT_ELICIT))["result"]
    assert again["resultType"] == "task" and again["status"] == "working"
    done = await poll(app, again["taskId"], {"completed", "failed"})
    assert done["status"] == "completed", done
    assert done["result"]["content"] == [{"type": "text", "text": "imported ({'ok': True})"}]
    assert seen == {"starts": 2, "after_detach": 1}  # the MRTR retry ran it once more; the task did not
