"""stdio: one subprocess per channel, newline-delimited JSON-RPC, exchanges routed by id and progress token;
the process restarted once if it dies."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import signal
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

import orjson

from ...protocol import jsonrpc
from ...protocol.meta import META_PROGRESS_TOKEN, META_SUBSCRIPTION_ID
from ..errors import ChannelError, ServerLost
from .base import Message, Restarted, Unsolicited, log

_END = object()
# How much of a server's stderr a channel keeps when it captures it (`stderr=asyncio.subprocess.PIPE`): the
# end is what explains a failure, and a server flooding its stderr must not grow the client.
STDERR_TAIL_BYTES = 64 * 1024


class StdioExchange:
    __slots__ = ("_chan", "_done", "_queue", "id", "token")

    status = 200
    session_id = None

    def __init__(self, chan: StdioChannel, id_: Any, token: Any) -> None:
        self._chan = chan
        self.id = id_
        self.token = token
        self._queue: asyncio.Queue[Any] = asyncio.Queue()
        self._done = False

    def push(self, item: Any) -> None:
        self._queue.put_nowait(item)

    async def __aiter__(self) -> AsyncIterator[Message]:
        while not self._done:
            item = await self._queue.get()
            if item is _END:
                self._done = True
                raise ServerLost(self._chan.exit_reason())
            if isinstance(item, dict):
                if jsonrpc.is_response(item) and item["id"] == self.id:
                    self._done = True
                yield item

    async def aclose(self) -> None:
        self._chan._forget(self)
        if not self._done:
            self._done = True
            await self._chan.cancel(self.id, "client closed the request")


class StdioChannel:
    """Spawns the server; requests are interleaved on one pipe and demultiplexed by id / token / subscription.

    `stderr`: the server's stderr. None: this process's own; a file descriptor: that file;
    `asyncio.subprocess.PIPE`: captured, always drained (a server writing a lot never blocks on it), its last
    STDERR_TAIL_BYTES kept as `stderr_tail` (every process the channel started, restarts included)."""

    kind = "stdio"
    mirrors_headers = False

    def __init__(
        self,
        command: str | Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        max_restarts: int = 3,
        shutdown_timeout: float = 2.0,
        stderr: int | None = None,
    ) -> None:
        self.argv = shlex.split(command) if isinstance(command, str) else list(command)
        if not self.argv:
            raise ValueError("empty stdio command")
        self.env = {**os.environ, **env} if env else None
        self.cwd = cwd
        self.max_restarts = max_restarts
        self.shutdown_timeout = shutdown_timeout
        self.stderr = stderr
        self.proc: asyncio.subprocess.Process | None = None
        self.restarts = 0
        self.on_unsolicited: Unsolicited | None = None
        self.on_restart: Restarted | None = None
        self._by_id: dict[Any, StdioExchange] = {}
        self._by_token: dict[Any, StdioExchange] = {}
        self._reader: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()
        self._closed = False
        self._returncode: int | None = None
        self._stderr_kept = bytearray()
        self._stderr_trimmed = False
        self._drains: list[asyncio.Task[None]] = []

    @property
    def stderr_tail(self) -> str:
        """The end of what the server wrote on its stderr, whole lines only (captured with `stderr=PIPE`)."""
        data = bytes(self._stderr_kept)
        if self._stderr_trimmed:
            data = data.partition(b"\n")[2]  # the first line was cut by the trim
        return data.decode("utf-8", "replace")

    async def _drain_stderr(self, stream: asyncio.StreamReader) -> None:
        kept = self._stderr_kept
        with contextlib.suppress(ConnectionError, ValueError):
            while data := await stream.read(65536):
                kept += data
                if len(kept) > STDERR_TAIL_BYTES:
                    del kept[:len(kept) - STDERR_TAIL_BYTES]
                    self._stderr_trimmed = True

    @property
    def key(self) -> str:
        return "stdio:" + shlex.join(self.argv)

    def watch(self, on_unsolicited: Unsolicited | None, on_restart: Restarted | None) -> None:
        self.on_unsolicited = on_unsolicited
        self.on_restart = on_restart

    def exit_reason(self) -> str:
        rc = self._returncode
        return f"the server process exited (status {rc})" if rc is not None else "the server process went away"

    async def start(self) -> None:
        async with self._lock:
            await self._start_locked()

    async def _start_locked(self) -> None:
        if self._closed:
            raise ChannelError("channel is closed")
        if self.proc is not None and self.proc.returncode is None and self._reader and not self._reader.done():
            return
        if self.proc is not None:
            if self.restarts >= self.max_restarts:
                raise ServerLost(f"{self.exit_reason()}; not restarting again ({self.restarts} restarts)")
            self.restarts += 1
            log.warning("stdio server exited; restarting %s (restart %d)", self.argv[0], self.restarts)
            if self.on_restart is not None:
                self.on_restart()
        try:
            self.proc = await asyncio.create_subprocess_exec(
                *self.argv,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=self.stderr,
                env=self.env,
                cwd=self.cwd,
                limit=64 * 1024 * 1024,
            )
        except OSError as e:
            raise ChannelError(f"cannot start {self.argv[0]!r}: {e.strerror or e}") from None
        self._returncode = None
        loop = asyncio.get_running_loop()
        self._reader = loop.create_task(self._read(self.proc))
        if self.proc.stderr is not None:
            self._drains = [t for t in self._drains if not t.done()]
            self._drains.append(loop.create_task(self._drain_stderr(self.proc.stderr)))

    async def _read(self, proc: asyncio.subprocess.Process) -> None:
        assert proc.stdout is not None
        try:
            while True:
                line = await proc.stdout.readline()
                if not line:
                    break
                line = line.strip()
                if not line:
                    continue
                try:
                    msg = orjson.loads(line)
                except orjson.JSONDecodeError:
                    log.warning("stdio server wrote a line that is not JSON: %r", line[:200])
                    continue
                if isinstance(msg, dict):
                    self._route(msg)
        except (ConnectionError, ValueError) as e:
            log.warning("stdio read failed: %s", e)
        finally:
            with contextlib.suppress(Exception):
                self._returncode = await asyncio.wait_for(proc.wait(), 1.0)
            lost = list(self._by_id.values())
            self._by_id.clear()
            self._by_token.clear()
            for ex in lost:
                ex.push(_END)

    def _route(self, msg: Message) -> None:
        if jsonrpc.is_response(msg):
            ex = self._by_id.get(_k(msg["id"]))
            if ex is not None:
                ex.push(msg)
                return
        elif "id" not in msg:
            params = msg.get("params") if isinstance(msg.get("params"), dict) else {}
            tok = params.get("progressToken") if params else None
            if tok is not None and (ex := self._by_token.get(_k(tok))) is not None:
                ex.push(msg)
                return
            meta = params.get("_meta") if params else None
            if isinstance(meta, dict) and META_SUBSCRIPTION_ID in meta:
                ex = self._by_id.get(_k(meta[META_SUBSCRIPTION_ID]))
                if ex is not None:
                    ex.push(msg)
                    return
            if msg.get("method") == "notifications/cancelled" and params and "requestId" in params:
                ex = self._by_id.get(_k(params["requestId"]))
                if ex is not None:
                    ex.push(msg)
                    return
        if self.on_unsolicited is not None:
            self.on_unsolicited(msg)
        else:
            log.debug("unrouted message from stdio server: %s", msg.get("method") or msg.get("id"))

    def _write(self, message: Message) -> None:
        proc = self.proc
        if proc is None or proc.stdin is None or proc.returncode is not None or proc.stdin.is_closing():
            raise ServerLost(self.exit_reason())
        proc.stdin.write(orjson.dumps(message) + b"\n")

    async def exchange(
        self, message: Message, headers: Mapping[str, str] | None = None, *, timeout: float | None = None
    ) -> StdioExchange:
        if self.proc is None or self.proc.returncode is not None or (self._reader and self._reader.done()):
            await self.start()
        params = message.get("params") or {}
        meta = params.get("_meta") if isinstance(params, dict) else None
        token = meta.get(META_PROGRESS_TOKEN) if isinstance(meta, dict) else None
        ex = StdioExchange(self, message["id"], token)
        self._by_id[_k(ex.id)] = ex
        if token is not None:
            self._by_token[_k(token)] = ex
        try:
            self._write(message)
        except ServerLost:
            self._forget(ex)
            raise
        return ex

    async def send(self, message: Message, headers: Mapping[str, str] | None = None) -> int:
        if self.proc is None or self.proc.returncode is not None:
            await self.start()
        self._write(message)
        return 202

    def _forget(self, ex: StdioExchange) -> None:
        if self._by_id.get(_k(ex.id)) is ex:
            del self._by_id[_k(ex.id)]
        if ex.token is not None and self._by_token.get(_k(ex.token)) is ex:
            del self._by_token[_k(ex.token)]

    async def cancel(self, request_id: Any, reason: str) -> None:
        with contextlib.suppress(ServerLost):
            self._write(jsonrpc.cancelled(request_id, reason))

    async def aclose(self) -> None:
        """Close stdin, wait, then SIGTERM, then SIGKILL (the stdio transport's shutdown order)."""
        self._closed = True
        proc = self.proc
        if proc is None:
            return
        if proc.returncode is None:
            if proc.stdin is not None:
                with contextlib.suppress(Exception):
                    proc.stdin.close()
            for sig in (None, signal.SIGTERM, signal.SIGKILL):
                if sig is not None and proc.returncode is None:
                    with contextlib.suppress(ProcessLookupError):
                        proc.send_signal(sig)
                try:
                    await asyncio.wait_for(proc.wait(), self.shutdown_timeout)
                    break
                except TimeoutError:
                    continue
        if self._reader is not None:
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(self._reader, 1.0)
        for drain in self._drains:  # the stderr written before the exit, read to its end (or for a second,
            with contextlib.suppress(BaseException):  # when a child of the server still holds it open)
                await asyncio.wait_for(drain, 1.0)


def _k(v: Any) -> Any:
    """Dict key for an id: `True == 1` in a dict, so a boolean id is keyed apart from the integer."""
    return (type(v).__name__, v) if isinstance(v, bool) else v
