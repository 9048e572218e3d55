"""`ServeConfig`: built once from the command line and the documented settings, handed to workers whole."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from mcp_stateless.cli import build_parser
from mcp_stateless.cli.base import CliError
from mcp_stateless.cli.config import SERVE_CONFIG_ENV, ServeConfig
from mcp_stateless.cli.serve import config_from_args
from mcp_stateless.protocol.security import OriginPolicy
from services import CLI, free_port

ROOT = Path(__file__).resolve().parents[2]
KEY = "k1:MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="


def parse(*argv: str, **environ: str) -> ServeConfig:
    return config_from_args(build_parser().parse_args(["serve", *argv]), environ)


def test_the_command_line_becomes_one_config() -> None:
    config = parse("examples/echo.py:app", "--http", "[::1]:8123", "--path", "/x", "--workers", "3",
                   "--allowed-host", "a.example", "--allowed-origin", "https://b.example", "--max-body", "10",
                   "--state", "memory://", "--instance-name", "i-1", "--log-level", "debug",
                   MCP_STATELESS_KEYS=KEY)
    assert config == ServeConfig(app="examples/echo.py:app", transport="http", host="::1", port=8123, path="/x",
                                 workers=3, state="memory://", keys=KEY, allowed_hosts=("a.example",),
                                 allowed_origins=("https://b.example",), instance_name="i-1", max_body=10,
                                 log_level="debug")
    assert config.processes == 3


def test_the_edge_limits_reach_the_config_and_survive_the_trip_to_workers() -> None:
    config = parse("a:app", "--http", "0.0.0.0:1", "--idle-timeout", "2.5", "--header-timeout", "3",
                   "--body-timeout", "7", "--max-connections", "99", "--tool-threads", "5")
    assert (config.idle_timeout, config.header_timeout, config.body_timeout, config.max_connections,
            config.tool_threads) == (2.5, 3.0, 7.0, 99, 5)
    assert ServeConfig.from_json(config.to_json()) == config
    defaults = parse("a:app", "--http", "0.0.0.0:1")
    assert (defaults.idle_timeout, defaults.header_timeout, defaults.body_timeout, defaults.max_connections,
            defaults.tool_threads) == (5.0, 10.0, 30.0, 1000, 64)


@pytest.mark.parametrize(("flag", "value", "message"), [
    ("--idle-timeout", "0", "--idle-timeout must be a positive number of seconds"),
    ("--header-timeout", "-1", "--header-timeout must be a positive number of seconds"),
    ("--body-timeout", "nan", "--body-timeout must be a positive number of seconds"),
    ("--max-connections", "0", "--max-connections must be at least 1"),
    ("--tool-threads", "0", "--tool-threads must be at least 1"),
])
def test_bad_edge_limits_are_refused(flag: str, value: str, message: str) -> None:
    with pytest.raises(CliError, match=message):
        parse("a:app", "--http", "0.0.0.0:1", flag, value)


def test_documented_settings_are_defaults_the_command_line_overrides() -> None:
    env = {"MCP_STATELESS_STATE": "sqlite:///env.db", "MCP_STATELESS_INSTANCE": "from-env"}
    config = parse("a:app", "--http", "127.0.0.1:1", **env)
    assert (config.state, config.instance_name, config.keys) == ("sqlite:///env.db", "from-env", None)
    config = parse("a:app", "--http", "127.0.0.1:1", "--state", "memory://", "--instance-name", "cli", **env)
    assert (config.state, config.instance_name) == ("memory://", "cli")
    empty = parse("a:app", "--http", "127.0.0.1:1", MCP_STATELESS_STATE="", MCP_STATELESS_KEYS="")
    assert (empty.state, empty.keys) == (None, None)


def test_stdio_is_one_process_whatever_workers_says() -> None:
    config = parse("a:app", "--stdio", "--workers", "4")
    assert (config.transport, config.processes) == ("stdio", 1)


def test_building_the_config_writes_no_environment() -> None:
    before = dict(os.environ)
    parse("a:app", "--http", "127.0.0.1:1", "--instance-name", "x", "--state", "memory://")
    assert dict(os.environ) == before


def test_json_round_trip_and_env_hand_over() -> None:
    config = parse("examples/echo.py:app", "--http", "0.0.0.0:9", "--allowed-host", "h", "--workers", "2",
                   MCP_STATELESS_KEYS=KEY)
    assert ServeConfig.from_json(config.to_json()) == config
    environ: dict[str, str] = {}
    config.to_env(environ)
    assert list(environ) == [SERVE_CONFIG_ENV]
    assert ServeConfig.from_env(environ) == config


def test_the_key_ring_never_shows_in_repr() -> None:
    config = ServeConfig(app="a:app", keys=KEY)
    assert KEY not in repr(config) and "keys" not in repr(config)


@pytest.mark.parametrize(("host", "hosts", "origins", "expected"), [
    ("127.0.0.1", (), (), OriginPolicy.loopback()),
    ("0.0.0.0", (), (), OriginPolicy.public()),
    ("0.0.0.0", ("*",), (), OriginPolicy.public()),
    ("0.0.0.0", ("*",), ("*",), OriginPolicy.public(["*"])),
    ("0.0.0.0", ("MCP.example.com",), ("https://App.example.com",),
     OriginPolicy(frozenset({"mcp.example.com"}), frozenset({"https://app.example.com"}))),
    ("0.0.0.0", (), ("https://App.example.com",), OriginPolicy.public(["https://app.example.com"])),
    ("localhost", ("mcp.example.com",), (),
     OriginPolicy(OriginPolicy.loopback().allowed_hosts | {"mcp.example.com"}, frozenset())),
])
def test_origin_policy(host: str, hosts: tuple[str, ...], origins: tuple[str, ...],
                       expected: OriginPolicy) -> None:
    config = ServeConfig(app="a:app", host=host, allowed_hosts=hosts, allowed_origins=origins)
    assert config.origin_policy() == expected


@pytest.mark.parametrize(("hosts", "origins", "host", "origin", "why"), [
    # a public bind with nothing configured: any Host, no browser Origin (a rebinding page is refused)
    ((), (), "evil.example.com", "http://evil.example.com", "Origin is not allowed"),
    ((), (), "10.0.0.5:8000", "http://10.0.0.5:8000", "Origin is not allowed"),
    ((), (), "evil.example.com", None, None),
    (("*",), (), "anything", "http://anything", "Origin is not allowed"),
    # opening up is explicit
    ((), ("https://app.example.com",), "10.0.0.5", "https://app.example.com", None),
    ((), ("*",), "10.0.0.5", "http://evil.example.com", None),
    (("mcp.example.com",), (), "mcp.example.com", "https://mcp.example.com", None),
    (("mcp.example.com",), (), "evil.example.com", None, "Host header is not allowed"),
])
def test_public_binds_refuse_foreign_origins_by_default(hosts: tuple[str, ...], origins: tuple[str, ...],
                                                        host: str, origin: str | None, why: str | None) -> None:
    config = ServeConfig(app="a:app", host="0.0.0.0", allowed_hosts=hosts, allowed_origins=origins)
    assert config.origin_policy().check(host, origin) == why


@pytest.mark.slow
def test_workers_get_the_whole_config() -> None:
    """--instance-name reaches both worker processes through the one serialised config (nothing else)."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCP_STATELESS_")}
    env["MCP_STATELESS_KEYS"] = KEY
    proc = subprocess.Popen([CLI, "serve", "examples/echo.py:app", "--http", f"127.0.0.1:{port}", "--workers", "2",
                             "--instance-name", "box-7", "--path", "/deep/mcp", "--log-level", "warning"],
                            cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    try:
        msg = {"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {}}}}
        headers = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2026-07-28",
                   "Mcp-Method": "server/discover"}
        seen: list[httpx.Response] = []
        for _ in range(200):
            assert proc.poll() is None, proc.communicate()[1]
            try:
                with httpx.Client(timeout=5) as c:  # a new connection each time: either worker may answer
                    seen.append(c.post(f"http://127.0.0.1:{port}/deep/mcp", json=msg, headers=headers))
            except httpx.TransportError:
                time.sleep(0.1)
                continue
            if len(seen) >= 8:
                break
        assert len(seen) >= 8
        assert {(r.status_code, r.headers.get("x-mcp-instance")) for r in seen} == {(200, "box-7")}
    finally:
        proc.terminate()
        proc.wait(20)


def test_config_fields_are_all_plain_data() -> None:
    """Everything must survive JSON for the workers: no field may hold an object."""
    for f in dataclasses.fields(ServeConfig):
        assert f.type in {"str", "int", "float", "bool", "Transport", "LogLevel", "LogFormat", "LegacyMode",
                          "str | None", "int | None", "tuple[str, ...]"}, f


def test_log_format_reaches_the_config_and_the_workers() -> None:
    assert parse("a:app", "--stdio").log_format == "text"
    config = parse("a:app", "--http", "127.0.0.1:1", "--log-format", "json")
    assert config.log_format == "json"
    assert ServeConfig.from_json(config.to_json()) == config


def test_the_legacy_options_reach_the_config_and_survive_the_trip_to_workers() -> None:
    config = parse("a:app", "--http", "127.0.0.1:1", "--legacy-sse", "--legacy-until", "2027-01-31")
    assert (config.legacy, config.legacy_sse, config.legacy_until) == ("serve", True, "2027-01-31")
    assert ServeConfig.from_json(config.to_json()) == config
    from_env = parse("a:app", "--stdio", MCP_STATELESS_LEGACY_UNTIL="2027-02-01T10:00:00Z")
    assert (from_env.legacy_sse, from_env.legacy_until) == (False, "2027-02-01T10:00:00Z")
    # The command line wins over the environment.
    assert parse("a:app", "--stdio", "--legacy-until", "2028-01-01",
                 MCP_STATELESS_LEGACY_UNTIL="2027-01-01").legacy_until == "2028-01-01"
    with pytest.raises(CliError, match="--legacy-sse needs --legacy serve"):
        parse("a:app", "--stdio", "--legacy", "reject", "--legacy-sse")


def test_the_listen_stream_bound_reaches_the_config() -> None:
    assert parse("a:app", "--http", "0.0.0.0:1").max_listen_streams == 100
    config = parse("a:app", "--http", "0.0.0.0:1", "--max-listen-streams", "7")
    assert config.max_listen_streams == 7 and ServeConfig.from_json(config.to_json()) == config
    with pytest.raises(CliError, match="--max-listen-streams must be at least 1"):
        parse("a:app", "--http", "0.0.0.0:1", "--max-listen-streams", "0")
