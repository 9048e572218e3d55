"""One status line on stderr, redrawn in place: `notifications/progress` of a long call, or a task's status
while `task wait` polls it. Drawn only on a terminal (or when asked), so piped output stays clean; stdout,
which carries the result, is never touched."""

from __future__ import annotations

import sys
import time
from typing import Any, TextIO

SPINNER = "|/-\\"
BAR_WIDTH = 24
CLEAR = "\r\x1b[2K"  # back to column 0, erase the line


def wanted(choice: bool | None, stream: TextIO = sys.stderr) -> bool:
    """`--progress` / `--no-progress`, else only when stderr is a terminal."""
    if choice is not None:
        return choice
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def bar(progress: float, total: float | None, width: int = BAR_WIDTH) -> str:
    """`[#########···············]  37%` with a total; just the count without one (the end is unknown)."""
    if total is None or not total > 0:
        return f"{progress:g}"
    ratio = min(max(progress / total, 0.0), 1.0)
    filled = int(ratio * width + 1e-9)
    return f"[{'#' * filled}{'.' * (width - filled)}] {ratio * 100:3.0f}%"


class StatusLine:
    def __init__(self, stream: TextIO = sys.stderr, *, clock: Any = time.monotonic) -> None:
        self.stream = stream
        self.clock = clock
        self.started = clock()
        self.frame = 0
        self.drawn = False

    def _draw(self, text: str) -> None:
        self.stream.write(CLEAR + text)
        self.stream.flush()
        self.drawn = True

    def progress(self, params: dict[str, Any]) -> None:
        """A `notifications/progress` (the Client's progress callback)."""
        value = params.get("progress")
        if not isinstance(value, int | float):
            return
        total = params.get("total")
        text = bar(float(value), float(total) if isinstance(total, int | float) else None)
        message = params.get("message")
        self._draw(text + (f"  {message}" if isinstance(message, str) and message else ""))

    def task(self, task: dict[str, Any]) -> None:
        """A task as polled: spinner, status, time waited, the server's status message."""
        self.frame += 1
        elapsed = self.clock() - self.started
        message = task.get("statusMessage")
        self._draw(f"{SPINNER[self.frame % len(SPINNER)]} {task.get('status', '?')}  {elapsed:.1f}s"
                   + (f"  {message}" if isinstance(message, str) and message else ""))

    def close(self) -> None:
        """Erase the line, so what follows (a prompt, an error) starts on a clean one."""
        if self.drawn:
            self.stream.write(CLEAR)
            self.stream.flush()
            self.drawn = False
