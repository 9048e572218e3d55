"""The smallest useful app: `mcp-stateless serve examples/echo.py:app --http 127.0.0.1:8000`."""

from mcp_stateless import App

app = App("echo", "1.0.0", instructions="Echo text back, or add two integers.")


@app.tool()
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


@app.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b
