"""HTTP/1.1 response framing without I/O: a response head parsed from its bytes, and a body decoder fed the
bytes as they arrive (Content-Length, chunked, or up to the connection's end). http11.py owns the sockets and
feeds these from its connection's callbacks, so a response that has arrived whole is decoded in one pass."""

from __future__ import annotations

from dataclasses import dataclass

from .errors import ClientError

HEAD_MAX = 64 * 1024  # a response head larger than this is refused, not buffered
_LINE_MAX = 4096  # a chunk-size line (extensions included) or a trailer line


class FramingError(ClientError):
    """The bytes are not a well-formed HTTP/1.1 response (http11 raises it as an `HttpError`)."""


@dataclass(slots=True)
class Head:
    status: int
    reason: str
    headers: dict[str, str]  # lower-case names; repeated fields joined with ", "
    keep_alive: bool
    chunked: bool
    length: int | None  # None: the body runs to the connection's end (unless chunked)


def parse_head(raw: bytes, method: str) -> Head:
    """A status line and header fields, up to and including the blank line."""
    lines = raw.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not parts[1].isdigit():
        raise FramingError(f"malformed HTTP status line: {lines[0][:80]!r}")
    status = int(parts[1])
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if not line:
            continue
        k, _, v = line.partition(":")
        k = k.rstrip().lower()
        v = v.strip()
        headers[k] = f"{headers[k]}, {v}" if k in headers else v
    keep_alive = parts[0] != "HTTP/1.0" and "close" not in headers.get("connection", "").lower()
    chunked = "chunked" in headers.get("transfer-encoding", "").lower()
    length: int | None = None
    if not chunked and "content-length" in headers:
        value = headers["content-length"]
        if not value.isdigit():
            raise FramingError(f"malformed Content-Length: {value[:40]!r}")
        length = int(value)
    if method == "HEAD" or status in (204, 304) or 100 <= status < 200:
        length, chunked = 0, False
    return Head(status, parts[2] if len(parts) > 2 else "", headers, keep_alive, chunked, length)


_LENGTH, _SIZE, _DATA, _CRLF, _TRAILER, _TO_CLOSE = range(6)


class BodyDecoder:
    """Turns the framed body bytes into the body: `feed` moves what it can decode from `buf` to `out`,
    leaving in `buf` only a partial chunk-size line or CRLF. `done` once the body has ended; bytes after
    that end stay in `buf` (a server that sends them is not one whose connection can be reused)."""

    __slots__ = ("_left", "_state", "done")

    def __init__(self, length: int | None, chunked: bool) -> None:
        if chunked:
            self._state, self._left = _SIZE, 0
        elif length is not None:
            self._state, self._left = _LENGTH, length
        else:
            self._state, self._left = _TO_CLOSE, 0
        self.done = self._state == _LENGTH and length == 0

    @property
    def until_close(self) -> bool:
        return self._state == _TO_CLOSE

    def feed(self, buf: bytearray, out: bytearray) -> None:
        pos, n = 0, len(buf)
        try:
            while not self.done:
                state = self._state
                if state in (_DATA, _LENGTH):
                    take = min(self._left, n - pos)
                    if take:
                        out += buf[pos:pos + take]
                        pos += take
                        self._left -= take
                    if self._left:
                        break
                    if state == _LENGTH:
                        self.done = True
                    else:
                        self._state = _CRLF
                elif state == _SIZE:
                    nl = buf.find(b"\r\n", pos)
                    if nl < 0:
                        if n - pos > _LINE_MAX:
                            raise FramingError("a chunk-size line longer than 4 KiB")
                        break
                    line = bytes(buf[pos:nl]).split(b";", 1)[0].strip()
                    pos = nl + 2
                    try:
                        size = int(line, 16)
                    except ValueError:
                        raise FramingError(f"bad chunk size {line[:40]!r}") from None
                    if size < 0:
                        raise FramingError(f"negative chunk size {size}")
                    if size == 0:
                        self._state = _TRAILER
                    else:
                        self._state, self._left = _DATA, size
                elif state == _CRLF:
                    if n - pos < 2:
                        break
                    if buf[pos:pos + 2] != b"\r\n":
                        raise FramingError("no CRLF after a chunk")
                    pos += 2
                    self._state = _SIZE
                elif state == _TRAILER:
                    nl = buf.find(b"\r\n", pos)
                    if nl < 0:
                        if n - pos > _LINE_MAX:
                            raise FramingError("a trailer line longer than 4 KiB")
                        break
                    self.done = nl == pos  # the blank line ends the trailers, and the body
                    pos = nl + 2
                else:  # up to the connection's end: everything is body
                    out += buf[pos:] if pos else buf
                    pos = n
                    break
        finally:
            if pos:
                del buf[:pos]

    def eof(self) -> bool:
        """The connection ended: whether that completes the body (only a body that runs to the end)."""
        if self._state == _TO_CLOSE:
            self.done = True
        return self.done


__all__ = ["HEAD_MAX", "BodyDecoder", "FramingError", "Head", "parse_head"]
