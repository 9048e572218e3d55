"""A 2025-only server on the official Python SDK 1.x (mcp 1.30.0, FastMCP over Streamable HTTP) with a counter
kept in one of three places, for the audit's legacy profile:

- `session`: per 2025 session (a map keyed by the session object), the 2025 way: broken on purpose.
  Expected: legacy.sessions, legacy.results ("kept by the session") and legacy.restart fail.
- `process`: in the process's memory (a module global), with a resource named after the process id:
  broken on purpose. Expected: legacy.sessions, legacy.history (resources/list "differs by instance before
  any call"), legacy.results ("kept by the process", and changed by a restart) and legacy.restart fail.
- `shared`: in a SQLite file every instance opens, served without sessions (`stateless_http=True`): the
  clean counterpart. Expected: every legacy check passes (only `era` fails: it is 2025-only).

    <mcp 1.30.0 venv python> legacy_counters.py MODE PORT [DB]
"""

import os
import sqlite3
import sys

from mcp.server.fastmcp import Context, FastMCP
from mcp.types import ToolAnnotations

mode, port = sys.argv[1], int(sys.argv[2])
db = sys.argv[3] if len(sys.argv) > 3 else ""
app = FastMCP(f"legacy-counters-{mode}", host="127.0.0.1", port=port, stateless_http=mode == "shared",
              json_response=mode == "shared")
BY_SESSION: dict[int, int] = {}
TOTAL = 0


def _shared(add: int) -> int:
    with sqlite3.connect(db) as con:
        con.execute("CREATE TABLE IF NOT EXISTS counter (n INTEGER NOT NULL)")
        if con.execute("SELECT count(*) FROM counter").fetchone()[0] == 0:
            con.execute("INSERT INTO counter VALUES (0)")
        con.execute("UPDATE counter SET n = n + ?", (add,))
        value: int = con.execute("SELECT n FROM counter").fetchone()[0]
        return value


@app.tool()
def bump(ctx: Context) -> str:  # type: ignore[type-arg]
    """Add one to the counter."""
    global TOTAL
    if mode == "session":
        BY_SESSION[id(ctx.session)] = BY_SESSION.get(id(ctx.session), 0) + 1
        return str(BY_SESSION[id(ctx.session)])
    if mode == "process":
        TOTAL += 1
        return str(TOTAL)
    return str(_shared(1))


@app.tool(annotations=ToolAnnotations(readOnlyHint=True))
def count(ctx: Context) -> str:  # type: ignore[type-arg]
    """The counter."""
    if mode == "session":
        return str(BY_SESSION.get(id(ctx.session), 0))
    if mode == "process":
        return str(TOTAL)
    return str(_shared(0))


if mode == "process":
    @app.resource(f"counter://process-{os.getpid()}")
    def this_process() -> str:
        """The process that serves the counter."""
        return str(os.getpid())


if __name__ == "__main__":
    app.run("streamable-http")
