"""The app `bench/legacy_bounds.py` serves: a sync tool that holds its thread, a quick sync tool, a large
result, and a principal per `x-user` header (so one client's load can be told from another's)."""

from __future__ import annotations

import time
from collections.abc import Mapping

from mcp_stateless import App


def _who(headers: Mapping[str, str] | None) -> str:
    return (headers or {}).get("x-user", "anonymous")


app = App("legacy-bounds", "1.0.0", principal=_who)


@app.tool()
def hold(seconds: float = 2.0) -> str:
    """Keeps a tool thread for `seconds` (at most 5)."""
    time.sleep(min(max(seconds, 0.0), 5.0))
    return "held"


@app.tool()
def quick() -> str:
    return "quick"


@app.tool()
def big() -> str:
    return "x" * (256 * 1024)


@app.resource("test://r", name="r")
def r() -> str:
    return "r"
