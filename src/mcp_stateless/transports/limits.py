"""The connection limits `serve` enforces at the edge (see `edge.py`), apart from the protocol that
enforces them: that one needs httptools (the `fast` extra), and a server without it still starts."""

from __future__ import annotations

from dataclasses import dataclass

# uvicorn hands the Config to each protocol; the limits ride on it under this attribute (a plain
# attribute survives the pickling that carries the Config to spawned worker processes).
LIMITS_ATTR = "mcp_stateless_limits"


@dataclass(frozen=True, slots=True)
class EdgeLimits:
    idle_timeout: float = 5.0
    header_timeout: float = 10.0
    body_timeout: float = 30.0
    max_connections: int = 1000
    # The request head (request line + header lines): nginx refuses past 4 x 8 KiB buffers, Apache past 100
    # fields. Past either bound the head is refused with 431 before the parser has seen much of it; an
    # Authorization header (a JWT of a few KiB) fits with room to spare.
    max_head_bytes: int = 64 * 1024
    max_header_count: int = 100
