"""Optional: throughput with 1, 2 and 4 instances of ours behind nginx, sharing Redis state.

Runs only when the pieces exist (deploy/nginx.conf, the Redis state package, redis-server and nginx);
otherwise it reports why it was skipped. Kept separate so the main harness never depends on them.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def missing() -> list[str]:
    why = []
    if not (ROOT / "deploy/nginx.conf").exists():
        why.append("deploy/nginx.conf")
    if not (ROOT / "src/mcp_stateless/state").exists():
        why.append("src/mcp_stateless/state")
    if not shutil.which("redis-server"):
        why.append("redis-server")
    if not (shutil.which("nginx") or Path("/usr/sbin/nginx").exists()):
        why.append("nginx")
    return why


def run(cfg: Any, log: Callable[[str], None]) -> dict[str, Any]:
    why = missing()
    if why:
        log(f"cluster: skipped, missing {', '.join(why)}")
        return {"skipped": "missing " + ", ".join(why)}
    # The deployment's own layout (ports, upstream block, Redis URL variable) belongs to its author;
    # until it is documented there is nothing stable to drive here.
    log("cluster: deploy/nginx.conf exists but the driver is not written yet; skipped")
    return {"skipped": "driver not written yet (hook: bench/cluster.py)"}
