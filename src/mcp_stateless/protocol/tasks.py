"""Wire constants of the Tasks extension, shared by the server-side runtime and the client."""

from __future__ import annotations

from typing import Literal

EXTENSION_ID = "io.modelcontextprotocol/tasks"
TaskStatus = Literal["working", "input_required", "completed", "failed", "cancelled"]
TERMINAL: frozenset[str] = frozenset({"completed", "failed", "cancelled"})

__all__ = ["EXTENSION_ID", "TERMINAL", "TaskStatus"]
