"""The heap is settled once a transport owns the process (HTTP lifespan start-up, stdio before its first
line), and the Call/Reply/Principal fast paths stay immutable and bounded."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from mcp_stateless.protocol.endpoint import Call, Reply
from mcp_stateless.protocol.principal import RESOLVED_CACHE, Principal, ResolverAuthenticator

ROOT = Path(__file__).resolve().parents[2]

PROBE = """
import asyncio, gc
from mcp_stateless import App, HttpTransport

async def main():
    before = gc.get_threshold()[0], gc.get_freeze_count()
    t = HttpTransport(App("heap"))
    msgs = [{"type": "lifespan.startup"}]
    sent = []
    async def receive():
        if msgs:
            return msgs.pop()
        await asyncio.sleep(3600)
    async def send(m):
        sent.append(m["type"])
    task = asyncio.ensure_future(t({"type": "lifespan"}, receive, send))
    while not sent:
        await asyncio.sleep(0.01)
    task.cancel()
    print(before, (gc.get_threshold()[0], gc.get_freeze_count() > 0), sent)

asyncio.run(main())
"""


@pytest.mark.slow
def test_lifespan_start_up_settles_the_heap() -> None:
    r = subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, capture_output=True, text=True, timeout=60,
                       stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "(700, 0) (10000, True) ['lifespan.startup.complete']"


def test_call_and_reply_stay_immutable() -> None:
    call = Call(Principal("p"), "http")
    with pytest.raises(AttributeError):
        call.principal = Principal("q")  # type: ignore[misc]
    reply = Reply({"jsonrpc": "2.0", "id": 1, "result": {}})
    with pytest.raises(AttributeError):
        reply.error_code = -1  # type: ignore[misc]


def test_a_resolver_hands_the_same_principal_back_and_keeps_a_bounded_number() -> None:
    auth = ResolverAuthenticator(lambda headers: (headers or {}).get("authorization", "anonymous"))
    first = auth.principal_for({"authorization": "alice"})
    assert first == Principal("alice") and auth.principal_for({"authorization": "alice"}) is first
    assert auth.principal_for(None) == Principal("anonymous")
    for i in range(RESOLVED_CACHE + 10):
        assert auth.principal_for({"authorization": f"u{i}"}).id == f"u{i}"
    assert len(auth._known) <= RESOLVED_CACHE
