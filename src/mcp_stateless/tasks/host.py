"""What `TaskRuntime` needs from the application whose tools it runs: the narrow host interface.

The runtime knows task records, leases and the store; the host knows tools, contexts and where change
events go. Keeping the runtime on this side of the line is what lets it run without the server.
"""

from __future__ import annotations

from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any, Protocol

from .model import TaskRecord


@dataclass(frozen=True, slots=True)
class Completed:
    """The tool finished: its CallToolResult (an `isError` one included), without `resultType`."""

    result: dict[str, Any]


@dataclass(frozen=True, slots=True)
class NeedsInput:
    """The tool stopped to ask: the wire form of each input request, by key."""

    requests: dict[str, dict[str, Any]]


TaskOutcome = Completed | NeedsInput


class ToolHost(Protocol):
    def retry_safe(self, tool: str) -> bool:
        """Whether `tool` is still registered and may be re-run after its instance was lost."""
        ...

    def run(self, rec: TaskRecord) -> Coroutine[Any, Any, TaskOutcome]:
        """Run the record's tool from the top with its stored arguments and answers. Raises McpError
        (protocol failure, or the tool is gone) and CancelledError."""
        ...

    async def publish(self, task_id: str) -> None:
        """Tell listeners (on every instance) that this task changed."""
        ...
