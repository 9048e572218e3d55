"""What the auditor did to the server's tools, for the report: every tool it called (with the arguments,
how often, on which instances, for which checks) and every answer it gave to a question the server asked
(an MRTR `inputResponses` value, or a 2025 server's request). Fed by the target from every request it
sends, so nothing a check does escapes it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

MAX_ENTRIES = 500  # distinct (tool, arguments) pairs kept: bounded whatever a flow does


@dataclass
class Called:
    name: str
    arguments: dict[str, Any]
    calls: int = 0
    instances: set[int] = field(default_factory=set)
    checks: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "arguments": self.arguments, "calls": self.calls,
                "instances": sorted(i + 1 for i in self.instances), "checks": self.checks}


def answer_kind(value: Any) -> str:
    """One word for an answer the auditor gave: the elicitation action, `sampling`, `roots`, or `error`."""
    if isinstance(value, Mapping):
        if "action" in value:
            return f"elicitation {value['action']}"
        if "roots" in value:
            return "roots"
        if "role" in value:
            return "sampling"
        if "code" in value:
            return "error"
    return "other"


class Ledger:
    def __init__(self) -> None:
        self.check = ""  # the check now running (set by the engine)
        self.called: dict[tuple[str, bytes], Called] = {}
        self.answers: dict[tuple[str, str], int] = {}  # (kind, check) → how many

    def note(self, message: Mapping[str, Any] | None, instance: int) -> None:
        if not isinstance(message, Mapping) or "method" not in message:
            return
        params = message.get("params") if isinstance(message.get("params"), Mapping) else {}
        assert isinstance(params, Mapping)
        if message["method"] == "tools/call" and isinstance(params.get("name"), str):
            args = params.get("arguments") if isinstance(params.get("arguments"), dict) else {}
            key = (params["name"], orjson.dumps(args, option=orjson.OPT_SORT_KEYS))
            entry = self.called.get(key)
            if entry is None and len(self.called) < MAX_ENTRIES:
                entry = self.called[key] = Called(params["name"], dict(args or {}))
            if entry is not None:
                entry.calls += 1
                entry.instances.add(instance)
                if self.check and self.check not in entry.checks:
                    entry.checks.append(self.check)
        responses = params.get("inputResponses")
        if isinstance(responses, Mapping):
            for value in responses.values():
                self.answer(answer_kind(value))

    def answer(self, kind: str) -> None:
        k = (kind, self.check)
        self.answers[k] = self.answers.get(k, 0) + 1

    def names(self) -> set[str]:
        return {c.name for c in self.called.values()}

    def to_json(self) -> dict[str, Any]:
        by_kind: dict[str, int] = {}
        for (kind, _), n in self.answers.items():
            by_kind[kind] = by_kind.get(kind, 0) + n
        return {"called": [c.to_json() for c in self.called.values()],
                "answers": [{"answer": k, "count": n} for k, n in sorted(by_kind.items())]}


__all__ = ["Called", "Ledger", "answer_kind"]
