"""Resources and prompts as a small app declares them, for the `resources` and `prompts` commands: a fixed
resource without a MIME type, a template, and a prompt with a required and an optional argument.

Serve it with `mcp-stateless serve tests/apps/catalog_app.py:app --stdio`.
"""

from __future__ import annotations

from mcp_stateless import App

app = App("catalog", "1.0.0")


@app.resource("notes://today", name="today")
def today() -> str:
    return "Water the plants."


@app.resource("notes://day/{date}", name="day", description="The notes of one day", mime_type="text/plain")
def day(date: str) -> str:
    return f"Nothing noted on {date}."


@app.prompt()
def summarize(topic: str, style: str = "plain") -> str:
    """Summarize a topic"""
    return f"Summarize {topic} in a {style} style."
