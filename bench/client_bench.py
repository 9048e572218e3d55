"""Client throughput: our Client vs the official Python client (mcp 2.3.0), both driving examples/echo.py over HTTP.

    .venv/bin/python bench/client_bench.py [--seconds 5] [--concurrency 1,8] [--workers 1]

Starts `mcp-stateless serve examples/echo.py:app` on a free loopback port, then runs each client in its own
process (ours with .venv, the official one with .cache/venv-mcp-2.3.0) for a fixed time, calling
`tools/call echo` in a loop with N concurrent callers. Reports calls/s (wall) and the client process's CPU time
per call, which is what "the client is the bottleneck" is about. Not a test: numbers vary with the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OFFICIAL_PY = ROOT / ".cache" / "venv-mcp-2.3.0" / "bin" / "python"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


# ------------------------------------------------------------------------------------------ drivers


async def _drive_ours(url: str, seconds: float, conc: int) -> dict[str, float]:
    import asyncio

    sys.path.insert(0, str(ROOT / "src"))
    from mcp_stateless.client import Client

    async with Client(url, version="2026-07-28") as c:
        await c.list_tools()
        for _ in range(50):  # warm-up
            await c.call_tool("echo", {"text": "warm"})
        n = 0
        deadline = time.perf_counter() + seconds

        async def worker() -> None:
            nonlocal n
            while time.perf_counter() < deadline:
                r = await c.call_tool("echo", {"text": "hello"})
                assert r["content"][0]["text"] == "hello"
                n += 1

        t0, c0 = time.perf_counter(), _cpu()
        await asyncio.gather(*(worker() for _ in range(conc)))
        return {"calls": n, "seconds": time.perf_counter() - t0, "cpu": _cpu() - c0}


def _drive_official(url: str, seconds: float, conc: int) -> dict[str, float]:
    import anyio
    from mcp import Client

    async def main() -> dict[str, float]:
        async with Client(url, mode="2026-07-28", cache=None) as c:
            await c.list_tools()
            for _ in range(50):
                await c.call_tool("echo", {"text": "warm"})
            n = 0
            deadline = time.perf_counter() + seconds

            async def worker() -> None:
                nonlocal n
                while time.perf_counter() < deadline:
                    r = await c.call_tool("echo", {"text": "hello"})
                    assert r.content[0].text == "hello"  # type: ignore[union-attr]
                    n += 1

            t0, c0 = time.perf_counter(), _cpu()
            async with anyio.create_task_group() as tg:
                for _ in range(conc):
                    tg.start_soon(worker)
            return {"calls": n, "seconds": time.perf_counter() - t0, "cpu": _cpu() - c0}

    return anyio.run(main)


# ------------------------------------------------------------------------------------------ harness


def _serve(port: int, workers: int) -> subprocess.Popen[bytes]:
    cmd = [str(ROOT / ".venv" / "bin" / "mcp-stateless"), "serve", "examples/echo.py:app",
           "--http", f"127.0.0.1:{port}", "--log-level", "warning", "--workers", str(workers)]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    for _ in range(100):
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return proc
        if proc.poll() is not None:
            raise SystemExit(f"server exited: {proc.stderr.read().decode() if proc.stderr else ''}")
        time.sleep(0.1)
    proc.kill()
    raise SystemExit("server did not start")


def _run_driver(python: str, driver: str, url: str, seconds: float, conc: int) -> dict[str, float]:
    out = subprocess.run([python, __file__, "--driver", driver, "--url", url, "--seconds", str(seconds),
                          "--concurrency", str(conc)], cwd=ROOT, capture_output=True, text=True,
                         timeout=seconds + 120)
    if out.returncode != 0:
        raise SystemExit(f"{driver} driver failed:\n{out.stderr[-2000:]}")
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--driver", choices=["ours", "official"])
    ap.add_argument("--url")
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--concurrency", default="1,8")
    ap.add_argument("--workers", type=int, default=1, help="server worker processes")
    args = ap.parse_args()
    if args.driver:
        conc = int(args.concurrency)
        if args.driver == "ours":
            import asyncio

            res = asyncio.run(_drive_ours(args.url, args.seconds, conc))
        else:
            res = _drive_official(args.url, args.seconds, conc)
        print(json.dumps(res))
        return 0
    if not OFFICIAL_PY.exists():
        raise SystemExit(f"official client venv missing: {OFFICIAL_PY} (see .ci/run)")
    port = _free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    server = _serve(port, args.workers)
    rows = []
    try:
        for conc in [int(x) for x in args.concurrency.split(",")]:
            for name, py in (("ours", sys.executable), ("official", str(OFFICIAL_PY))):
                r = _run_driver(py, name, url, args.seconds, conc)
                rate = r["calls"] / r["seconds"]
                us = 1e6 * r["cpu"] / max(r["calls"], 1)
                rows.append((conc, name, rate, us))
                print(f"concurrency {conc:>3}  {name:<9} {rate:8.0f} calls/s   client CPU {us:7.0f} µs/call",
                      flush=True)
    finally:
        server.terminate()
        try:
            server.wait(10)
        except subprocess.TimeoutExpired:
            server.kill()
    print()
    for conc in sorted({r[0] for r in rows}):
        ours = next(r for r in rows if r[0] == conc and r[1] == "ours")
        off = next(r for r in rows if r[0] == conc and r[1] == "official")
        print(f"concurrency {conc:>3}: ours/official = {ours[2] / off[2]:.1f}x calls/s, "
              f"{off[3] / ours[3]:.1f}x less client CPU per call")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
