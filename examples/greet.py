"""An MRTR elicitation: `greet` asks the user's name; the client answers and retries, on any instance."""

from mcp_stateless import App, Context

app = App("greet", "1.0.0")


@app.tool()
def greet(ctx: Context) -> str:
    """Ask the user's name, then greet them."""
    answer = ctx.elicit("What is your name?", {"type": "object", "properties": {"name": {"type": "string"}},
                                               "required": ["name"]}, key="name")
    return f"Hello, {answer.content['name']}!" if answer.accepted and answer.content else "Hello, stranger!"
