"""Client side of the Tasks extension: a `TaskHandle` the caller can await.

Awaiting polls `tasks/get` at the server's `pollIntervalMs`, answers the task's input requests through the
same handlers as MRTR (each key once, however many polls show it), and returns the final CallToolResult.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Generator, Mapping
from typing import Any, Protocol

from ..protocol.tasks import TERMINAL
from .errors import ServerError, TaskCancelled
from .handlers import Handlers

__all__ = ["Requester", "TaskCancelled", "TaskHandle"]


class Requester(Protocol):
    """What a task handle needs to reach the server (a `Client`)."""

    async def request(
        self, method: str, params: Mapping[str, Any] | None = None, *, safe: bool | None = None
    ) -> dict[str, Any]: ...


class TaskHandle:
    """A tool call that may run as a durable task. `await handle` gives the CallToolResult.

    A failed task raises the task's JSON-RPC error as `McpError`; a cancelled one raises `TaskCancelled`.
    When the server answered synchronously, the handle is already complete (`task_id` is None).
    """

    def __init__(self, client: Requester, handlers: Handlers, first: dict[str, Any]) -> None:
        self._client = client
        self._handlers = handlers
        self._answered: set[str] = set()
        if first.get("resultType") == "task":
            self.task_id: str | None = first["taskId"]
            self.task: dict[str, Any] = dict(first)
            self._result: dict[str, Any] | None = None
        else:
            self.task_id = None
            self.task = {}
            self._result = first

    @property
    def status(self) -> str:
        return "completed" if self.task_id is None else str(self.task.get("status"))

    @property
    def poll_interval_s(self) -> float:
        ms = self.task.get("pollIntervalMs")
        return min(max((ms if isinstance(ms, int) and ms > 0 else 1000) / 1000.0, 0.02), 30.0)

    async def refresh(self) -> dict[str, Any]:
        """One `tasks/get`: the DetailedTask."""
        if self.task_id is None:
            return {"status": "completed", "result": self._result}
        self.task = await self._client.request("tasks/get", {"taskId": self.task_id}, safe=True)
        return self.task

    async def cancel(self) -> None:
        """Ask the server to cancel (cooperative: the task may still finish)."""
        if self.task_id is not None:
            await self._client.request("tasks/cancel", {"taskId": self.task_id}, safe=True)

    async def _answer_inputs(self, requests: Any) -> None:
        if not isinstance(requests, dict):
            return
        fresh = {k: v for k, v in requests.items() if k not in self._answered}
        if not fresh:
            return
        answers = await self._handlers.fulfil(fresh)
        self._answered.update(fresh)  # keys are never reused by the server: answer each once
        await self._client.request("tasks/update", {"taskId": self.task_id, "inputResponses": answers}, safe=True)

    async def wait(self, timeout: float | None = None) -> dict[str, Any]:
        if self._result is not None:
            return self._result
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            status = self.task.get("status")
            if status == "input_required":
                await self._answer_inputs(self.task.get("inputRequests"))
            elif status in TERMINAL:
                return self._outcome()
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError(f"task {self.task_id} still {status} after {timeout}s")
            # honour pollIntervalMs, with a little jitter so many clients don't poll in lockstep
            await asyncio.sleep(self.poll_interval_s * random.uniform(0.9, 1.1))
            await self.refresh()

    def _outcome(self) -> dict[str, Any]:
        status = self.task.get("status")
        if status == "completed":
            result = self.task.get("result")
            self._result = result if isinstance(result, dict) else {"content": []}
            return self._result
        if status == "failed":
            err = self.task.get("error") or {}
            raise ServerError(int(err.get("code", -32603)), str(err.get("message", "task failed")), err.get("data"))
        raise TaskCancelled(f"task {self.task_id} was cancelled")

    def __await__(self) -> Generator[Any, None, dict[str, Any]]:
        return self.wait().__await__()
