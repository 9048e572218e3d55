"""Server->client requests of legacy sessions, answered on any instance.

A request goes out on the stream of the call that needs it with an id of its own; a record under that
id (bound to the session, with a TTL) says someone waits for it. The client may POST the response to
any instance: that instance checks the record belongs to the same session, deletes it (so an answer is
taken once) and publishes the response on the inbox topic the id names: one topic per process, subscribed
once (`Inbox`), because a subscription per request costs a shard subscription's confirmation on every ask on
a Redis Cluster, which under load lapsed before the client could answer.
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
from ...state import Bus, RecordStore, TopicSubscription
from .sessions import SealedSession

PENDING_NS = "legacy-pending"
ID_PREFIX = "mcps-"  # ids of our requests, so a client's answer is recognisable before any lookup
_INBOX_SEP = "."  # between the inbox's name and the request's own part (neither holds one: url-safe base64)


def reply_topic(request_id: str) -> str:
    """Where an id without an inbox (minted by an instance of an earlier release) is answered."""
    return f"legacy-reply:{request_id}"


def inbox_topic(name: str) -> str:
    return f"legacy-inbox:{name}"


def _token(n: int) -> str:
    return base64.urlsafe_b64encode(os.urandom(n)).decode("ascii")


def answer_topic(request_id: str) -> str:
    """The topic the waiting process reads for `request_id`'s answer."""
    name, sep, _ = request_id[len(ID_PREFIX):].partition(_INBOX_SEP)
    return inbox_topic(name) if sep else reply_topic(request_id)


class Inbox:
    """This process's answers to its legacy requests, read from one topic and handed to each waiter by id."""

    def __init__(self, bus: Bus) -> None:
        self.bus = bus
        self.name = _token(9)
        self.loop = asyncio.get_running_loop()
        self._waiters: dict[str, asyncio.Future[bytes]] = {}
        self._sub: TopicSubscription | None = None
        self._reader: asyncio.Task[None] | None = None

    def mint(self) -> str:
        return f"{ID_PREFIX}{self.name}{_INBOX_SEP}{_token(12)}"

    async def expect(self, rid: str) -> asyncio.Future[bytes]:
        """A future for `rid`'s answer, once an answer published from now on is sure to reach it."""
        if self._sub is None:
            self._sub = self.bus.subscribe(inbox_topic(self.name))
            self._reader = asyncio.create_task(self._read(self._sub), name=f"legacy-inbox-{self.name}")
        sub = self._sub
        await sub.ready()
        future = self.loop.create_future()
        self._waiters[rid] = future
        return future

    def forget(self, rid: str) -> None:
        self._waiters.pop(rid, None)

    async def _read(self, sub: TopicSubscription) -> None:
        try:
            while True:
                payload = await sub.get(None)
                if payload is None:
                    continue
                try:
                    rid = orjson.loads(payload).get("id")
                except (orjson.JSONDecodeError, AttributeError):
                    continue  # not ours: the topic is named by a random token, but the bus is shared
                future = self._waiters.pop(rid, None) if isinstance(rid, str) else None
                if future is not None and not future.done():
                    future.set_result(payload)
        except Exception as exc:  # the store went away: every waiter hears it, the next ask subscribes again
            waiters, self._waiters = self._waiters, {}
            for future in waiters.values():
                if not future.done():
                    future.set_exception(exc)
        finally:
            sub.close()
            if self._sub is sub:
                self._sub = None


class Peer:
    """Asks legacy clients and routes their answers."""

    def __init__(self, records: RecordStore, bus: Bus, timeout_s: float, inbox: Inbox) -> None:
        self.records = records
        self.bus = bus
        self.timeout_s = timeout_s
        self.inbox = inbox

    async def ask(self, session: SealedSession, method: str, params: dict[str, Any] | None,
                  emit: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
        """Send one request through `emit` and return the client's result (its error raises McpError)."""
        rid = self.inbox.mint()
        try:
            answered = await self.inbox.expect(rid)
            await self.records.create(PENDING_NS, rid, session.key.encode(), expires_at=time.time() + self.timeout_s)
            message: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
            if params is not None:
                message["params"] = params
            emit(message)
            payload = await asyncio.wait_for(answered, self.timeout_s)
        except TimeoutError:
            await self.records.delete(PENDING_NS, rid)
            raise McpError(errors.INTERNAL_ERROR,
                           f"the client did not answer {method} within {self.timeout_s:g}s") from None
        finally:
            self.inbox.forget(rid)
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
        await self.bus.publish(answer_topic(rid), orjson.dumps({"id": rid, **body}))
        return True


async def ask_all(peer: Peer, session: SealedSession, requests: dict[str, Any],
                  emit: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    """Every `inputRequests` entry of an MRTR round as a real request, concurrently: their answers by key."""
    keys = list(requests)
    results = await asyncio.gather(*(
        peer.ask(session, requests[k].get("method", ""), requests[k].get("params"), emit) for k in keys))
    return dict(zip(keys, results, strict=True))
