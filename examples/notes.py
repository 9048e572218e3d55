"""Resources and a prompt: `mcp-stateless serve examples/notes.py:app --stdio`."""

from mcp_stateless import App

app = App("notes", "1.0.0")


@app.resource("notes://today", mime_type="text/plain")
def today() -> str:
    """Today's note."""
    return "Water the plants."


@app.resource("notes://day/{date}", mime_type="text/plain")
def day(date: str) -> str:
    """The note of one day (a template: the client fills in the date)."""
    return f"Nothing noted on {date}."


@app.prompt()
def summarize(topic: str, style: str = "plain") -> str:
    """Ask for a summary of a topic."""
    return f"Summarize {topic} in a {style} style."
