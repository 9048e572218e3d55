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
    # Set by an analyzer: this finding is part of its module's wiring of a 2025 SDK transport (a map of the
    # transports by session id, its reads and deletes). The engine folds such findings into the module's one
    # grouped finding of kind `transport-session-map` (see `glue.fold`); alone, it is an ordinary finding.
    transport_glue: bool = False
    # A grouped finding: the findings it stands for, in file order (empty for an ordinary finding).
    covers: tuple[Finding, ...] = ()

    @property
    def count(self) -> int:
        """How many findings a grouped finding stands for (an ordinary finding stands for itself)."""
        return len(self.covers) or 1

    @property
    def lines(self) -> list[int]:
        """The lines a grouped finding stands for (an ordinary finding's own line)."""
        return sorted({c.line for c in self.covers}) if self.covers else [self.line]

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
