"""The SSE parser: what the writer emits reads back, and what other servers send (CRLF, comments, multi-line
data, events split anywhere across chunks, ids) is read the way the SSE specification says."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable

import orjson

from mcp_stateless.protocol.sse import KEEPALIVE, Event, SSEParser, decode_messages, event, iter_events, iter_messages


async def chunks(parts: Iterable[bytes]) -> AsyncIterator[bytes]:
    for p in parts:
        yield p


def test_the_writer_reads_back() -> None:
    msg = {"jsonrpc": "2.0", "id": 1, "result": {"text": "a\nb ✓"}}
    p = SSEParser()
    assert p.feed(KEEPALIVE + event(orjson.dumps(msg))) == [Event("message", orjson.dumps(msg).decode())]
    assert p.close() == []


def test_comments_and_blank_lines_dispatch_nothing() -> None:
    p = SSEParser()
    assert p.feed(b": keep-alive\n\n:another\r\n\r\n\n") == []
    assert p.close() == []


def test_multi_line_data_is_joined_with_newlines_and_one_leading_space_is_dropped() -> None:
    p = SSEParser()
    assert p.feed(b"data: {\"a\":\ndata:  1}\n\n") == [Event("message", '{"a":\n 1}')]


def test_crlf_lf_and_event_names() -> None:
    p = SSEParser()
    out = p.feed(b"event: endpoint\r\ndata: /messages?s=1\r\n\r\nevent: message\ndata: x\n\n")
    assert out == [Event("endpoint", "/messages?s=1"), Event("message", "x")]


def test_an_event_split_at_every_byte_is_the_same_event() -> None:
    raw = b"id: 7\r\nevent: message\r\ndata: {\"k\": \"\xc3\xa9\"}\r\n\r\n"
    p = SSEParser()
    got: list[Event] = []
    for i in range(len(raw)):
        got.extend(p.feed(raw[i : i + 1]))
    assert got == [Event("message", '{"k": "é"}', "7")]


def test_the_last_id_persists_and_unknown_fields_are_ignored() -> None:
    p = SSEParser()
    out = p.feed(b"id: a\ndata: 1\n\nretry: 10\nfoo: bar\ndata: 2\n\nid: b\ndata: 3\n\n")
    assert [(e.data, e.id) for e in out] == [("1", "a"), ("2", "a"), ("3", "b")]


def test_close_dispatches_an_unterminated_last_event() -> None:
    p = SSEParser()
    assert p.feed(b"data: tail") == []
    assert p.close() == [Event("message", "tail")]


def test_decode_messages() -> None:
    assert decode_messages('{"jsonrpc":"2.0","method":"m"}') == [{"jsonrpc": "2.0", "method": "m"}]
    assert decode_messages(b'[{"id":1},2,{"id":2}]') == [{"id": 1}, {"id": 2}]  # a batch: its objects
    assert decode_messages("not json") == []
    assert decode_messages("3") == []


async def test_iter_events_includes_the_unterminated_tail() -> None:
    got = [e async for e in iter_events(chunks([b"data: a\n", b"\ndata: b"]))]
    assert got == [Event("message", "a"), Event("message", "b")]


async def test_iter_messages_routes_other_events_and_skips_what_is_not_a_message() -> None:
    other: list[Event] = []
    parts = [b": hi\n\nevent: endpoint\ndata: /post\n\n", b"data: {\"id\": 1, \"res", b"ult\": {}}\n\n",
             b"data: garbage\n\nevent: message\ndata:\n\ndata: {\"id\": 2, \"result\": {}}"]
    got = [m async for m in iter_messages(chunks(parts), other=other.append)]
    assert got == [{"id": 1, "result": {}}, {"id": 2, "result": {}}]
    assert other == [Event("endpoint", "/post")]


def test_the_parser_keeps_the_last_event_id_and_the_retry_delay() -> None:
    """A priming event (an id, no data) still sets what a reconnection sends as Last-Event-ID."""
    from mcp_stateless.protocol.sse import SSEParser

    p = SSEParser()
    assert (p.last_event_id, p.retry) == (None, None)
    assert p.feed(b"id: event-2\nretry: 500\n\n") == []
    assert (p.last_event_id, p.retry) == ("event-2", 500)
    assert p.feed(b"retry: soon\nid: bad\0id\ndata: {}\n\n")[0].id == "event-2"  # both ignored (WHATWG rules)
    assert (p.last_event_id, p.retry) == ("event-2", 500)
