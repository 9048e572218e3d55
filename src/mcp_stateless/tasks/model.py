"""The task record kept in a `TaskStore`, and its wire forms (CreateTaskResult, DetailedTask)."""

from __future__ import annotations

import secrets
import time
from dataclasses import asdict, dataclass, field, fields
from datetime import UTC, datetime
from typing import Any

from ..protocol.tasks import EXTENSION_ID, TERMINAL, TaskStatus

__all__ = ["EXTENSION_ID", "TERMINAL", "TaskRecord", "TaskStatus", "iso", "new_task_id"]


def new_task_id() -> str:
    """192 bits from the OS CSPRNG: unguessable, and never derived from anything a client sent."""
    return "tsk_" + secrets.token_urlsafe(24)


def iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{int(ts * 1000) % 1000:03d}Z"


@dataclass(slots=True)
class TaskRecord:
    task_id: str
    principal: str
    tool: str
    arguments: dict[str, Any]
    request_meta: dict[str, Any]  # protocol version, capabilities, client info of the creating request
    created_at: float
    updated_at: float
    ttl_ms: int | None
    poll_interval_ms: int
    status: TaskStatus = "working"
    status_message: str | None = None
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    input_requests: dict[str, Any] = field(default_factory=dict)
    answers: dict[str, Any] = field(default_factory=dict)  # every input response so far, by key
    asked: list[str] = field(default_factory=list)  # every inputRequests key ever issued: never reused
    cancel_requested: bool = False
    lease_owner: str | None = None
    lease_until: float = 0.0
    attempts: int = 0
    version: int = 0
    # The creating caller's scopes, so a run (on any instance, after a restart) sees what the handler saw
    # when the call was made; its claims are not kept (they may hold personal data).
    principal_scopes: list[str] = field(default_factory=list)

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL

    def expires_at(self) -> float | None:
        return None if self.ttl_ms is None else self.created_at + self.ttl_ms / 1000.0

    def expired(self, now: float | None = None) -> bool:
        exp = self.expires_at()
        return exp is not None and (time.time() if now is None else now) >= exp

    def touch(self, status: TaskStatus | None = None, message: str | None = None) -> None:
        if status is not None:
            self.status = status
        if message is not None:
            self.status_message = message
        self.updated_at = time.time()

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TaskRecord:
        # Fields a newer instance added are skipped, so instances of two versions can share a store while a
        # deployment rolls.
        return cls(**{k: v for k, v in d.items() if k in _FIELDS})

    # -- wire ---------------------------------------------------------------------------
    def task_fields(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "taskId": self.task_id,
            "status": self.status,
            "createdAt": iso(self.created_at),
            "lastUpdatedAt": iso(self.updated_at),
            "ttlMs": self.ttl_ms,
            "pollIntervalMs": self.poll_interval_ms,
        }
        if self.status_message:
            out["statusMessage"] = self.status_message
        return out

    def detailed(self) -> dict[str, Any]:
        out = self.task_fields()
        if self.status == "input_required":
            out["inputRequests"] = dict(self.input_requests)
        elif self.status == "completed" and self.result is not None:
            out["result"] = self.result
        elif self.status == "failed" and self.error is not None:
            out["error"] = self.error
        return out


_FIELDS = frozenset(f.name for f in fields(TaskRecord))
