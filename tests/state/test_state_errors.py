"""Outages are counted where an engine sees them, not wherever the error object is built."""

from __future__ import annotations

from pathlib import Path

import pytest

from mcp_stateless.protocol.errors import INTERNAL_ERROR
from mcp_stateless.state.base import STATE_ERRORS, StateUnavailable
from mcp_stateless.state.sqlite import SqliteDatabase, SqliteRecords


def test_building_the_error_counts_nothing_and_observing_it_counts_once() -> None:
    before = dict(STATE_ERRORS)
    err = StateUnavailable("redis 127.0.0.1:1", "connection refused")
    assert dict(STATE_ERRORS) == before
    assert (err.code, err.data) == (INTERNAL_ERROR, {"retryable": True})
    assert str(err.message) == ("State store unavailable (redis 127.0.0.1:1): connection refused. "
                                "The request was not completed; retry shortly.")
    seen = StateUnavailable.observed("redis 127.0.0.1:1", "connection refused")
    assert seen.message == err.message
    assert STATE_ERRORS["redis"] == before.get("redis", 0) + 1
    StateUnavailable.observed("", "no where")
    assert STATE_ERRORS["state"] == before.get("state", 0) + 1


async def test_an_engine_failure_is_counted_under_its_engine(tmp_path: Path) -> None:
    target = tmp_path / "state.db"
    target.mkdir()  # a directory where the database file should be: sqlite cannot open it
    before = STATE_ERRORS["sqlite"]
    db = SqliteDatabase(str(target))
    try:
        with pytest.raises(StateUnavailable, match="unable to open database file"):
            await SqliteRecords(db).get("ns", "key")
    finally:
        db.close()
    assert STATE_ERRORS["sqlite"] == before + 1
