"""One finding: where a hidden-state dependency is in the source, and what to do about it."""

from __future__ import annotations

from dataclasses import dataclass

from .kinds import KINDS, Kind


@dataclass(frozen=True, slots=True)
class Finding:
    file: str  # path relative to the inventoried root, with `/` separators
    line: int  # 1-based
    column: int  # 1-based
    kind: str  # a key of KINDS
    message: str  # what was found here, in one line, naming the code (e.g. "dict `sessions` keyed by session id")
    excerpt: str  # the source line(s), stripped; at most a few lines

    @property
    def rule(self) -> Kind:
        return KINDS[self.kind]

    @property
    def step(self) -> int:
        return KINDS[self.kind].step

    @property
    def fix(self) -> str:
        return KINDS[self.kind].fix
