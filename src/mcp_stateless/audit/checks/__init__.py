"""The built-in checks, in the order they run: the era probe first (every other check reads its profile), the
legacy profile (2025-only servers) next to last, the schema check last (it reads every message the others
received)."""

from __future__ import annotations

from ..engine import Check
from . import broken, envelope, era, legacy, listen, mrtr, results, schema, stateless, stdio, tasks

CHECKS: tuple[Check, ...] = (*era.CHECKS, *envelope.CHECKS, *stateless.CHECKS, *results.CHECKS, *mrtr.CHECKS,
                             *listen.CHECKS, *tasks.CHECKS, *broken.CHECKS, *stdio.CHECKS, *legacy.CHECKS,
                             *schema.CHECKS)

__all__ = ["CHECKS"]
