"""`BoundedOutbox` and `LineOutbox` rule by rule, with exact message lists: which progress is replaced,
what is dropped and reported, what is never dropped, and when a line outbox writes. (The same flood across
every transport is tests/transports/test_outbox_flood.py.)"""

from __future__ import annotations

import asyncio
from typing import Any

from mcp_stateless.protocol.outbox import COALESCE_AT, MAX_PENDING, BoundedOutbox, LineOutbox, dropped_notice


def progress(n: int) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": "t", "progress": n}}


def log(n: int) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": n}}


def test_a_progress_at_the_head_is_replaced_once_the_coalescing_bound_is_reached() -> None:
    box = BoundedOutbox()
    box.emit(progress(1))  # index 0
    for i in range(COALESCE_AT - 1):
        box.emit(log(i))
    box.emit(progress(2))  # 32 wait: replaces the one at index 0
    assert box.pending == [progress(2), *(log(i) for i in range(COALESCE_AT - 1))]


def test_taking_forgets_where_the_last_progress_was() -> None:
    box = BoundedOutbox()
    box.emit(log(-1))
    box.emit(progress(1))  # index 1
    assert box.take() == [log(-1), progress(1)]
    for i in range(COALESCE_AT):
        box.emit(log(i))
    box.emit(progress(2))  # no progress waits now: appended, nothing replaced
    assert box.pending == [*(log(i) for i in range(COALESCE_AT)), progress(2)]


def test_a_request_is_kept_beyond_the_bound_and_notifications_are_dropped_and_reported_once() -> None:
    box = BoundedOutbox()
    for i in range(MAX_PENDING + 3):
        box.emit(log(i))
    ask = {"jsonrpc": "2.0", "id": 7, "method": "elicitation/create", "params": {}}
    box.emit(ask)
    assert box.take() == [*(log(i) for i in range(MAX_PENDING)), ask, dropped_notice(3)]
    for i in range(MAX_PENDING + 1):
        box.emit(log(i))
    assert box.take()[-1] == dropped_notice(1)  # counted afresh after a report
    assert box.take() == []


def test_the_writer_is_woken_for_each_message_kept() -> None:
    woken: list[int] = []
    box = BoundedOutbox(on_emit=lambda: woken.append(len(box.pending)))
    box.emit(log(0))
    box.emit(log(1))
    assert woken == [1, 2]
    off = BoundedOutbox(enabled=False, on_emit=lambda: woken.append(-1))
    off.emit(log(0))
    assert off.pending == [] and woken == [1, 2]


async def test_a_line_outbox_writes_a_burst_once_on_the_next_loop_turn() -> None:
    written: list[dict[str, Any]] = []
    box = LineOutbox(written.append)
    for i in range(3):
        box.emit(log(i))
    assert written == []  # nothing within the burst
    await asyncio.sleep(0)
    assert written == [log(0), log(1), log(2)]
    box.emit(log(3))
    await asyncio.sleep(0)
    assert written[-1] == log(3) and len(written) == 4



async def test_a_line_outbox_asks_hold_with_itself_only_when_something_waits() -> None:
    asked: list[object] = []
    written: list[dict[str, Any]] = []
    box = LineOutbox(written.append, hold=lambda b: asked.append(b) or False)
    box.flush()  # nothing waits: the output is not even asked
    assert asked == []
    box.emit(log(0))
    await asyncio.sleep(0)
    assert asked == [box] and written == [log(0)]


async def test_a_closed_line_outbox_writes_and_keeps_nothing() -> None:
    written: list[dict[str, Any]] = []
    box = LineOutbox(written.append)
    box.emit(log(0))
    box.close()
    box.emit(log(1))
    await asyncio.sleep(0)
    box.flush(force=True)
    assert written == [] and box.pending == []
