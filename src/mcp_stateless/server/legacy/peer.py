"""Server->client requests of legacy sessions, answered on any instance.

A request goes out on the stream of the call that needs it with an id of its own; a record under that
id (bound to the session, with a TTL) says someone waits for it. The client may POST the response to
any instance: that instance checks the record belongs to the same session, deletes it (so an answer is
taken once) and publishes the response on the state bus's topic for the id, which the waiting call reads.
"""

from __future__ import annotations

import asyncio
import base64
import os
import time
from collections.abc import Callable
from typing import Any

import orjson

from ...protocol import errors
from ...protocol.errors import McpError
from ...protocol.legacy import LegacyResponse
from ...state import Bus, RecordStore
from .sessions import SealedSession

PENDING_NS = "legacy-pending"
ID_PREFIX = "mcps-"  # ids of our requests, so a client's answer is recognisable before any lookup


def reply_topic(request_id: str) -> str:
    return f"legacy-reply:{request_id}"


class Peer:
    """Asks legacy clients and routes their answers."""

    def __init__(self, records: RecordStore, bus: Bus, timeout_s: float) -> None:
        self.records = records
        self.bus = bus
        self.timeout_s = timeout_s

    async def ask(self, session: SealedSession, method: str, params: dict[str, Any] | None,
                  emit: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
        """Send one request through `emit` and return the client's result (its error raises McpError)."""
        rid = ID_PREFIX + base64.urlsafe_b64encode(os.urandom(15)).decode("ascii")
        sub = self.bus.subscribe(reply_topic(rid))
        try:
            await sub.ready()
            await self.records.create(PENDING_NS, rid, session.key.encode(), expires_at=time.time() + self.timeout_s)
            message: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
            if params is not None:
                message["params"] = params
            emit(message)
            payload = await sub.get(self.timeout_s)
        finally:
            sub.close()
        if payload is None:
            await self.records.delete(PENDING_NS, rid)
            raise McpError(errors.INTERNAL_ERROR, f"the client did not answer {method} within {self.timeout_s:g}s")
        answer = orjson.loads(payload)
        error = answer.get("error")
        if error is not None:
            raise McpError(int(error.get("code", errors.INTERNAL_ERROR)),
                           f"the client answered {method} with an error: {error.get('message', '')}",
                           error.get("data"))
        result: dict[str, Any] = answer.get("result") or {}
        return result

    async def answer(self, session: SealedSession, response: LegacyResponse) -> bool:
        """Deliver a client's response; False when nobody (of this session) waits for that id."""
        rid = response.id
        if not isinstance(rid, str) or not rid.startswith(ID_PREFIX):
            return False
        got = await self.records.get(PENDING_NS, rid)
        if got is None or got.data != session.key.encode():
            return False  # unknown, answered already, timed out, or another session's: never delivered
        if not await self.records.delete(PENDING_NS, rid):
            return False  # a concurrent duplicate took it
        body = {"error": response.error} if response.error is not None else {"result": response.result or {}}
        await self.bus.publish(reply_topic(rid), orjson.dumps(body))
        return True


async def ask_all(peer: Peer, session: SealedSession, requests: dict[str, Any],
                  emit: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    """Every `inputRequests` entry of an MRTR round as a real request, concurrently: their answers by key."""
    keys = list(requests)
    results = await asyncio.gather(*(
        peer.ask(session, requests[k].get("method", ""), requests[k].get("params"), emit) for k in keys))
    return dict(zip(keys, results, strict=True))
