"""The auditor's round-robin proxy (audit/proxy.py) between a real HTTP client and upstreams that are real
TCP servers whose behaviour each test scripts: the order requests are spread in, headers passed through,
SSE relayed event by event, a client hang-up closing the upstream, an unreachable instance, the bounds."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

import orjson
import pytest

from mcp_stateless.audit.proxy import INSTANCE, TAG, Limits, RoundRobinProxy
from mcp_stateless.client.http11 import HttpUrl, Pool

Handler = Callable[["Upstream", asyncio.StreamReader, asyncio.StreamWriter, bytes], Awaitable[None]]


@dataclass
class Upstream:
    """One scripted instance on a free loopback port; `heads` keeps every request head it received."""

    name: str
    handler: Handler
    heads: list[bytes] = field(default_factory=list)
    hung_up: asyncio.Event = field(default_factory=asyncio.Event)
    server: asyncio.Server | None = None
    port: int = 0

    async def start(self) -> Upstream:
        self.server = await asyncio.start_server(self._conn, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    async def _conn(self, r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        try:
            head = await r.readuntil(b"\r\n\r\n")
            self.heads.append(head)
            length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                           if line.lower().startswith(b"content-length:")), 0)
            body = await r.readexactly(length)
            await self.handler(self, r, w, body)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            w.close()

    async def stop(self) -> None:
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()


async def json_name(up: Upstream, r: asyncio.StreamReader, w: asyncio.StreamWriter, body: bytes) -> None:
    data = orjson.dumps({"served": up.name, "body": body.decode()})
    w.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s" % (len(data), data))
    await w.drain()


@contextlib.asynccontextmanager
async def proxied(*handlers: Handler, limits: Limits | None = None) -> AsyncIterator[tuple[RoundRobinProxy,
                                                                                         list[Upstream]]]:
    ups = [await Upstream(f"u{n}", h).start() for n, h in enumerate(handlers)]
    proxy = RoundRobinProxy([("127.0.0.1", u.port) for u in ups], limits)
    await proxy.start()
    try:
        yield proxy, ups
    finally:
        await proxy.aclose()
        for u in ups:
            await u.stop()


async def test_requests_go_to_each_instance_in_turn_on_one_connection() -> None:
    async with proxied(json_name, json_name, json_name) as (proxy, _):
        pool = Pool(max_idle=1)
        served, marks = [], []
        for n in range(7):
            resp = await pool.request("POST", HttpUrl.parse(proxy.url()), {TAG: f"r{n}"}, b"{}")
            served.append(orjson.loads(await resp.read())["served"])
            marks.append(resp.headers[INSTANCE])
        await pool.aclose()
    assert served == ["u0", "u1", "u2", "u0", "u1", "u2", "u0"]
    assert marks == ["0", "1", "2", "0", "1", "2", "0"]
    assert [proxy.instance_for(f"r{n}") for n in range(7)] == [0, 1, 2, 0, 1, 2, 0]
    assert proxy.instance_for("never-sent") is None


async def test_every_end_to_end_header_passes_and_the_tag_does_not() -> None:
    async with proxied(json_name) as (proxy, (up,)):
        pool = Pool()
        sent = {"mcp-session-id": "s-1", "last-event-id": "ev-9", "authorization": "Bearer t",
                "mcp-method": "tools/call", "x-custom": "a, b", TAG: "t1", "connection": "keep-alive, x-hop",
                "x-hop": "gone"}
        resp = await pool.request("POST", HttpUrl.parse(proxy.url("/mcp?x=1")), sent, b'{"a": 1}')
        assert orjson.loads(await resp.read())["body"] == '{"a": 1}'
        await pool.aclose()
    lines = up.heads[0].decode().split("\r\n")
    assert lines[0] == "POST /mcp?x=1 HTTP/1.1"
    got = {k.lower(): v.strip() for k, _, v in (x.partition(":") for x in lines[1:] if x)}
    assert got == {"host": f"127.0.0.1:{up.port}", "mcp-session-id": "s-1", "last-event-id": "ev-9",
                   "authorization": "Bearer t", "mcp-method": "tools/call", "x-custom": "a, b",
                   "content-length": "8", "connection": "close"}


async def raw_request(port: int, body: bytes = b"{}") -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    r, w = await asyncio.open_connection("127.0.0.1", port)
    w.write(b"POST /mcp HTTP/1.1\r\nHost: x\r\ncontent-length: %d\r\n\r\n%s" % (len(body), body))
    await w.drain()
    return r, w


@pytest.mark.parametrize("framing", ["chunked", "close-delimited"])
async def test_sse_events_arrive_one_by_one_before_the_stream_ends(framing: str) -> None:
    release = asyncio.Event()

    async def sse(up: Upstream, r: asyncio.StreamReader, w: asyncio.StreamWriter, body: bytes) -> None:
        te = "transfer-encoding: chunked\r\n" if framing == "chunked" else ""
        w.write(f"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n{te}\r\n".encode())

        def event(text: bytes) -> bytes:
            return b"%x\r\n%s\r\n" % (len(text), text) if framing == "chunked" else text

        w.write(event(b"data: one\n\n"))
        await w.drain()
        await asyncio.wait_for(release.wait(), 10)  # the second event only once the client has the first
        w.write(event(b"data: two\n\n") + (b"0\r\n\r\n" if framing == "chunked" else b""))
        await w.drain()

    async with proxied(sse) as (proxy, _):
        r, w = await raw_request(proxy.port)
        head = await asyncio.wait_for(r.readuntil(b"\r\n\r\n"), 5)
        assert b"transfer-encoding: chunked" in head and b"content-type: text/event-stream" in head
        assert await asyncio.wait_for(r.readuntil(b"\r\n"), 5) == b"b\r\n"
        assert await asyncio.wait_for(r.readexactly(13), 5) == b"data: one\n\n\r\n"
        release.set()
        rest = await asyncio.wait_for(r.readuntil(b"0\r\n\r\n"), 5)
        assert rest == b"b\r\ndata: two\n\n\r\n0\r\n\r\n"
        w.close()


async def test_a_client_hang_up_closes_the_upstream_connection() -> None:
    async def quiet_listen(up: Upstream, r: asyncio.StreamReader, w: asyncio.StreamWriter, body: bytes) -> None:
        w.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
                b"7\r\ndata:\n\n\r\n")
        await w.drain()
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
            await asyncio.wait_for(r.read(), 20)  # b"" once the proxy closed its side
        up.hung_up.set()

    async with proxied(quiet_listen) as (proxy, (up,)):
        r, w = await raw_request(proxy.port)
        await asyncio.wait_for(r.readuntil(b"data:\n\n\r\n"), 5)
        assert not up.hung_up.is_set()
        w.close()
        await asyncio.wait_for(up.hung_up.wait(), 3)


async def test_an_unreachable_instance_is_a_502_naming_it_and_the_next_one_serves() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = s.getsockname()[1]  # bound, never listening: connection refused
        async with proxied(json_name) as (proxy, (up,)):
            proxy.upstreams.insert(0, ("127.0.0.1", dead))
            pool = Pool()
            first = await pool.request("POST", HttpUrl.parse(proxy.url()), {}, b"{}")
            text = (await first.read()).decode()
            second = await pool.request("POST", HttpUrl.parse(proxy.url()), {}, b"{}")
            assert orjson.loads(await second.read())["served"] == up.name
            await pool.aclose()
    assert (first.status, first.headers[INSTANCE], second.status) == (502, "0", 200)
    assert text == f"audit proxy: instance 1 (127.0.0.1:{dead}) is unreachable: Connection refused\n"


async def test_an_instance_closing_without_a_response_is_a_502() -> None:
    async def rude(up: Upstream, r: asyncio.StreamReader, w: asyncio.StreamWriter, body: bytes) -> None:
        return None

    async with proxied(rude) as (proxy, (up,)):
        pool = Pool()
        resp = await pool.request("POST", HttpUrl.parse(proxy.url()), {}, b"{}")
        text = (await resp.read()).decode()
        await pool.aclose()
    assert resp.status == 502
    assert text.startswith(f"audit proxy: instance 1 (127.0.0.1:{up.port}) gave no valid response")


async def test_bounds_head_size_and_connections() -> None:
    async def hold(up: Upstream, r: asyncio.StreamReader, w: asyncio.StreamWriter, body: bytes) -> None:
        await r.read()  # until the proxy lets go

    async with proxied(hold, limits=Limits(connections=1, head_bytes=1024)) as (proxy, _):
        _, held_w = await raw_request(proxy.port)  # takes the only slot
        await asyncio.sleep(0.1)
        r, w = await asyncio.open_connection("127.0.0.1", proxy.port)
        assert (await asyncio.wait_for(r.read(), 5)).startswith(b"HTTP/1.1 503 ")
        w.close()
        held_w.close()
        await asyncio.sleep(0.1)
        r, w = await asyncio.open_connection("127.0.0.1", proxy.port)
        w.write(b"POST /mcp HTTP/1.1\r\nx-big: " + b"a" * 4096 + b"\r\n\r\n")
        reply = await asyncio.wait_for(r.read(), 5)
        assert reply.startswith(b"HTTP/1.1 431 ") and reply.endswith(b"audit proxy: request head too large\n")
        w.close()


async def test_a_chunked_request_with_expect_continue_reaches_the_instance_whole() -> None:
    async with proxied(json_name) as (proxy, (up,)):
        r, w = await asyncio.open_connection("127.0.0.1", proxy.port)
        w.write(b"POST /mcp HTTP/1.1\r\nHost: x\r\nexpect: 100-continue\r\ntransfer-encoding: chunked\r\n\r\n")
        assert await asyncio.wait_for(r.readuntil(b"\r\n\r\n"), 5) == b"HTTP/1.1 100 Continue\r\n\r\n"
        w.write(b"3\r\n{\"a\r\n4\r\n\": 1\r\n1\r\n}\r\n0\r\nx-trailer: t\r\n\r\n")
        head = await asyncio.wait_for(r.readuntil(b"\r\n\r\n"), 5)
        assert head.startswith(b"HTTP/1.1 200 OK\r\n")
        w.close()
    forwarded = up.heads[0].decode().lower()
    assert "content-length: 8\r\n" in forwarded
    assert "transfer-encoding" not in forwarded and "expect" not in forwarded and "x-trailer" not in forwarded


@pytest.mark.slow
async def test_a_launched_target_restarts_the_instance_the_proxy_gave_the_last_call() -> None:
    from auditlib import serve

    from mcp_stateless.audit import LaunchedTarget
    from mcp_stateless.audit.wire import modern

    target = LaunchedTarget(serve("examples/echo.py:app"), 3)
    await target.start()
    try:
        served = [(await target.send(modern("tools/list"))).instance for _ in range(5)]
        before = target.pids
        assert served == [0, 1, 2, 0, 1] and target.last_instance == 1
        await target.restart("last")
        after = target.pids
        assert after[0] == before[0] and after[2] == before[2] and after[1] not in (None, before[1])
        ex = await target.send(modern("tools/list"))
        assert (ex.instance, ex.status, ex.result is not None) == (2, 200, True)
        assert "x-mcp-audit-instance" not in ex.response_headers and "x-mcp-audit-tag" not in ex.headers
        direct = await target.send(modern("tools/list"), instance=1)
        assert (direct.instance, target.last_instance) == (1, 1)
    finally:
        await target.aclose()
    assert target.pids == [None, None, None]
    assert not target.workdir.exists()  # the instances' output directory goes with them


@pytest.mark.parametrize("head", [
    b"POST /mcp HTTP/1.1\r\nx-a: one\nx-injected: 1\r\ncontent-length: 2\r\n\r\n{}",  # bare LF in a value
    b"POST /mcp HTTP/1.1\r\nx-a: one\rx-injected: 1\r\ncontent-length: 2\r\n\r\n{}",  # bare CR in a value
    b"POST /mcp\nx-injected:1 HTTP/1.1\r\ncontent-length: 2\r\n\r\n{}",  # bare LF in the request line
    b"POST /mcp HTTP/1.1\r\nx-a\n: one\r\ncontent-length: 2\r\n\r\n{}",  # in a name
])
async def test_a_bare_cr_or_lf_in_the_head_is_a_400_and_never_reaches_an_instance(head: bytes) -> None:
    async with proxied(json_name) as (proxy, (up,)):
        r, w = await asyncio.open_connection("127.0.0.1", proxy.port)
        w.write(head)
        reply = await asyncio.wait_for(r.read(), 5)
        w.close()
    assert reply.startswith(b"HTTP/1.1 400 "), reply[:80]
    assert up.heads == []


@pytest.mark.parametrize("framing", [
    b"content-length: 2\r\ntransfer-encoding: chunked\r\n",  # both: the classic smuggling pair
    b"content-length: 2\r\ncontent-length: 40\r\n",  # two lengths that disagree
    b"content-length: +2\r\n",  # not 1*DIGIT
    b"transfer-encoding: chunked, gzip\r\n",  # chunked not last: the body's end is unknowable
    b"transfer-encoding: xchunked\r\n",
])
async def test_ambiguous_request_framing_is_refused(framing: bytes) -> None:
    async with proxied(json_name) as (proxy, (up,)):
        r, w = await asyncio.open_connection("127.0.0.1", proxy.port)
        w.write(b"POST /mcp HTTP/1.1\r\nhost: x\r\n" + framing + b"\r\n2\r\n{}\r\n0\r\n\r\n")
        reply = await asyncio.wait_for(r.read(), 5)
        w.close()
    assert reply.split(b" ", 2)[1] in (b"400", b"501"), reply[:80]
    assert up.heads == []


@pytest.mark.parametrize("size", [b"-5", b"0x2", b"+2", b"2_0", b""])
async def test_a_chunk_size_that_is_not_hex_digits_is_a_400(size: bytes) -> None:
    async with proxied(json_name, limits=Limits(body_bytes=100)) as (proxy, (up,)):
        r, w = await asyncio.open_connection("127.0.0.1", proxy.port)
        w.write(b"POST /mcp HTTP/1.1\r\nhost: x\r\ntransfer-encoding: chunked\r\n\r\n" + size + b"\r\n{}\r\n"
                b"0\r\n\r\n")
        reply = await asyncio.wait_for(r.read(), 5)
        w.close()
    assert reply.startswith(b"HTTP/1.1 400 "), reply[:80]
    assert up.heads == []


async def test_a_chunk_without_its_crlf_is_a_400() -> None:
    async with proxied(json_name) as (proxy, (up,)):
        r, w = await asyncio.open_connection("127.0.0.1", proxy.port)
        w.write(b"POST /mcp HTTP/1.1\r\nhost: x\r\ntransfer-encoding: chunked\r\n\r\n2\r\n{}XX0\r\n\r\n")
        reply = await asyncio.wait_for(r.read(), 5)
        w.close()
    assert reply.startswith(b"HTTP/1.1 400 "), reply[:80]
    assert up.heads == []


async def test_a_large_pipelined_request_waits_for_the_response_in_flight() -> None:
    release = asyncio.Event()

    async def slow(up: Upstream, r: asyncio.StreamReader, w: asyncio.StreamWriter, body: bytes) -> None:
        if len(up.heads) == 1:
            await asyncio.wait_for(release.wait(), 10)
        await json_name(up, r, w, body)

    async with proxied(slow, limits=Limits(head_bytes=1024)) as (proxy, _):
        r, w = await raw_request(proxy.port, b'"first"')
        big = b'"' + b"x" * 8000 + b'"'
        w.write(b"POST /mcp HTTP/1.1\r\nhost: x\r\ncontent-length: %d\r\n\r\n%s" % (len(big), big))
        await w.drain()
        await asyncio.sleep(0.3)  # the pipelined bytes are in before the first response
        release.set()
        answers = []
        for _ in range(2):
            head = await asyncio.wait_for(r.readuntil(b"\r\n\r\n"), 5)
            assert head.startswith(b"HTTP/1.1 200 "), head
            length = int(next(x for x in head.split(b"\r\n") if x.startswith(b"content-length:")).split(b":")[1])
            answers.append(orjson.loads(await asyncio.wait_for(r.readexactly(length), 5))["body"])
        w.close()
    assert answers == ['"first"', big.decode()]


async def test_a_client_that_stops_reading_lets_go_of_the_instance_in_bounded_time() -> None:
    async def firehose(up: Upstream, r: asyncio.StreamReader, w: asyncio.StreamWriter, body: bytes) -> None:
        w.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n")
        piece = b"data: " + b"x" * 65000 + b"\n\n"
        with contextlib.suppress(ConnectionError):
            for _ in range(2000):  # ~130 MB: far more than every socket buffer on the way
                w.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                await w.drain()
        up.hung_up.set()

    async with proxied(firehose, limits=Limits(read=1.0, write=1.0)) as (proxy, (up,)):
        _, w = await raw_request(proxy.port)  # never reads a byte of the answer
        await asyncio.wait_for(up.hung_up.wait(), 10)
        w.close()


async def test_aclose_leaves_no_task_running_and_closes_every_connection() -> None:
    async def hold(up: Upstream, r: asyncio.StreamReader, w: asyncio.StreamWriter, body: bytes) -> None:
        await r.read()  # until the proxy lets go

    ups = [await Upstream("u0", hold).start()]
    proxy = RoundRobinProxy([("127.0.0.1", ups[0].port)])
    await proxy.start()
    before = asyncio.all_tasks()
    busy_r, busy_w = await raw_request(proxy.port)  # mid-relay
    idle_r, idle_w = await asyncio.open_connection("127.0.0.1", proxy.port)  # no request yet
    half_r, half_w = await asyncio.open_connection("127.0.0.1", proxy.port)
    half_w.write(b"POST /mcp HTTP/1.1\r\ncontent-length: 10\r\n\r\n{")  # a body still arriving
    await asyncio.sleep(0.3)
    await asyncio.wait_for(proxy.aclose(), 10)
    await asyncio.sleep(0)
    assert {t for t in asyncio.all_tasks() - before if not t.done()} == set()
    for r in (busy_r, idle_r, half_r):
        assert await asyncio.wait_for(r.read(), 5) == b""
    for w in (busy_w, idle_w, half_w):
        w.close()
    await ups[0].stop()
