"""What the auditor talks to: instances of one server over Streamable HTTP (given as URLs, or launched by the
auditor on free loopback ports), or one server process over stdio.

The auditor is the non-sticky balancer: `send` gives each request to the next instance in turn, so two
consecutive calls never reach the same process when there are several. A `Lane` is one dedicated
connection (HTTP: a single keep-alive connection to one instance; stdio: a process of its own), for checks
that ask whether a server remembers anything about the connection a request arrived on. Only the given
targets get traffic; every process the auditor starts, it stops.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import shlex
import shutil
import signal
import socket
import tempfile
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path
from typing import Literal, Protocol

import orjson

from ..client.channels import StdioChannel
from ..client.errors import ChannelError, ClientError
from ..client.http11 import HttpError, HttpUrl, Pool, bounded
from ..protocol.sse import decode_messages, iter_messages
from .ledger import Ledger
from .proxy import INSTANCE, TAG, RoundRobinProxy
from .wire import Exchange, Message, headers_for

Restart = Literal["all", "last"]
ACCEPT = "application/json, text/event-stream"


RECORD_MAX = 5000  # exchanges kept for the schema check: bounded whatever the audit does
MESSAGES_MAX = 1000  # messages kept per exchange or stream: a server flooding notifications is bounded too
# Bytes read of one response (a body, or an SSE stream however long it runs): a server answering with an endless
# or multi-gigabyte body must not take the auditor's memory with it. A real answer is far smaller.
BODY_MAX = 16 * 1024 * 1024


# What a body read past BODY_MAX is refused with (http11's BodyTooLarge, an HttpError).
TOO_LARGE = f"the response went past {BODY_MAX // (1024 * 1024)} MiB: the auditor stopped reading it"


class Recorder:
    """Every exchange the target carried (bounded), for checks that look at all of them at the end."""

    def __init__(self) -> None:
        self.recorded: list[Exchange] = []
        self.ledger = Ledger()

    def record(self, ex: Exchange) -> Exchange:
        self.ledger.note(ex.request, ex.instance)  # unbounded by RECORD_MAX: the report lists every call
        if len(self.recorded) < RECORD_MAX:
            self.recorded.append(ex)
        return ex


class TargetError(Exception):
    """The target cannot be reached or started at all: the audit cannot run."""


class Stream:
    """A long-lived response (subscriptions/listen): its messages as they arrive, kept as evidence too."""

    def __init__(self, exchange: Exchange) -> None:
        self.exchange = exchange
        self.queue: asyncio.Queue[Message] = asyncio.Queue()
        self.ended = asyncio.Event()

    def put(self, m: Message) -> None:
        if len(self.exchange.messages) < MESSAGES_MAX:
            self.exchange.messages.append(m)
        if self.queue.qsize() < MESSAGES_MAX:
            self.queue.put_nowait(m)

    async def next(self, timeout: float) -> Message | None:
        """The next message within `timeout` seconds, or None (nothing came, or the stream ended)."""
        try:
            return await asyncio.wait_for(self.queue.get(), timeout)
        except TimeoutError:
            return None


async def _pump(stream: Stream, source: AsyncIterator[Message]) -> None:
    try:
        async for m in source:
            stream.put(m)
    except (HttpError, ClientError, ChannelError) as e:
        stream.exchange.failure = str(e)
    finally:
        stream.ended.set()


@contextlib.asynccontextmanager
async def _streaming(stream: Stream, source: AsyncIterator[Message]) -> AsyncIterator[Stream]:
    task = asyncio.get_running_loop().create_task(_pump(stream, source))
    try:
        yield stream
    finally:
        task.cancel()
        with contextlib.suppress(BaseException):
            await task


class Lane(Protocol):
    instance: int

    async def send(self, message: Message, *, headers: Mapping[str, str | None] | None = None,
                   principal: str | None = None, timeout: float = 10.0) -> Exchange: ...

    async def notify(self, message: Message) -> None: ...


class Target(Protocol):
    kind: Literal["http", "stdio"]
    description: str
    instances: int
    can_restart: bool
    principals: dict[str, str]
    last_instance: int
    recorded: list[Exchange]
    ledger: Ledger

    @property
    def url(self) -> str | None:
        """The one URL that untargeted traffic goes to, when there is one."""

    async def start(self) -> None: ...

    async def send(self, message: Message | None, *, instance: int | None = None,
                   headers: Mapping[str, str | None] | None = None, http_method: str = "POST",
                   mirror: bool = True, principal: str | None = None, timeout: float = 10.0) -> Exchange: ...

    async def notify(self, message: Message) -> None: ...

    def lane(self, instance: int = 0) -> contextlib.AbstractAsyncContextManager[Lane]: ...

    def stream(self, message: Message, instance: int = 0) -> contextlib.AbstractAsyncContextManager[Stream]: ...

    async def restart(self, which: Restart = "all") -> None: ...

    async def aclose(self) -> None: ...


# ------------------------------------------------------------------------------------------------ HTTP


async def _http_exchange(pool: Pool, url: str, message: Message | None, *, instance: int, http_method: str,
                         headers: Mapping[str, str], timeout: float) -> Exchange:
    body = b"" if message is None else orjson.dumps(message)
    ex = Exchange(message, http_method, dict(headers), instance)
    want = (message or {}).get("id")
    try:
        async with asyncio.timeout(timeout):
            resp = await pool.request(http_method, HttpUrl.parse(url), headers, body, timeout=None)
            ex.status, ex.response_headers = resp.status, dict(resp.headers)
            try:
                if resp.content_type == "text/event-stream":
                    async for m in iter_messages(bounded(resp.iter_bytes(), BODY_MAX, TOO_LARGE)):
                        done = "method" not in m and m.get("id") == want and want is not None
                        if done or len(ex.messages) < MESSAGES_MAX - 1:  # room for the response, always
                            ex.messages.append(m)
                        if done:
                            break  # the response ends the exchange, whatever the stream does next
                else:
                    ex.body = b"".join([c async for c in bounded(resp.iter_bytes(), BODY_MAX, TOO_LARGE)])
                    ex.messages = decode_messages(ex.body) if ex.body[:1] in (b"{", b"[") else []
            finally:
                await resp.aclose()
    except TimeoutError:
        ex.failure = f"no complete response within {timeout:g} s"
    except HttpError as e:
        ex.failure = str(e)
    return ex


class _HttpLane:
    def __init__(self, target: HttpTarget, instance: int) -> None:
        self.target, self.instance = target, instance
        self.pool = Pool(max_idle=1)

    async def send(self, message: Message, *, headers: Mapping[str, str | None] | None = None,
                   principal: str | None = None, timeout: float = 10.0) -> Exchange:
        return self.target.record(await _http_exchange(
            self.pool, self.target.urls[self.instance], message, instance=self.instance, http_method="POST",
            headers=self.target.headers(message, headers, principal), timeout=timeout))

    async def notify(self, message: Message) -> None:
        await self.send(message, timeout=5.0)


class HttpTarget(Recorder):
    """Instances of one server at the given URLs; requests go to each in turn."""

    kind: Literal["http", "stdio"] = "http"
    can_restart = False

    def __init__(self, urls: Sequence[str], principals: Mapping[str, str] | None = None) -> None:
        if not urls:
            raise TargetError("no URL given")
        for u in urls:
            try:
                HttpUrl.parse(u)
            except ValueError as e:
                raise TargetError(str(e)) from None
        super().__init__()
        self.urls = list(urls)
        self.principals = dict(principals or {})
        self.pool = Pool()
        self.last_instance = 0
        self._next = 0
        self.description = " ".join(self.urls)

    @property
    def instances(self) -> int:
        return len(self.urls)

    @property
    def url(self) -> str | None:
        return self.urls[0] if len(self.urls) == 1 else None

    async def start(self) -> None:
        return None

    def headers(self, message: Message | None, extra: Mapping[str, str | None] | None, principal: str | None,
                mirror: bool = True) -> dict[str, str]:
        h: dict[str, str | None] = {"content-type": "application/json", "accept": ACCEPT}
        if mirror and message is not None and "method" in message:
            h.update({k.lower(): v for k, v in headers_for(message).items()})
        token = self.principals.get(principal) if principal else next(iter(self.principals.values()), None)
        if token:
            h["authorization"] = f"Bearer {token}"
        h.update({k.lower(): v for k, v in (extra or {}).items()})  # an override replaces, never repeats
        return {k: v for k, v in h.items() if v is not None}

    def _pick(self, instance: int | None) -> int:
        if instance is None:
            instance = self._next % len(self.urls)
            self._next += 1
        self.last_instance = instance
        return instance

    async def send(self, message: Message | None, *, instance: int | None = None,
                   headers: Mapping[str, str | None] | None = None, http_method: str = "POST",
                   mirror: bool = True, principal: str | None = None, timeout: float = 10.0) -> Exchange:
        h = self.headers(message, headers, principal, mirror)
        if http_method != "POST":
            h = {k: v for k, v in h.items() if k in ("accept", "authorization")}
            h.update({k: v for k, v in (headers or {}).items() if v is not None})
        return self.record(await self._exchange(message, instance, http_method, h, timeout))

    async def _exchange(self, message: Message | None, instance: int | None, http_method: str,
                        headers: dict[str, str], timeout: float) -> Exchange:
        i = self._pick(instance)
        return await _http_exchange(self.pool, self.urls[i], message, instance=i, http_method=http_method,
                                    headers=headers, timeout=timeout)

    async def notify(self, message: Message) -> None:
        await self.send(message)

    @contextlib.asynccontextmanager
    async def lane(self, instance: int = 0) -> AsyncIterator[Lane]:
        lane = _HttpLane(self, instance)
        try:
            yield lane
        finally:
            await lane.pool.aclose()

    @contextlib.asynccontextmanager
    async def stream(self, message: Message, instance: int = 0) -> AsyncIterator[Stream]:
        """POST `message` on a connection of its own and keep reading its response until the block ends
        (closing the connection is how HTTP ends a listen)."""
        self.last_instance = instance
        self.ledger.note(message, instance)
        headers = self.headers(message, None, None)
        st = Stream(Exchange(message, "POST", headers, instance))
        pool = Pool(max_idle=0)
        url = self.urls[instance]

        async def source() -> AsyncIterator[Message]:
            resp = await pool.request("POST", HttpUrl.parse(url), headers, orjson.dumps(message), timeout=10.0)
            st.exchange.status, st.exchange.response_headers = resp.status, dict(resp.headers)
            if resp.content_type == "text/event-stream":
                async for m in iter_messages(bounded(resp.iter_bytes(), BODY_MAX, TOO_LARGE)):
                    yield m
            else:
                body = b"".join([c async for c in bounded(resp.iter_bytes(), BODY_MAX, TOO_LARGE)])
                for m in decode_messages(body):
                    yield m

        try:
            async with _streaming(st, source()) as out:
                yield out
        finally:
            await pool.aclose()

    async def restart(self, which: Restart = "all") -> None:
        raise TargetError("the auditor did not start these instances, so it cannot restart them (use --launch)")

    async def aclose(self) -> None:
        await self.pool.aclose()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class _Instance:
    def __init__(self, argv: list[str], port: int, log: Path) -> None:
        self.argv, self.port, self.log = argv, port, log
        self.proc: asyncio.subprocess.Process | None = None

    async def start(self, timeout: float) -> None:
        with self.log.open("ab") as out:
            try:
                self.proc = await asyncio.create_subprocess_exec(
                    *self.argv, stdin=asyncio.subprocess.DEVNULL, stdout=out, stderr=out, start_new_session=True)
            except OSError as e:
                raise TargetError(f"cannot start {self.argv[0]!r}: {e.strerror or e}") from None
        deadline = time.monotonic() + timeout
        while True:
            with contextlib.suppress(OSError):
                _, w = await asyncio.open_connection("127.0.0.1", self.port)
                w.close()
                return
            if self.proc.returncode is not None or time.monotonic() > deadline:
                tail = self.log.read_text(errors="replace")[-800:]
                state = f"exited with status {self.proc.returncode}" if self.proc.returncode is not None \
                    else f"did not listen on port {self.port} within {timeout:g} s"
                await self.stop()
                raise TargetError(f"{shlex.join(self.argv)} {state}; its output ends with:\n{tail}")
            await asyncio.sleep(0.05)

    async def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None or proc.returncode is not None:
            return
        for sig, wait in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 5.0)):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, sig)  # its own session: a shell wrapper's children go too
            try:
                await asyncio.wait_for(proc.wait(), wait)
                return
            except TimeoutError:
                continue


class LaunchedTarget(HttpTarget):
    """N instances of `command` (with `{port}` and optionally `{instance}` filled in) on free loopback ports,
    started, restarted and stopped by the auditor, behind its own round-robin proxy: a request for no
    instance in particular goes through the proxy (the proxy's record says which instance served it); a
    check that targets one instance, or holds a connection to it (a lane, a listen stream), goes direct."""

    can_restart = True

    def __init__(self, command: str, instances: int = 3, *, path: str = "/mcp",
                 principals: Mapping[str, str] | None = None, start_timeout: float = 30.0) -> None:
        if "{port}" not in command:
            raise TargetError('--launch needs "{port}" in the command, where the instance\'s port goes')
        if not 1 <= instances <= 16:
            raise TargetError("--instances must be between 1 and 16")
        self.workdir = Path(tempfile.mkdtemp(prefix="mcp-audit-"))
        self.start_timeout = start_timeout
        self.path = path
        self._procs: list[_Instance] = []
        for n in range(instances):
            port = free_port()
            argv = [a.replace("{port}", str(port)).replace("{instance}", f"i{n + 1}") for a in shlex.split(command)]
            self._procs.append(_Instance(argv, port, self.workdir / f"i{n + 1}.log"))
        super().__init__([f"http://127.0.0.1:{p.port}{path}" for p in self._procs], principals)
        self.proxy = RoundRobinProxy([("127.0.0.1", p.port) for p in self._procs])
        self.command = command
        self.description = f"{command} × {instances} (launched, behind the auditor's round-robin proxy)"
        self._tags = itertools.count(1)

    @property
    def url(self) -> str | None:
        """Where untargeted traffic goes: the proxy (known once started)."""
        return self.proxy.url(self.path)

    async def start(self) -> None:
        try:
            await self.proxy.start()
            self.description = f"{self.url} → {self.command} × {self.instances} (launched, round-robin proxy)"
            await asyncio.gather(*(p.start(self.start_timeout) for p in self._procs))
        except BaseException:
            await self.aclose()
            raise

    @property
    def pids(self) -> list[int | None]:
        """Each instance's process id (None while it is stopped)."""
        return [p.proc.pid if p.proc is not None else None for p in self._procs]

    async def _exchange(self, message: Message | None, instance: int | None, http_method: str,
                        headers: dict[str, str], timeout: float) -> Exchange:
        if instance is not None:
            return await super()._exchange(message, instance, http_method, headers, timeout)
        tag = f"t{next(self._tags)}"
        ex = await _http_exchange(self.pool, self.proxy.url(self.path), message, instance=0, http_method=http_method,
                                  headers={**headers, TAG: tag}, timeout=timeout)
        ex.headers.pop(TAG, None)
        ex.response_headers.pop(INSTANCE, None)
        served = self.proxy.instance_for(tag)
        if served is not None:  # None: the proxy never read the request (refused, or dropped before it did)
            ex.instance = self.last_instance = served
        return ex

    async def restart(self, which: Restart = "all") -> None:
        chosen = self._procs if which == "all" else [self._procs[self.last_instance]]
        await self.pool.aclose()
        self.pool = Pool()
        await asyncio.gather(*(p.stop() for p in chosen))
        await asyncio.gather(*(p.start(self.start_timeout) for p in chosen))

    async def aclose(self) -> None:
        await super().aclose()
        await self.proxy.aclose()
        await asyncio.gather(*(p.stop() for p in self._procs))
        # The instances' output only serves a start-up error, which quotes its tail: nothing to keep.
        shutil.rmtree(self.workdir, ignore_errors=True)


# ----------------------------------------------------------------------------------------------- stdio


async def _stdio_exchange(chan: StdioChannel, message: Message, timeout: float) -> Exchange:
    ex = Exchange(message, "stdio")
    try:
        async with asyncio.timeout(timeout):
            stream = await chan.exchange(message)
            try:
                async for m in stream:
                    done = "method" not in m
                    if done or len(ex.messages) < MESSAGES_MAX - 1:  # bounded, with room for the response
                        ex.messages.append(m)
                    if done:
                        break
                if ex.response is None and not ex.failure:
                    ex.failure = chan.exit_reason()
            finally:
                await stream.aclose()
    except TimeoutError:
        ex.failure = f"no response within {timeout:g} s"
    except (ClientError, ChannelError) as e:  # ServerLost (a ChannelError): the process exited or never ran
        ex.failure = str(e)
    return ex


class _StdioLane:
    instance = 0

    def __init__(self, target: StdioTarget) -> None:
        self.target = target
        self.chan = StdioChannel(target.argv, env=target.env, max_restarts=0, stderr=asyncio.subprocess.DEVNULL)

    async def send(self, message: Message, *, headers: Mapping[str, str | None] | None = None,
                   principal: str | None = None, timeout: float = 10.0) -> Exchange:
        return self.target.record(await _stdio_exchange(self.chan, message, timeout))

    async def notify(self, message: Message) -> None:
        with contextlib.suppress(ClientError, ChannelError):
            await self.chan.send(message)


class StdioTarget(Recorder):
    """One server process over stdio; a lane is another process of the same command."""

    kind: Literal["http", "stdio"] = "stdio"
    instances = 1
    can_restart = True
    last_instance = 0
    url = None

    def __init__(self, command: str, principals: Mapping[str, str] | None = None) -> None:
        super().__init__()
        self.argv = shlex.split(command)
        if not self.argv:
            raise TargetError("empty --stdio command")
        self.principals = dict(principals or {})
        # stdio authenticates once per process, from its environment (how our own servers take a token).
        token = next(iter(self.principals.values()), None)
        self.env = {"MCP_STATELESS_AUTHORIZATION": f"Bearer {token}"} if token else None
        self.description = f"stdio: {command}"
        self.chan = self._channel()

    def _channel(self) -> StdioChannel:
        return StdioChannel(self.argv, env=self.env, max_restarts=0, stderr=asyncio.subprocess.DEVNULL)

    async def start(self) -> None:
        try:
            await self.chan.start()
        except (ClientError, ChannelError) as e:  # e.g. the command does not exist
            raise TargetError(str(e)) from None

    async def send(self, message: Message | None, *, instance: int | None = None,
                   headers: Mapping[str, str | None] | None = None, http_method: str = "POST",
                   mirror: bool = True, principal: str | None = None, timeout: float = 10.0) -> Exchange:
        assert message is not None, "stdio carries messages only"
        return self.record(await _stdio_exchange(self.chan, message, timeout))

    async def notify(self, message: Message) -> None:
        with contextlib.suppress(ClientError, ChannelError):
            await self.chan.send(message)

    @contextlib.asynccontextmanager
    async def lane(self, instance: int = 0) -> AsyncIterator[Lane]:
        lane = _StdioLane(self)
        try:
            yield lane
        finally:
            await lane.chan.aclose()

    @contextlib.asynccontextmanager
    async def stream(self, message: Message, instance: int = 0) -> AsyncIterator[Stream]:
        """The request on the main process; leaving the block sends notifications/cancelled for it."""
        st = Stream(Exchange(message, "stdio"))
        self.ledger.note(message, 0)
        ex = await self.chan.exchange(message)

        async def source() -> AsyncIterator[Message]:
            async for m in ex:
                yield m

        try:
            async with _streaming(st, source()) as out:
                yield out
        finally:
            await ex.aclose()

    async def restart(self, which: Restart = "all") -> None:
        await self.chan.aclose()
        self.chan = self._channel()
        await self.start()

    async def aclose(self) -> None:
        await self.chan.aclose()


__all__ = ["HttpTarget", "Lane", "LaunchedTarget", "Restart", "StdioTarget", "Stream", "Target", "TargetError",
           "free_port"]
