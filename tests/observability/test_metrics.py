"""`serve --metrics` for real: a server subprocess, calls from our client (both eras), and `/metrics` parsed
with prometheus_client's own text parser; every label of every series checked."""

from __future__ import annotations

import asyncio
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from mcp_stateless import Client, McpError
from services import CLI, RedisServer, free_port, http_server, wait_port

# Every test here starts a process (a server, a client, a tool): the fast lane leaves them out.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
APP = "tests/apps/observed_app.py:app"
PV = "2026-07-28"
HISTOGRAM = "mcp_server_operation_duration_seconds"


def scrape(url: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    """name -> [(labels, value)] from GET url, parsed by prometheus_client."""
    r = httpx.get(url, timeout=10)
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("text/plain; version=")
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(r.text):
        for sample in family.samples:
            out.setdefault(sample.name, []).append((dict(sample.labels), sample.value))
    return out


def counts(samples: dict[str, list[tuple[dict[str, str], float]]]) -> dict[tuple[str, ...], float]:
    """The histogram's _count per label set, keyed by the label values in a fixed order."""
    order = ("mcp_method_name", "gen_ai_tool_name", "gen_ai_prompt_name", "error_type", "mcp_protocol_version",
             "network_transport", "mcp_era", "mcp_result_type")
    got = {}
    for labels, value in samples[HISTOGRAM + "_count"]:
        assert sorted(labels) == sorted(order), labels
        got[tuple(labels[k] for k in order)] = value
    return got


def value(samples: dict[str, list[tuple[dict[str, str], float]]], name: str, **labels: str) -> float:
    matching = [v for lab, v in samples.get(name, []) if lab == labels]
    assert len(matching) == 1, (name, labels, samples.get(name))
    return matching[0]


def env() -> dict[str, str]:
    e = {k: v for k, v in os.environ.items() if not k.startswith(("MCP_STATELESS_", "OTEL_"))}
    return {**e, "PYTHONUNBUFFERED": "1"}


@pytest.fixture
def server(tmp_path: Path) -> Iterator[str]:
    argv = [CLI, "serve", APP, "--http", "127.0.0.1:{port}", "--metrics", "--state", "memory://"]
    with http_server(argv, "serve --metrics", cwd=ROOT, env=env()) as url:
        yield url


async def until(ok: Any, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not await asyncio.to_thread(ok):
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.05)


async def answer_name(params: dict[str, Any]) -> dict[str, Any]:
    return {"action": "accept", "content": {"name": "Ada"}}


def modern(method: str, tool: str = "", prompt: str = "", error: str = "", result: str = "complete",
           transport: str = "tcp") -> tuple[str, ...]:
    return (method, tool, prompt, error, PV, transport, "modern", result)


async def test_histogram_labels_after_calls_errors_and_an_mrtr_round(server: str) -> None:
    metrics_url = server.removesuffix("/mcp") + "/metrics"
    async with Client(server, elicitation=answer_name) as c:
        assert (await c.call_tool("echo", {"text": "a"}))["content"][0]["text"] == "a"
        await c.call_tool("echo", {"text": "b"})
        failed = await c.call_tool("fail", {})
        assert failed["isError"] is True
        with pytest.raises(McpError) as unknown:
            await c.call_tool("no-such-tool-" + "x" * 40, {})
        assert unknown.value.code == -32602
        assert (await c.call_tool("ask", {}))["content"][0]["text"] == "Hello, Ada!"  # two rounds
        await c.get_prompt("greet", {"name": "Ada"})
        with pytest.raises(McpError):
            await c.get_prompt("nope", {})
    got = counts(scrape(metrics_url))
    tool_calls = {k: v for k, v in got.items() if k[0] in ("tools/call", "prompts/get")}
    assert tool_calls == {
        modern("tools/call", tool="echo"): 2,
        modern("tools/call", tool="fail", error="tool_error"): 1,
        modern("tools/call", tool="_OTHER", error="-32602", result="error"): 1,  # never the requested name
        modern("tools/call", tool="ask", result="input_required"): 1,  # the MRTR round is not an error
        modern("tools/call", tool="ask"): 1,
        modern("prompts/get", prompt="greet"): 1,
        modern("prompts/get", prompt="_OTHER", error="-32602", result="error"): 1,
    }
    assert got[modern("server/discover")] == 1  # the client's probe
    others = {k for k in got if k[0] not in ("tools/call", "prompts/get", "server/discover")}
    assert others <= {modern("tools/list")}, others
    samples = scrape(metrics_url)
    # every request is over: nothing in flight, for any method seen
    in_flight = samples["mcp_server_requests_in_flight"]
    assert {lab["mcp_method_name"] for lab, _ in in_flight} >= {"tools/call", "prompts/get", "server/discover"}
    assert all(v == 0 for _, v in in_flight)
    # bucket boundaries are semconv's
    les = [lab["le"] for lab, _ in samples[HISTOGRAM + "_bucket"]
           if lab["gen_ai_tool_name"] == "echo"]
    assert les == ["0.01", "0.02", "0.05", "0.1", "0.2", "0.5", "1.0", "2.0", "5.0", "10.0", "30.0", "60.0",
                   "120.0", "300.0", "+Inf"]
    assert samples.get("mcp_state_store_errors_total", []) == []  # none so far, so no series


async def test_listen_streams_and_task_counts(server: str) -> None:
    metrics_url = server.removesuffix("/mcp") + "/metrics"
    async with Client(server, tasks=True) as c:
        assert value(scrape(metrics_url), "mcp_server_listen_streams") == 0
        sub = c.listen(tools=True)
        waiting = asyncio.ensure_future(anext(sub))  # opens the stream, then waits for an event
        try:
            await until(lambda: value(scrape(metrics_url), "mcp_server_listen_streams") == 1)
        finally:
            waiting.cancel()
            await asyncio.gather(waiting, return_exceptions=True)
            await sub.aclose()
        await until(lambda: value(scrape(metrics_url), "mcp_server_listen_streams") == 0)
        result = await c.call_tool("job", {"n": 21})
        assert result["content"][0]["text"] == "42"
    samples = scrape(metrics_url)
    assert value(samples, "mcp_server_tasks_running") == 0
    assert value(samples, "mcp_server_task_transitions_total", status="working") == 1
    assert value(samples, "mcp_server_task_transitions_total", status="completed") == 1
    got = counts(samples)
    assert got[modern("tools/call", tool="job", result="task")] == 1


async def test_legacy_era_is_labelled_and_its_exchanges_counted(server: str) -> None:
    metrics_url = server.removesuffix("/mcp") + "/metrics"
    async with Client(server, version="2025-11-25") as c:
        await c.call_tool("echo", {"text": "old"})
        assert c.era == "legacy"
    samples = scrape(metrics_url)
    got = counts(samples)
    assert got[("tools/call", "echo", "", "", "2025-11-25", "tcp", "legacy", "complete")] == 1
    assert value(samples, "mcp_legacy_exchanges_total", kind="initialize", status="200") == 1


def test_metrics_refuses_a_browser_origin_and_other_methods(server: str) -> None:
    metrics_url = server.removesuffix("/mcp") + "/metrics"
    r = httpx.get(metrics_url, headers={"Origin": "https://evil.example"}, timeout=10)
    assert (r.status_code, r.text) == (403, "Origin is not allowed\n")
    r = httpx.post(metrics_url, content=b"", timeout=10)
    assert (r.status_code, r.headers["allow"]) == (405, "GET")
    # the MCP endpoint itself is unchanged
    assert httpx.get(server, timeout=10).status_code == 405


def test_without_the_flag_there_is_no_metrics_route() -> None:
    with http_server([CLI, "serve", APP, "--http", "127.0.0.1:{port}", "--state", "memory://"], "serve",
                     cwd=ROOT, env=env()) as url:
        assert httpx.get(url.removesuffix("/mcp") + "/metrics", timeout=10).status_code == 404


async def test_stdio_serves_metrics_on_a_listener_of_their_own(tmp_path: Path) -> None:
    port = free_port()
    argv = [CLI, "serve", APP, "--stdio", "--metrics", f"127.0.0.1:{port}", "--state", "memory://"]
    async with Client(stdio=argv, cwd=str(ROOT), env=env()) as c:
        await c.call_tool("echo", {"text": "x"})
        got = counts(scrape(f"http://127.0.0.1:{port}/metrics"))
        assert got[modern("tools/call", tool="echo", transport="pipe")] == 1


def test_stdio_metrics_need_an_address() -> None:
    r = subprocess.run([CLI, "serve", APP, "--stdio", "--metrics"], cwd=ROOT, capture_output=True, text=True,
                       timeout=30, stdin=subprocess.DEVNULL, env=env())
    assert r.returncode == 2, r.stderr
    assert "--stdio has no HTTP port for /metrics: give --metrics HOST:PORT" in r.stderr


async def test_state_store_errors_are_counted(tmp_path: Path) -> None:
    redis = RedisServer(tmp_path).start()
    port = free_port()
    argv = [CLI, "serve", APP, "--http", f"127.0.0.1:{port}", "--metrics", "--state", redis.url]
    e = {**env(), "MCP_STATELESS_KEYS": "k1:MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="}
    proc = subprocess.Popen(argv, cwd=ROOT, env=e, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        wait_port(port, proc, "serve --state redis")
        url = f"http://127.0.0.1:{port}/mcp"
        metrics_url = f"http://127.0.0.1:{port}/metrics"
        async with Client(url, tasks=True) as c:
            await c.call_tool("job", {"n": 1})
            assert "redis" not in {lab.get("engine") for lab, _ in scrape(metrics_url).get(
                "mcp_state_store_errors_total", [])}
            redis.stop()
            with pytest.raises(McpError) as down:
                await c.call_tool("job", {"n": 2})
            assert down.value.code == -32603
        errors = value(scrape(metrics_url), "mcp_state_store_errors_total", engine="redis")
        assert errors >= 1
        assert counts(scrape(metrics_url))[modern("tools/call", tool="job", error="-32603", result="error")] == 1
    finally:
        redis.stop()
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
