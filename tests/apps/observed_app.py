"""The app the observability tests serve: a plain tool, one that fails as a tool, one that asks the user
(MRTR), a task tool, a prompt and a listen-able change."""

from __future__ import annotations

from mcp_stateless import App, Context, TaskRuntime, ToolError

app = App("observed", tasks=TaskRuntime())

NAME_FORM = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


@app.tool()
async def echo(text: str) -> str:
    return text


@app.tool()
async def fail() -> str:
    raise ToolError("this tool always fails")


@app.tool()
async def ask(ctx: Context) -> str:
    answer = ctx.elicit("What is your name?", NAME_FORM, key="name")
    return f"Hello, {(answer.content or {}).get('name', '')}!"


@app.tool(task="optional")
async def job(n: int) -> int:
    return n * 2


@app.prompt()
def greet(name: str) -> str:
    return f"Say hello to {name}"
