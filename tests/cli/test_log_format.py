"""`serve --log-format json`: one JSON object per line on stderr from every serving process (one, several
workers, stdio), with the record's fields and no credentials; the formatter's rules on crafted records."""

from __future__ import annotations

import io
import json
import logging
import re
import signal
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest
from test_serve import CLI, KEY, ROOT, env, http_server, post

from mcp_stateless.cli.logs import REDACTED, JsonFormatter, configure

TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")


def json_lines(stderr: str) -> list[dict[str, Any]]:
    lines = [json.loads(line) for line in stderr.splitlines()]  # every line is one object, or this raises
    for d in lines:
        assert TIME.match(d["time"]), d
        assert d["level"] in ("debug", "info", "warning", "error", "critical"), d
        assert isinstance(d["logger"], str) and isinstance(d["message"], str), d
        assert "color_message" not in d
    return lines


def stop(proc: subprocess.Popen[str]) -> str:
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=20)
    return err


@pytest.mark.slow
def test_http_json_lines_carry_the_records_fields() -> None:
    with http_server("--log-format", "json", "--log-level", "debug", "--state", "memory://") as (url, proc):
        initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
        r = httpx.post(url, json=initialize, headers={"Accept": "application/json, text/event-stream",
                                                      "Authorization": "Bearer sekrit-token-value"}, timeout=10)
        assert r.status_code == 200
        err = stop(proc)
    lines = json_lines(err)
    by_message = {d["message"]: d for d in lines}
    assert by_message["state: memory://"]["logger"] == "mcp_stateless"
    assert by_message["state: memory://"]["level"] == "debug"
    assert by_message["Application startup complete."]["logger"] == "uvicorn.error"  # uvicorn's own, as JSON
    legacy = by_message["legacy initialize -> 200"]
    assert (legacy["logger"], legacy["era"], legacy["legacy_kind"]) == ("mcp_stateless.legacy", "legacy",
                                                                        "initialize")
    assert "sekrit" not in err


@pytest.mark.slow
def test_text_stays_the_default() -> None:
    with http_server("--log-level", "debug", "--state", "memory://") as (_, proc):
        err = stop(proc)
    assert re.search(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} DEBUG mcp_stateless: state: memory://$", err, re.M), err
    assert "INFO:     Application startup complete." in err  # uvicorn keeps its own format
    assert not any(line.startswith("{") for line in err.splitlines())


@pytest.mark.slow
def test_every_worker_logs_json(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    with http_server("--workers", "2", "--log-format", "json", "--log-level", "debug", "--state", f"sqlite:///{db}",
                     env=env(MCP_STATELESS_KEYS=KEY)) as (url, proc):
        assert post(url, {"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {}}}}).status_code == 200
        err = stop(proc)
    lines = json_lines(err)
    started = {d["message"] for d in lines if d["message"].startswith("Started server process")}
    assert len(started) == 2, err  # one per worker
    # our own logger in each worker too (they are spawned, so each configures itself), and in the parent
    assert [d["message"] for d in lines if d["logger"] == "mcp_stateless"] == [f"state: sqlite:///{db}"] * 3


@pytest.mark.slow
def test_stdio_json_on_stderr_only() -> None:
    discover = {"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}}}
    r = subprocess.run([CLI, "serve", "examples/echo.py:app", "--stdio", "--log-format", "json", "--log-level",
                        "debug", "--state", "memory://"], cwd=ROOT, input=json.dumps(discover) + "\n",
                       capture_output=True, text=True, timeout=30, env=env())
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["id"] == 1
    assert json_lines(r.stderr)[0]["message"] == "state: memory://"


@pytest.mark.slow
def test_bad_format_is_a_usage_error() -> None:
    r = subprocess.run([CLI, "serve", "examples/echo.py:app", "--stdio", "--log-format", "xml"], cwd=ROOT,
                       capture_output=True, text=True, timeout=20, stdin=subprocess.DEVNULL)
    assert (r.returncode, r.stderr) == (2, "mcp-stateless serve: error: argument --log-format: invalid choice: "
                                           "'xml' (choose from 'text', 'json') (see `mcp-stateless serve --help`)\n")


def record(msg: str, *args: Any, exc: bool = False, **extra: Any) -> str:
    stream = io.StringIO()
    logger = logging.getLogger("t14c.formatter")
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    logger.addHandler(handler)
    logger.propagate = False
    try:
        if exc:
            try:
                raise ValueError("header was Authorization: Bearer abc.def-ghi")
            except ValueError:
                logger.exception(msg, *args, extra=extra)
        else:
            logger.warning(msg, *args, extra=extra)
    finally:
        logger.removeHandler(handler)
    return stream.getvalue()


def test_formatter_fields_and_redaction() -> None:
    out = record("call %s by %s", "tools/call", "Bearer eyJhbGciOi.payload.sig", era="modern",
                 method="tools/call", access_token="t0k", api_key="k", client_secret="s", attempts=2,
                 obj=object())
    assert out.endswith("\n") and out.count("\n") == 1
    d = json.loads(out)
    assert TIME.match(d.pop("time"))
    assert d.pop("obj").startswith("<object object at ")  # anything else is written as its str()
    assert d == {"level": "warning", "logger": "t14c.formatter", "message": f"call tools/call by Bearer {REDACTED}",
                 "era": "modern", "method": "tools/call", "access_token": REDACTED, "api_key": REDACTED,
                 "client_secret": REDACTED, "attempts": 2}


def test_formatter_exception_is_scrubbed() -> None:
    d = json.loads(record("failed", exc=True))
    assert (d["level"], d["message"]) == ("error", "failed")
    assert d["exception"].startswith("Traceback (most recent call last):")
    assert d["exception"].endswith(f"ValueError: header was Authorization: Bearer {REDACTED}")
    assert "abc.def" not in d["exception"]


def test_configure_replaces_handlers() -> None:
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    try:
        first, second = io.StringIO(), io.StringIO()
        configure("info", "json", first)
        configure("warning", "json", second)  # as a worker does after its parent: still one handler
        logging.getLogger("t14c.x").warning("once")
        logging.getLogger("t14c.x").info("filtered")
        assert first.getvalue() == ""
        assert [json.loads(line)["message"] for line in second.getvalue().splitlines()] == ["once"]
    finally:
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])


@pytest.mark.slow
def test_state_url_password_never_logged() -> None:
    r = subprocess.run([CLI, "serve", "examples/echo.py:app", "--stdio", "--log-format", "json", "--log-level",
                        "debug", "--state", "redis://user:hunter2@127.0.0.1:1/0"], cwd=ROOT, input="",
                       capture_output=True, text=True, timeout=30, env=env())
    assert "hunter2" not in r.stderr
    json_lines(r.stderr.split("mcp-stateless: error:")[0])
