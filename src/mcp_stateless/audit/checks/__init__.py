"""The built-in checks, in the order they run (the era probe first: every other check reads its profile)."""

from __future__ import annotations

from ..engine import Check
from . import envelope, era, listen, mrtr, stateless, stdio, tasks

CHECKS: tuple[Check, ...] = (*era.CHECKS, *envelope.CHECKS, *stateless.CHECKS, *mrtr.CHECKS, *listen.CHECKS,
                             *tasks.CHECKS, *stdio.CHECKS)

__all__ = ["CHECKS"]
