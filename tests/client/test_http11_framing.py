"""http11_framing: the response head and the body decoder, bytes in and body out, no sockets. Every body is
fed split at every possible place, so a decoder that assumed a whole chunk (or a whole CRLF) per feed fails."""

from __future__ import annotations

import pytest

from mcp_stateless.client.http11_framing import BodyDecoder, FramingError, parse_head

HEAD = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nSet-Cookie: a=1\r\nset-cookie: b=2\r\n"
        b"Mcp-Session-Id:  Ab-9 \r\nTransfer-Encoding: chunked\r\n\r\n")


def test_a_head_gives_lower_case_names_exact_values_and_joins_repeated_fields() -> None:
    head = parse_head(HEAD, "POST")
    assert (head.status, head.reason, head.keep_alive, head.chunked, head.length) == (200, "OK", True, True, None)
    assert head.headers == {"content-type": "text/event-stream", "set-cookie": "a=1, b=2",
                            "mcp-session-id": "Ab-9", "transfer-encoding": "chunked"}


@pytest.mark.parametrize(("raw", "method", "keep_alive", "length"), [
    (b"HTTP/1.0 200 OK\r\nContent-Length: 3\r\n\r\n", "GET", False, 3),
    (b"HTTP/1.1 200 OK\r\nConnection: Close\r\nContent-Length: 3\r\n\r\n", "GET", False, 3),
    (b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\n", "HEAD", True, 0),
    (b"HTTP/1.1 204 No Content\r\n\r\n", "POST", True, 0),
    (b"HTTP/1.1 202 Accepted\r\n\r\n", "POST", True, None),  # no length: to the connection's end
])
def test_keep_alive_and_the_body_length_follow_the_version_the_method_and_the_status(
        raw: bytes, method: str, keep_alive: bool, length: int | None) -> None:
    head = parse_head(raw, method)
    assert (head.keep_alive, head.length) == (keep_alive, length)


@pytest.mark.parametrize(("raw", "message"), [
    (b"HTTP/2 200 OK\r\n\r\n", "malformed HTTP status line: 'HTTP/2 200 OK'"),
    (b"HTTP/1.1 2x0 OK\r\n\r\n", "malformed HTTP status line: 'HTTP/1.1 2x0 OK'"),
    (b"HTTP/1.1\r\n\r\n", "malformed HTTP status line: 'HTTP/1.1'"),
    (b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", "malformed Content-Length: '-1'"),
])
def test_a_malformed_head_is_refused_with_what_is_wrong(raw: bytes, message: str) -> None:
    with pytest.raises(FramingError) as e:
        parse_head(raw, "GET")
    assert str(e.value) == message


def _decode_split(framed: bytes, at: int, length: int | None = None, chunked: bool = True) -> tuple[bytes, bytes, bool]:
    """Feed `framed` in two parts cut at `at`: (the body, what is left unconsumed, done)."""
    d = BodyDecoder(length, chunked)
    buf, out = bytearray(), bytearray()
    for part in (framed[:at], framed[at:]):
        buf += part
        d.feed(buf, out)
    return bytes(out), bytes(buf), d.done


CHUNKED = b"5;ext=1\r\nhello\r\n1\r\n \r\n6\r\nworld!\r\n0\r\nTrailer: x\r\n\r\n"


@pytest.mark.parametrize("at", range(len(CHUNKED) + 1))
def test_a_chunked_body_split_anywhere_decodes_whole_with_its_trailers_consumed(at: int) -> None:
    assert _decode_split(CHUNKED, at) == (b"hello world!", b"", True)


def test_bytes_after_a_body_stay_unconsumed_and_nothing_after_done_is_read() -> None:
    assert _decode_split(b"2\r\nok\r\n0\r\n\r\nHTTP/1.1", 3) == (b"ok", b"HTTP/1.1", True)
    assert _decode_split(b"abcdef", 2, length=4, chunked=False) == (b"abcd", b"ef", True)


def test_a_body_without_its_end_is_not_done() -> None:
    assert _decode_split(b"5\r\nhello\r\n", 4) == (b"hello", b"", False)
    assert _decode_split(b"abc", 1, length=4, chunked=False) == (b"abc", b"", False)
    assert BodyDecoder(0, False).done


def test_a_body_to_the_connection_end_is_done_at_its_end_only() -> None:
    d = BodyDecoder(None, False)
    buf, out = bytearray(b"any\r\n0\r\n\r\nbytes"), bytearray()
    d.feed(buf, out)
    assert (bytes(out), bytes(buf), d.done, d.until_close) == (b"any\r\n0\r\n\r\nbytes", b"", False, True)
    assert d.eof() and d.done
    chunked = BodyDecoder(None, True)
    assert not chunked.eof() and not chunked.done  # a chunked body cut by the connection's end is incomplete


@pytest.mark.parametrize(("framed", "message"), [
    (b"5\r\nhelloXY0\r\n\r\n", "no CRLF after a chunk"),
    (b"-5\r\nhello\r\n", "negative chunk size -5"),
    (b"zz\r\n", "bad chunk size b'zz'"),
    (b"\r\n", "bad chunk size b''"),
    (b"1" * 5000, "a chunk-size line longer than 4 KiB"),
    (b"0\r\n" + b"x" * 5000, "a trailer line longer than 4 KiB"),
])
def test_a_malformed_chunked_body_is_refused_with_what_is_wrong(framed: bytes, message: str) -> None:
    d = BodyDecoder(None, True)
    with pytest.raises(FramingError) as e:
        d.feed(bytearray(framed), bytearray())
    assert str(e.value) == message


def test_a_chunk_size_line_just_under_the_bound_waits_for_its_end() -> None:
    d = BodyDecoder(None, True)
    buf = bytearray(b"0" * 4000)
    d.feed(buf, bytearray())
    assert len(buf) == 4000 and not d.done
