"""Across several MRTR rounds the Client sends back exactly the latest round's `requestState` (never an older
one, and none when the latest round gave none) with only that round's answers."""

from __future__ import annotations

from typing import Any

from mcp_stateless import Client

from .conftest import ok


def ask(key: str) -> dict[str, Any]:
    return {key: {"method": "elicitation/create", "params": {"message": f"{key}?", "requestedSchema": {
        "type": "object", "properties": {"confirmed": {"type": "boolean"}}}}}}


def elicit(params: dict[str, Any]) -> dict[str, Any]:
    return {"action": "accept", "content": {"confirmed": params["message"] == "b?"}}


# round n answers with: (requestState or None, the key it asks for); the fourth call completes
ROUNDS = [("state-1", "a"), ("state-2", "b"), (None, "c")]


async def test_each_retry_carries_the_latest_state_and_only_the_latest_answers(scripted: Any) -> None:
    def handler(msg: dict[str, Any], h: dict[str, str]) -> Any:
        if msg["method"] == "tools/list":
            return ok(msg["id"], {"tools": [], "resultType": "complete"})
        n = sum(1 for m, _ in s.requests if m["method"] == "tools/call") - 1
        if n < len(ROUNDS):
            state, key = ROUNDS[n]
            result: dict[str, Any] = {"resultType": "input_required", "inputRequests": ask(key)}
            if state is not None:
                result["requestState"] = state
            return ok(msg["id"], result)
        return ok(msg["id"], {"resultType": "complete", "content": [{"type": "text", "text": "done"}]})

    s = await scripted(handler)
    async with Client(s.url, version="2026-07-28", elicitation=elicit) as c:
        r = await c.call_tool("multi", {"x": 1})
    assert r["content"] == [{"type": "text", "text": "done"}]
    calls = [m["params"] for m, _ in s.requests if m["method"] == "tools/call"]
    assert len(calls) == 4
    assert [p.get("requestState") for p in calls] == [None, "state-1", "state-2", None]
    assert [p.get("inputResponses") for p in calls] == [
        None,
        {"a": {"action": "accept", "content": {"confirmed": False}}},
        {"b": {"action": "accept", "content": {"confirmed": True}}},
        {"c": {"action": "accept", "content": {"confirmed": False}}},
    ]
    assert all(p["arguments"] == {"x": 1} and p["name"] == "multi" for p in calls)
