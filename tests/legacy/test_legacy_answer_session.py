"""A 2025 server->client request is answered only from the session that was asked: another session of the
*same* principal (which passes every principal check) cannot deliver the answer, nor can it be answered twice."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any

import httpx

from helpers import open_legacy_session
from mcp_stateless import App, Context
from mcp_stateless.server.legacy import LegacyServer


def _app() -> App:
    app = App("answer-session-tests")

    @app.tool()
    async def ask_name(ctx: Context) -> str:
        got = await ctx.elicit("Your name?", {"type": "object", "properties": {"name": {"type": "string"}}})
        return f"Hello, {got.content['name'] if got.content else '?'}"

    return app


def test_an_answer_from_another_session_of_the_same_principal_is_not_delivered(served: Callable[..., Any]) -> None:
    app = _app()
    s = served(app, legacy=LegacyServer(app))
    asked, other = (open_legacy_session(s.url, {"elicitation": {}}, initialized=True) for _ in range(2))
    call = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "ask_name", "arguments": {}}}
    statuses: list[tuple[int, Any]] = []
    final: list[dict[str, Any]] = []

    def answer(m: dict[str, Any], headers: dict[str, str], name: str) -> None:
        reply = {"jsonrpc": "2.0", "id": m["id"], "result": {"action": "accept", "content": {"name": name}}}
        r = httpx.post(s.url, json=reply, headers=headers)
        statuses.append((r.status_code, r.json()["error"]["code"] if r.content else None))

    with httpx.stream("POST", s.url, json=call, headers=asked, timeout=15) as stream:
        assert stream.status_code == 200
        for line in stream.iter_lines():
            if not line.startswith("data:") or not line[5:].strip():
                continue
            m = json.loads(line[5:])
            if m.get("method") == "elicitation/create":
                # answered off the stream's thread, as a client would, so the stream keeps being read
                def deliver(m: dict[str, Any] = m) -> None:
                    answer(m, other, "Mallory")
                    answer(m, asked, "Bo")
                    answer(m, asked, "Twice")

                t = threading.Thread(target=deliver)
                t.start()
                t.join(10)
            elif m.get("id") == 7:
                final.append(m)
                break
    assert statuses == [(400, -32600), (202, None), (400, -32600)]
    assert final[0]["result"]["content"] == [{"type": "text", "text": "Hello, Bo"}]
