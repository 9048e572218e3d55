"""Broken on purpose: notes behind handles in a shared SQLite file (survives instances and restarts), but
a handle is never checked against the principal that made it, so anyone holding it reads and writes.

Principals come from `Authorization: Bearer <name>` (a stand-in for OAuth). Run with NOTES_DB=path.
Expected finding: flow.notes.principal (step 9), nothing else.
"""

from __future__ import annotations

import os
import sqlite3
import uuid
from collections.abc import Mapping
from typing import Any

from mcp_stateless import App, ToolError


def bearer(headers: Mapping[str, str] | None) -> str:
    auth = (headers or {}).get("authorization", "")
    return auth[len("Bearer "):] if auth.startswith("Bearer ") else "anonymous"


app = App("unbound-handles", "1.0.0", principal=bearer)


def _db() -> sqlite3.Connection:
    db = sqlite3.connect(os.environ["NOTES_DB"], timeout=10)
    db.execute("create table if not exists notes (handle text primary key, body text not null)")
    return db


@app.tool()
def new_note(text: str) -> dict[str, Any]:
    """Start a note; returns noteHandle."""
    handle = f"note_{uuid.uuid4().hex}"
    with _db() as db:
        db.execute("insert into notes values (?, ?)", (handle, text))
    return {"noteHandle": handle}


@app.tool()
def append_note(noteHandle: str, text: str) -> dict[str, Any]:
    """Append a line to a note."""
    with _db() as db:
        row = db.execute("select body from notes where handle = ?", (noteHandle,)).fetchone()
        if row is None:
            raise ToolError("no such note")
        body = row[0] + "\n" + text
        db.execute("update notes set body = ? where handle = ?", (body, noteHandle))
    return {"lines": body.count("\n") + 1}


@app.tool()
def read_note(noteHandle: str) -> dict[str, Any]:
    """Read a note."""
    with _db() as db:
        row = db.execute("select body from notes where handle = ?", (noteHandle,)).fetchone()
    if row is None:
        raise ToolError("no such note")
    return {"text": row[0]}
