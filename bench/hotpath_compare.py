"""`bench/hotpath.py` against several source trees, interleaved, in one run.

    python bench/hotpath_compare.py --tree this=src --tree main=/path/to/main/src --tree old=/path/to/old/src \
        --tree "this-default-gc=src::--default-gc"

Each round runs every tree once (a fresh process each, `PYTHONPATH` set to that tree's `src`), in an
order rotated per round; the table shows the median and the range of CPU µs per request over the
rounds. The targets are this checkout's `bench/targets.py`, built through the public API, so older trees
run the same server code they would have run then. Extra arguments after `--` go to hotpath.py for every
tree; `SRC::ARG ARG` gives one tree its own.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def run_once(spec: str, extra: list[str]) -> float:
    src, _, own = spec.partition("::")
    extra = [*extra, *own.split()]
    env = {**os.environ, "PYTHONPATH": os.path.abspath(src)}
    out = subprocess.run([sys.executable, os.path.join(HERE, "hotpath.py"), *extra], env=env, capture_output=True,
                         text=True, timeout=600, check=True).stdout
    m = re.search(r"([\d.]+) µs CPU/request", out)
    if m is None:
        raise RuntimeError(f"hotpath.py printed no figure: {out!r}")
    return float(m.group(1))


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--tree", action="append", required=True, metavar="NAME=SRC", help="a name and its src/ folder")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("extra", nargs="*", help="arguments for hotpath.py (after --)")
    a = p.parse_args()
    trees = [t.split("=", 1) for t in a.tree]
    results: dict[str, list[float]] = {name: [] for name, _ in trees}
    for r in range(a.rounds):
        order = trees[r % len(trees):] + trees[: r % len(trees)]
        for name, src in order:
            results[name].append(run_once(src, a.extra or ["-n", "30000"]))
        print(f"round {r + 1}: " + ", ".join(f"{n} {results[n][-1]:.1f}" for n, _ in trees), flush=True)
    first = statistics.median(results[trees[0][0]])
    print("\n| tree | median CPU µs/request | range | vs " + trees[0][0] + " |\n|---|---:|---:|---:|")
    for name, _ in trees:
        xs = results[name]
        med = statistics.median(xs)
        print(f"| {name} | {med:.1f} | {min(xs):.1f}–{max(xs):.1f} | {med / first:.2f}× |")


if __name__ == "__main__":
    main()
