"""A 2024-11-05 HTTP+SSE stream read by a test: the GET on a thread, its events in a queue."""

from __future__ import annotations

import contextlib
import json
import queue
import socket
import threading
import urllib.parse
from collections.abc import Iterator
from typing import Any

import httpx

WAIT = 20.0  # seconds any one message may take to arrive (the machine is shared)


class SseStream:
    """A GET stream read on a thread: `(event, data)` pairs in a queue, until `close()`."""

    def __init__(self, url: str, headers: dict[str, str] | None = None) -> None:
        self.url = url
        self.events: queue.Queue[tuple[str, str] | BaseException] = queue.Queue()
        self.response: httpx.Response | None = None
        self._client = httpx.Client(timeout=httpx.Timeout(WAIT, read=None))
        self._opened = threading.Event()
        self._thread = threading.Thread(target=self._read, args=(headers or {},), daemon=True)
        self._thread.start()
        assert self._opened.wait(WAIT), "the SSE stream did not open"

    def _read(self, headers: dict[str, str]) -> None:
        try:
            with self._client.stream("GET", self.url, headers={"accept": "text/event-stream", **headers}) as r:
                self.response = r
                self._opened.set()
                event, data = "message", []
                for line in r.iter_lines():
                    if line.startswith("event:"):
                        event = line[6:].strip()
                    elif line.startswith("data:"):
                        data.append(line[5:].lstrip(" "))
                    elif line == "" and data:
                        self.events.put((event, "\n".join(data)))
                        event, data = "message", []
        except BaseException as e:  # any failure of the reader thread is the test's to report
            self._opened.set()
            self.events.put(e)

    def next(self) -> tuple[str, str]:
        got = self.events.get(timeout=WAIT)
        if isinstance(got, BaseException):
            raise AssertionError(f"the stream ended: {got!r}")
        return got

    def message(self, until: Any = None) -> dict[str, Any]:
        """The next JSON-RPC message (the first matching `until`, when given; others are skipped)."""
        for _ in range(50):
            event, data = self.next()
            assert event == "message", (event, data)
            m: dict[str, Any] = json.loads(data)
            if until is None or until(m):
                return m
        raise AssertionError("no matching message in 50")

    def post_url(self) -> str:
        event, data = self.next()
        assert event == "endpoint"
        return urllib.parse.urljoin(self.url, data)

    def close(self) -> None:
        # Closing the client does not wake the reader blocked in recv(); until the server's next keep-alive
        # (15 s by default) it would hold the stream open. Shutting the socket down ends the read at once.
        if self.response is not None:
            stream = self.response.extensions.get("network_stream")
            sock = stream.get_extra_info("socket") if stream is not None else None
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
        self._client.close()
        self._thread.join(WAIT)


@contextlib.contextmanager
def sse(url: str, headers: dict[str, str] | None = None) -> Iterator[SseStream]:
    s = SseStream(url, headers)
    try:
        yield s
    finally:
        s.close()
