"""stdio transport, for real: `mcp-stateless serve tests/apps/stdio_app.py:app --stdio` as a subprocess.

Every byte the server writes to stdout must be one compact JSON-RPC message per line; everything else
(prints in tools, import-time prints, logs) goes to stderr.
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import Any

import orjson
import pytest

from services import CLI

# Every test here starts a process (a server, a client, a tool): the fast lane leaves them out.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
APP = "tests/apps/stdio_app.py:app"
PV = "2026-07-28"


def meta(caps: dict[str, Any] | None = None, version: str = PV, **extra: Any) -> dict[str, Any]:
    return {"io.modelcontextprotocol/protocolVersion": version,
            "io.modelcontextprotocol/clientCapabilities": caps or {}, **extra}


def call(rid: Any, tool: str, args: dict[str, Any] | None = None, **meta_kw: Any) -> dict[str, Any]:
    caps = meta_kw.pop("caps", None)
    version = meta_kw.pop("version", PV)
    params: dict[str, Any] = {"name": tool, "arguments": args or {}, "_meta": meta(caps, version, **meta_kw)}
    return {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params}


def listen(rid: Any, **filt: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "method": "subscriptions/listen",
            "params": {"notifications": filt, "_meta": meta()}}


def cancel(rid: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": rid}}


def text(msg: dict[str, Any]) -> str:
    return "".join(c["text"] for c in msg["result"]["content"] if c["type"] == "text")


class StdioProc:
    """One server process; every stdout line is parsed (a non-JSON line fails the test)."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.lines: list[bytes] = []
        self.queue: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
        self.reader = asyncio.get_running_loop().create_task(self._read())

    @classmethod
    async def start(cls, app: str = APP, *extra: str) -> StdioProc:
        proc = await asyncio.create_subprocess_exec(
            str(CLI), "serve", app, "--stdio", *extra, cwd=ROOT,
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        return cls(proc)

    async def _read(self) -> None:
        assert self.proc.stdout is not None
        while line := await self.proc.stdout.readline():
            self.lines.append(line)
            assert line.endswith(b"\n")
            msg = orjson.loads(line)  # raises on anything that is not JSON
            assert isinstance(msg, dict) and msg.get("jsonrpc") == "2.0", line
            await self.queue.put(msg)
        await self.queue.put(None)

    async def send(self, *msgs: dict[str, Any] | bytes) -> None:
        assert self.proc.stdin is not None
        data = b"".join(m if isinstance(m, bytes) else orjson.dumps(m) + b"\n" for m in msgs)
        self.proc.stdin.write(data)
        await self.proc.stdin.drain()

    async def recv(self, timeout: float = 10) -> dict[str, Any]:
        msg = await asyncio.wait_for(self.queue.get(), timeout)
        assert msg is not None, "server closed stdout"
        return msg

    async def response(self, rid: Any, timeout: float = 10) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """The response to `rid`, and every other message that arrived before it."""
        others: list[dict[str, Any]] = []
        deadline = time.monotonic() + timeout
        while True:
            msg = await self.recv(max(0.01, deadline - time.monotonic()))
            if msg.get("id") == rid and ("result" in msg or "error" in msg):
                return msg, others
            others.append(msg)

    async def quiet(self, seconds: float) -> list[dict[str, Any]]:
        """Everything that arrives within `seconds`."""
        got: list[dict[str, Any]] = []
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            try:
                msg = await asyncio.wait_for(self.queue.get(), left)
            except TimeoutError:
                break
            if msg is None:
                break
            got.append(msg)
        return got

    async def close(self, timeout: float = 5) -> float:
        """Close stdin; returns how long the process took to exit."""
        assert self.proc.stdin is not None
        t0 = time.monotonic()
        self.proc.stdin.close()
        await asyncio.wait_for(self.proc.wait(), timeout)
        elapsed = time.monotonic() - t0
        await asyncio.wait_for(self.reader, 5)
        return elapsed

    async def stderr(self) -> str:
        assert self.proc.stderr is not None
        return (await asyncio.wait_for(self.proc.stderr.read(), 5)).decode()

    def kill(self) -> None:
        if self.proc.returncode is None:
            self.proc.kill()
        self.reader.cancel()


@pytest.fixture
async def server() -> Any:
    procs: list[StdioProc] = []

    async def start(*args: str) -> StdioProc:
        p = await StdioProc.start(*args)
        procs.append(p)
        return p

    yield start
    for p in procs:
        p.kill()
        await p.proc.wait()


async def test_32_requests_in_flight_fast_answers_never_wait_for_slow_ones(server: Any) -> None:
    s = await server()
    slow = [call(f"slow-{i}", "slow" if i % 2 else "slow_sync", {"seconds": 1.5}) for i in range(8)]
    fast = [call(i, "fast", {"n": i}) for i in range(24)]
    batch = [m for pair in zip(slow, fast[:8], strict=True) for m in pair] + fast[8:]
    assert len(batch) == 32
    t0 = time.monotonic()
    await s.send(*batch)  # all 32 written before anything is read: all in flight at once
    answers = [await s.recv() for _ in range(32)]
    elapsed = time.monotonic() - t0
    order = [a["id"] for a in answers]
    first_slow = min(i for i, rid in enumerate(order) if isinstance(rid, str))
    assert all(isinstance(rid, int) for rid in order[:first_slow]) and first_slow == 24, order
    assert {a["id"]: text(a) for a in answers[:24]} == {i: str(i) for i in range(24)}
    assert sorted(order[24:]) == sorted(m["id"] for m in slow)
    assert all(text(a) == "slept 1.5" for a in answers[24:])
    assert elapsed < 4.5, f"8 slow calls of 1.5 s took {elapsed:.2f} s: not concurrent"
    # compact, UTF-8, one message per line
    assert all(b": " not in line and b", " not in line for line in s.lines)
    assert await s.close() < 2


async def test_cancelled_request_produces_no_further_output(server: Any) -> None:
    s = await server()
    await s.send(call("c1", "cancellable", progressToken="tok"))
    progress = [await s.recv(), await s.recv()]
    assert [p["method"] for p in progress] == ["notifications/progress"] * 2
    assert [p["params"]["progress"] for p in progress] == [1, 2]
    await s.send(cancel("c1"), call("c2", "slow_sync", {"seconds": 0.3}))
    await s.send(cancel("c2"), call("after", "fast", {"n": 7}))
    # "after" is answered; nothing at all is written for c1 or c2 from the cancel on
    msg, before = await s.response("after")
    assert text(msg) == "7"
    rest = before + await s.quiet(0.8)
    assert all(m.get("params", {}).get("progressToken") != "tok" or m["params"]["progress"] <= 3
               for m in rest)
    late_progress = [m for m in await s.quiet(0.3) if m.get("method") == "notifications/progress"]
    assert late_progress == []
    assert not [m for m in rest if m.get("id") in ("c1", "c2")]
    # the id is free again once cancelled, and cancelling an unknown or finished id is harmless
    await s.send(cancel("nope"), cancel("after"), call("c1", "fast", {"n": 1}))
    msg, _ = await s.response("c1")
    assert text(msg) == "1"
    assert await s.close() < 2


async def test_stray_prints_go_to_stderr_not_the_stream(server: Any) -> None:
    s = await server()
    await s.send(call(1, "noisy", {"text": "still clean ✓"}), call(2, "fast", {"n": 2}))
    got = {m["id"]: m for m in [await s.recv(), await s.recv()]}
    assert text(got[1]) == "still clean ✓"
    assert text(got[2]) == "2"
    assert "✓".encode() in b"".join(s.lines)  # raw UTF-8, not \\u escapes
    assert await s.close() < 2
    err = await s.stderr()
    for stray in ("stray output while the app module is imported", "print() from a tool",
                  "sys.stdout.write from a tool", "os.write(1) from a tool"):
        assert stray in err
    assert len(s.lines) == 2


async def test_malformed_lines_get_errors_and_serving_goes_on(server: Any) -> None:
    s = await server()
    await s.send(b"this is not json\n")
    m = await s.recv()
    assert m["error"]["code"] == -32700 and m.get("id") is None
    await s.send(b"\xff\xfe{\x00\n")
    assert (await s.recv())["error"]["code"] == -32700
    await s.send(b"[]\n")
    assert (await s.recv())["error"]["code"] == -32600
    await s.send(b"42\n")
    assert (await s.recv())["error"]["code"] == -32600
    await s.send({"jsonrpc": "1.0", "id": 5, "method": "tools/list", "params": {"_meta": meta()}})
    m = await s.recv()
    assert m["error"]["code"] == -32600 and m["id"] == 5
    await s.send({"jsonrpc": "2.0", "id": 6, "method": "tools/list"})  # no _meta
    m = await s.recv()
    assert m["error"]["code"] == -32602 and m["id"] == 6
    await s.send({"jsonrpc": "2.0", "id": 7, "method": "no/such", "params": {"_meta": meta()}})
    m = await s.recv()
    assert m["error"]["code"] == -32601 and m["id"] == 7
    await s.send(b"\n   \n")  # blank lines are ignored
    await s.send(call(8, "fast", {"n": 8}))
    m = await s.recv()
    assert m["id"] == 8 and text(m) == "8"
    # a duplicate id while the first is in flight is refused; the first is still answered
    await s.send(call(9, "slow", {"seconds": 0.3}), call(9, "fast", {"n": 9}))
    dup = await s.recv()
    assert dup["id"] == 9 and dup["error"]["code"] == -32600
    m = await s.recv()
    assert m["id"] == 9 and text(m) == "slept 0.3"
    assert await s.close() < 2


async def test_eof_exits_promptly_even_with_work_in_flight(server: Any) -> None:
    s = await server()
    await s.send(listen("L", toolsListChanged=True), call("blocked", "slow_sync", {"seconds": 30}),
                 call("sleeping", "slow", {"seconds": 30}))
    ack = await s.recv()
    assert ack["method"] == "notifications/subscriptions/acknowledged"
    elapsed = await s.close()
    assert elapsed < 2, f"exit took {elapsed:.2f} s after EOF"
    assert s.proc.returncode == 0
    # the open listen got its final result before the process went
    final = [orjson.loads(line) for line in s.lines][-1]
    assert final == {"jsonrpc": "2.0", "id": "L", "result": {
        "resultType": "complete", "_meta": {"io.modelcontextprotocol/subscriptionId": "L"}}}


async def test_listen_over_stdio_acknowledged_tagged_cancelled(server: Any) -> None:
    s = await server()
    await s.send(listen(1, toolsListChanged=True, promptsListChanged=True),
                 listen("two", toolsListChanged=True))
    acks = {m["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"]: m for m in [await s.recv(),
                                                                                        await s.recv()]}
    assert set(acks) == {1, "two"}
    assert all(a["method"] == "notifications/subscriptions/acknowledged" for a in acks.values())
    assert acks[1]["params"]["notifications"] == {"toolsListChanged": True}  # no prompts here: not honoured
    await s.send(call("t1", "toggle"))
    _, before = await s.response("t1")
    events = before + await s.quiet(0.3)
    changed = sorted((m["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] for m in events
                      if m.get("method") == "notifications/tools/list_changed"), key=str)
    assert changed == [1, "two"]
    # cancel one listen: nothing more for it, not even a result; the other still gets events
    await s.send(cancel(1), call("t2", "toggle"))
    _, before = await s.response("t2")
    events = before + await s.quiet(0.3)
    assert [m["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] for m in events
            if m.get("method") == "notifications/tools/list_changed"] == ["two"]
    assert not [m for m in events if m.get("id") == 1]
    # a bad filter is an error for that listen only
    await s.send({"jsonrpc": "2.0", "id": "bad", "method": "subscriptions/listen",
                  "params": {"notifications": {"toolsListChanged": "yes"}, "_meta": meta()}})
    m = await s.recv()
    assert m["id"] == "bad" and m["error"]["code"] == -32602
    # EOF ends the remaining listen with its result
    await s.close()
    last = orjson.loads(s.lines[-1])
    assert last["id"] == "two"
    assert last["result"]["_meta"] == {"io.modelcontextprotocol/subscriptionId": "two"}


async def test_progress_and_logs_for_in_flight_requests(server: Any) -> None:
    s = await server()
    level = {"io.modelcontextprotocol/logLevel": "info"}
    await s.send(call("a", "chatty", {"steps": 3}, progressToken=99, **level),
                 call("b", "chatty", {"steps": 3}))
    msgs: dict[str, tuple[dict[str, Any], list[dict[str, Any]]]] = {}
    seen: list[dict[str, Any]] = []
    while len(msgs) < 2:
        m = await s.recv()
        if "id" in m:
            msgs[m["id"]] = (m, list(seen))
        else:
            seen.append(m)
    assert text(msgs["a"][0]) == text(msgs["b"][0]) == "chatty done"
    notes_a = msgs["a"][1]
    assert [n["params"]["progress"] for n in notes_a if n["method"] == "notifications/progress"] == [1, 2, 3]
    assert all(n["params"]["progressToken"] == 99 for n in notes_a if n["method"] == "notifications/progress")
    assert [n["params"]["data"] for n in notes_a if n["method"] == "notifications/message"] == [
        "did step 1", "did step 2", "did step 3"]
    assert len(seen) == 6  # request b asked for neither: nothing for it
    assert await s.close() < 2


async def test_interleaved_requests_answered_on_their_own_terms(server: Any) -> None:
    s = await server()
    elicit = {"elicitation": {}}
    await s.send(
        call("new", "whoami", caps=elicit),
        call("old", "whoami", version="2025-06-18"),
        call("none", "whoami"),
        call("greet-no-cap", "greet"),
        call("greet-cap", "greet", caps=elicit),
        call("future", "whoami", version="2099-01-01"),
        {"jsonrpc": "2.0", "id": "init", "method": "initialize",
         "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                    "clientInfo": {"name": "x", "version": "1"}}},
        {"jsonrpc": "2.0", "id": "disc", "method": "server/discover", "params": {"_meta": meta()}},
    )
    got = {}
    for _ in range(8):
        m = await s.recv()
        got[m["id"]] = m
    assert text(got["new"]) == "2026-07-28 caps=elicitation"
    assert text(got["none"]) == "2026-07-28 caps=none"
    for rid, requested in (("old", "2025-06-18"), ("future", "2099-01-01")):
        assert got[rid]["error"]["code"] == -32022
        assert got[rid]["error"]["data"] == {"supported": ["2026-07-28"], "requested": requested}
    assert got["greet-no-cap"]["error"]["code"] == -32021
    r = got["greet-cap"]["result"]
    assert r["resultType"] == "input_required"
    assert r["inputRequests"]["name"]["method"] == "elicitation/create"
    assert got["init"]["error"]["code"] == -32601
    assert got["disc"]["result"]["supportedVersions"] == ["2026-07-28"]
    # the MRTR retry, with the sealed state echoed back, completes
    retry = call("greet-2", "greet", caps=elicit)
    retry["params"]["inputResponses"] = {"name": {"action": "accept", "content": {"name": "Alice"}}}
    retry["params"]["requestState"] = r["requestState"]
    await s.send(retry)
    m = await s.recv()
    assert m["id"] == "greet-2" and text(m) == "Hello, Alice!"
    assert await s.close() < 2
