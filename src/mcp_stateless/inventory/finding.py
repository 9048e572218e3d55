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


def source_lines(text: str) -> list[str]:
    """The lines of a source as its parser numbers them: only `\\n` ends a line. `str.splitlines()` also splits at
    form feeds, `\\x1c`-`\\x1e` and U+2028/U+2029, which shifts every later excerpt and suppression comment."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line.removesuffix("\r") for line in lines]
