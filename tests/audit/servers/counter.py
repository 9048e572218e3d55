"""A counter, bumped by `bump` and read by `count` (annotated readOnlyHint: true, unless COUNTER_READONLY=0).
Broken on purpose without COUNTER_DB: the counter is a module global, so each process counts its own calls and a
restart forgets them, which only the tools' results show (every list, envelope and round is fine). With
COUNTER_DB=path the counter lives in that SQLite file, which every instance shares and which outlives them: the
clean counterpart. Expected finding without it: results.read-tools (step 4).
"""

from __future__ import annotations

import os
import sqlite3
from typing import Any

from mcp_stateless import App

app = App("counter", "1.0.0")
DB = os.environ.get("COUNTER_DB")
READONLY = {"readOnlyHint": True} if os.environ.get("COUNTER_READONLY", "1") == "1" else None
_n = 0


def _db() -> sqlite3.Connection:
    assert DB is not None
    db = sqlite3.connect(DB, timeout=10)
    db.execute("create table if not exists counter (id integer primary key check (id = 1), n integer not null)")
    db.execute("insert or ignore into counter values (1, 0)")
    return db


@app.tool()
def bump() -> dict[str, Any]:
    """Adds one to the counter."""
    global _n
    if DB is None:
        _n += 1
        return {"n": _n}
    with _db() as db:
        db.execute("update counter set n = n + 1")
        return {"n": db.execute("select n from counter").fetchone()[0]}


@app.tool(annotations=READONLY)
def count() -> dict[str, Any]:
    """The counter's value."""
    if DB is None:
        return {"n": _n}
    with _db() as db:
        return {"n": db.execute("select n from counter").fetchone()[0]}
