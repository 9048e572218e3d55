"""A stdio app whose `crash_once` tool kills its own process the first time (for the client's restart tests).

Serve it with `mcp-stateless serve tests/apps/crash_app.py:app --stdio`.
"""

from __future__ import annotations

import os
from pathlib import Path

from mcp_stateless import App

app = App("crash-test", "0.1.0")


@app.tool()
def crash_once(marker: str) -> str:
    """First call: write this process id to `marker` and exit the process mid-request. Later calls: answer."""
    path = Path(marker)
    if not path.exists():
        path.write_text(str(os.getpid()))
        os._exit(17)  # no response, no cleanup: the server is gone while the request is in flight
    return f"answered by {os.getpid()} after {path.read_text()} crashed"


@app.tool()
def pid() -> int:
    """This server process's id."""
    return os.getpid()
