"""The garbage collector's settings for a long-running server process.

Once the app is imported and its state opened, nearly every object in the heap lives as long as the
process, yet CPython's full collections keep walking all of them, and the default young generation (700
objects) fills every few requests on the hot path. So, when a transport owns the process (HTTP lifespan
start-up, stdio before its first line): collect once, move what survives out of the collector's sight
(`gc.freeze`), and let the young generation grow to `YOUNG_THRESHOLD` objects before a collection.
Cycles are still collected; what waits uncollected is bounded by that threshold. The effect is measured
in bench/README.md ("The hot-path regression").
"""

from __future__ import annotations

import gc

YOUNG_THRESHOLD = 10_000


def settle_heap(young_threshold: int = YOUNG_THRESHOLD) -> None:
    """Call once, after start-up and before the first request (again later is harmless)."""
    gc.collect()
    gc.freeze()
    young, middle, old = gc.get_threshold()
    if young and young < young_threshold:  # 0: the collector was turned off on purpose; keep it so
        gc.set_threshold(young_threshold, middle, old)
