"""A counter behind a handle in a shared SQLite file (COUNTER_DB=path), bumped by a slow tool written two
ways. `slow_bump` is broken on purpose: a plain function, which the framework runs in a worker thread that
a dropped stream cannot stop, so the bump lands after the client gave up. `slow_bump_async` awaits, so the
disconnect cancels it before the side effect. Expected finding with flows/bump_thread.yaml:
flow.bump_thread.instances (broken-stream test); flows/bump_async.yaml passes.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import time
import uuid
from typing import Any

from mcp_stateless import App, ToolError

app = App("stream-work", "1.0.0")
DELAY = 0.8


def _db() -> sqlite3.Connection:
    db = sqlite3.connect(os.environ["COUNTER_DB"], timeout=10)
    db.execute("create table if not exists counters (handle text primary key, n integer not null)")
    return db


def _bump(handle: str) -> int:
    with _db() as db:
        if db.execute("update counters set n = n + 1 where handle = ?", (handle,)).rowcount != 1:
            raise ToolError("no such counter")
        n: int = db.execute("select n from counters where handle = ?", (handle,)).fetchone()[0]
    return n


@app.tool()
def new_counter() -> dict[str, Any]:
    """A counter at zero; returns counterHandle."""
    handle = f"ctr_{uuid.uuid4().hex}"
    with _db() as db:
        db.execute("insert into counters values (?, 0)", (handle,))
    return {"counterHandle": handle}


@app.tool()
def slow_bump(counterHandle: str) -> dict[str, Any]:
    """Add one to the counter, slowly."""
    time.sleep(DELAY)
    return {"n": _bump(counterHandle)}


@app.tool()
async def slow_bump_async(counterHandle: str) -> dict[str, Any]:
    """Add one to the counter, slowly (cancellable)."""
    await asyncio.sleep(DELAY)
    return {"n": _bump(counterHandle)}


@app.tool()
def read_counter(counterHandle: str) -> dict[str, Any]:
    """The counter's value."""
    with _db() as db:
        row = db.execute("select n from counters where handle = ?", (counterHandle,)).fetchone()
    if row is None:
        raise ToolError("no such counter")
    return {"n": row[0]}
