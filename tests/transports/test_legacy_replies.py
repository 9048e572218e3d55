"""The HTTP leg says each outcome of a 2025-era exchange with one status (the branch never picks one):
each `LegacyOutcome` written through `LegacyLeg`, its status, body, headers and counter checked."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable, Mapping
from typing import Any

import orjson
import pytest

from mcp_stateless.protocol.endpoint import (
    LegacyCounters,
    LegacyItem,
    LegacyOutcome,
    LegacyReply,
    StdioSession,
)
from mcp_stateless.protocol.principal import ANONYMOUS, AnonymousAuthenticator, Principal
from mcp_stateless.transports.http.guards import Authentication
from mcp_stateless.transports.http.legacy import LegacyLeg

# Written out here, not read from the transport: the test fails when the transport's table changes.
EXPECTED = {
    LegacyOutcome.OK: 200,
    LegacyOutcome.ACCEPTED: 202,
    LegacyOutcome.BAD_REQUEST: 400,
    LegacyOutcome.INSUFFICIENT_SCOPE: 403,
    LegacyOutcome.UNKNOWN_SESSION: 404,
    LegacyOutcome.NOT_ACCEPTABLE: 406,
    LegacyOutcome.TOO_MANY: 429,
    LegacyOutcome.FAILED: 500,
}
PING = {"jsonrpc": "2.0", "id": 7, "method": "ping"}
ERROR = {"jsonrpc": "2.0", "id": 7, "error": {"code": -32600, "message": "no"}}


class OneReply:
    """A 2025 branch that answers every exchange with `reply` (the leg's side of the seam is under test)."""

    versions = ("2025-11-25",)

    def __init__(self, reply: LegacyReply) -> None:
        self.reply = reply
        self.counted: list[tuple[str, int]] = []

    async def exchange(self, http_method: str, message: Any, headers: Mapping[str, str],
                       principal: Principal, can_sse: bool) -> LegacyReply:
        return self.reply

    async def sse_open(self, principal: Principal) -> tuple[str, AsyncGenerator[LegacyItem, None]]:
        raise AssertionError("not used")

    async def sse_post(self, channel: str, message: Any, headers: Mapping[str, str],
                       principal: Principal) -> LegacyReply:
        return self.reply

    def count(self, kind: str, status: int) -> None:
        self.counted.append((kind, status))

    def counter_snapshot(self) -> LegacyCounters:
        return LegacyCounters()

    def stdio_session(self, principal: Principal, write: Callable[[dict[str, Any]], None]) -> StdioSession:
        raise AssertionError("not used")


async def _write(reply: LegacyReply, *, sse_post: bool = False) -> tuple[int, dict[str, str], Any, OneReply]:
    branch = OneReply(reply)
    leg = LegacyLeg(branch, Authentication(AnonymousAuthenticator()), legacy_sse=True, legacy_until=None,
                    modern_versions=lambda: [], path="/mcp")
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.disconnect"}

    async def send(message: Mapping[str, Any]) -> None:
        sent.append(dict(message))

    headers = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
    if sse_post:
        await leg.sse_post("channel", PING, headers, ANONYMOUS, receive, send)
    else:
        await leg.exchange("POST", PING, headers, receive, send, ANONYMOUS, True)
    body = b"".join(m.get("body", b"") for m in sent[1:])
    return (sent[0]["status"], {k.decode(): v.decode() for k, v in sent[0]["headers"]},
            orjson.loads(body) if body else None, branch)


def test_every_outcome_has_a_status_here() -> None:
    assert set(EXPECTED) == set(LegacyOutcome)


@pytest.mark.parametrize(("kind", "status"), EXPECTED.items(), ids=[k.value for k in EXPECTED])
async def test_an_outcome_is_written_with_its_status_and_counted_with_it(kind: LegacyOutcome, status: int) -> None:
    message = ERROR if status >= 400 else {"jsonrpc": "2.0", "id": 7, "result": {}}
    got, headers, body, branch = await _write(LegacyReply(kind, message))
    assert (got, body, headers["content-type"]) == (status, message, "application/json")
    assert branch.counted == [("request", status)]


@pytest.mark.parametrize(("kind", "status"), EXPECTED.items(), ids=[k.value for k in EXPECTED])
async def test_a_2024_channel_post_is_written_with_its_outcomes_status(kind: LegacyOutcome, status: int) -> None:
    got, headers, body, branch = await _write(LegacyReply(kind), sse_post=True)
    assert (got, body, "content-type" in headers) == (status, None, False)
    assert branch.counted == [("request", status)]


async def test_an_outcomes_details_become_their_headers() -> None:
    _, headers, _, _ = await _write(LegacyReply(LegacyOutcome.OK, {"jsonrpc": "2.0", "id": 7, "result": {}},
                                                session_id="sealed-id"))
    assert headers["mcp-session-id"] == "sealed-id"
    status, headers, _, _ = await _write(LegacyReply(LegacyOutcome.TOO_MANY, ERROR, retry_after_s=60))
    assert (status, headers["Retry-After"]) == (429, "60")
    status, headers, _, _ = await _write(LegacyReply(LegacyOutcome.INSUFFICIENT_SCOPE, ERROR,
                                                     scopes=frozenset({"b", "a"})))
    assert (status, headers["www-authenticate"]) == (403, 'Bearer error="insufficient_scope", scope="a b"')
    _, headers, _, _ = await _write(LegacyReply(LegacyOutcome.OK, ERROR))
    assert not {"mcp-session-id", "Retry-After", "www-authenticate"} & set(headers)
