"""How `serve` logs: readable lines, or (`--log-format json`) one JSON object per line for a log pipeline.

A JSON line has `time` (RFC 3339, UTC, milliseconds), `level`, `logger` and `message`, then whatever the
record carries in `extra=` (`era`, `method`, ...), and `exception` with the traceback when there is one.
Bearer tokens are scrubbed from messages and tracebacks, and an extra field whose name says it is a
secret is never written. Every serving process configures itself (uvicorn workers are spawned, so they call
`configure` again from the config they inherit).
"""

from __future__ import annotations

import json
import logging
import re
import sys
from datetime import UTC, datetime
from typing import Any, TextIO

from .config import LogFormat

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

# Every attribute a bare LogRecord has: what is left on a record is what the caller passed in `extra=`.
# uvicorn's `color_message` repeats the message with terminal escapes: noise in a JSON line.
_STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {
    "message", "asctime", "taskName", "color_message"}
_SECRET_NAME = re.compile(r"token|secret|password|passwd|authorization|cookie|api_?key|credential", re.I)
_BEARER = re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]+")
REDACTED = "[redacted]"


def scrub(text: str) -> str:
    """A message with the credentials of any Authorization value it quotes replaced."""
    return _BEARER.sub(lambda m: f"{m.group(1)} {REDACTED}", text)


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds")
            .replace("+00:00", "Z"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": scrub(record.getMessage()),
        }
        for key, value in vars(record).items():
            if key in _STANDARD or key.startswith("_") or key in out:
                continue
            out[key] = REDACTED if _SECRET_NAME.search(key) else value
        if record.exc_info:
            out["exception"] = scrub(self.formatException(record.exc_info))
        elif record.stack_info:
            out["stack"] = scrub(self.formatStack(record.stack_info))
        return json.dumps(out, ensure_ascii=False, default=str)


def configure(level: str, fmt: LogFormat, stream: TextIO | None = None) -> None:
    """The root logger, writing to stderr (stdout may carry MCP messages). Replaces earlier handlers, so a
    worker configuring itself again does not log twice."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else logging.Formatter(TEXT_FORMAT))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
