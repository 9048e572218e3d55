"""The client commands for real: `mcp-stateless discover|tools|call|read|prompt|listen` as subprocesses against
real servers (spawned over stdio, or over HTTP), exact output and exit codes."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from services import CLI, http_server

# Every test here starts a process (a server, a client, a tool): the fast lane leaves them out.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
ECHO = f"{sys.executable} -m mcp_stateless.cli serve examples/echo.py:app --stdio"
FIXTURES = f"{sys.executable} -m mcp_stateless.cli serve examples/conformance_server.py:app --stdio"
NOTES = f"{sys.executable} -m mcp_stateless.cli serve examples/notes.py:app --stdio"
# Its fixtures that come and go live in the state store: a fresh one lists exactly the fixed set.
FRESH_FIXTURES = FIXTURES + " --state memory://"
RESOURCES = ("test://static-text  static-text (text/plain)  — A static text resource for testing\n"
             "test://static-binary  static-binary (image/png)  — A static binary resource (PNG)\n"
             "test://watched-resource  watched-resource (text/plain)  — A resource to subscribe to\n"
             "test://template/{id}/data  template-data (application/json)  — A resource template with an id "
             "parameter\n")
PROMPTS = ("test_simple_prompt()  — A simple prompt without arguments\n"
           "test_prompt_with_arguments(arg1, arg2)  — A prompt with required arguments\n"
           "test_prompt_with_embedded_resource(resourceUri)  — A prompt that includes an embedded resource\n"
           "test_prompt_with_image()  — A prompt that includes image content\n"
           "test_input_required_result_prompt()  — A prompt that asks the client for context through MRTR\n")


def cli(*args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run([CLI, *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)


@pytest.mark.parametrize(("server", "args", "out", "status"), [
    (ECHO, ["discover"], "server:   echo 1.0.0\nera:      modern (2026-07-28)\nversions: 2026-07-28\n"
     "capabilities: logging, tools\ninstructions: Echo text back, or add two integers.\n", 0),
    (ECHO, ["tools"], "echo(text: string)  — Return the text unchanged.\n"
     "add(a: integer, b: integer)  — Add two integers.\n", 0),
    (ECHO, ["call", "echo", "text=hi ✓"], "hi ✓\n", 0),
    (ECHO, ["call", "add", "a=2", "b=3"], "5\n", 0),
    (FIXTURES, ["call", "test_image_content"], "[image image/png, 96 base64 chars]\n", 0),
    (FIXTURES, ["call", "test_multiple_content_types"], "Multiple content types test:\n"
     "[image image/png, 96 base64 chars]\n[resource test://mixed-content-resource]\n"
     '{"test":"data","value":123}\n', 0),
    (FIXTURES, ["call", "test_embedded_resource"],
     "[resource test://embedded-resource]\nThis is an embedded resource content.\n", 0),
    (FIXTURES, ["call", "test_error_handling"], "This tool intentionally returns an error for testing\n", 1),
    (FRESH_FIXTURES, ["resources"], RESOURCES, 0),
    (FRESH_FIXTURES, ["prompts"], PROMPTS, 0),
    (NOTES, ["resources"], "notes://today  today (text/plain)  — Today's note.\nnotes://day/{date}  day "
     "(text/plain)  — The note of one day (a template: the client fills in the date).\n", 0),
    (NOTES, ["prompts"], "summarize(topic, style?)  — Ask for a summary of a topic.\n", 0),
    (NOTES, ["prompt", "summarize", "topic=tea"], "user: Summarize tea in a plain style.\n", 0),
    (FIXTURES, ["read", "test://static-text"], "This is the content of the static text resource.\n", 0),
    (FIXTURES, ["read", "test://static-binary"], "[blob image/png, 96 base64 chars]\n", 0),
    (FIXTURES, ["read", "test://template/7/data"], '{"id":"7","templateTest":true,"data":"Data for ID: 7"}\n', 0),
    (FIXTURES, ["prompt", "test_simple_prompt"], "user: This is a simple prompt for testing.\n", 0),
    (FIXTURES, ["prompt", "test_prompt_with_arguments", "arg1=x", "arg2=2"],
     "user: Prompt with arguments: arg1='x', arg2='2'\n", 0),  # prompt arguments stay strings
    (FIXTURES, ["prompt", "test_prompt_with_image"],
     "user: [image image/png, 96 base64 chars]\nuser: Please analyze the image above.\n", 0),
])
def test_readable_output(server: str, args: list[str], out: str, status: int) -> None:
    r = cli(args[0], "--stdio", server, *args[1:])
    assert (r.stdout, r.returncode) == (out, status), r.stderr
    assert r.stderr == ""


def test_json_output() -> None:
    r = cli("tools", "--stdio", ECHO, "--json")
    assert r.returncode == 0, r.stderr
    assert [(t["name"], sorted(t["inputSchema"]["properties"])) for t in json.loads(r.stdout)] == [
        ("echo", ["text"]), ("add", ["a", "b"])]
    assert r.stdout.startswith('[\n  {\n    "name": "echo"')  # indented by two
    r = cli("discover", "--stdio", ECHO, "--json")
    d = json.loads(r.stdout)
    assert (d["era"], d["version"], d["supportedVersions"]) == ("modern", "2026-07-28", ["2026-07-28"])
    assert d["_meta"]["io.modelcontextprotocol/serverInfo"] == {"name": "echo", "version": "1.0.0"}
    r = cli("call", "--stdio", ECHO, "add", "a=40", "b=2", "--json")
    assert json.loads(r.stdout)["content"] == [{"type": "text", "text": "42"}]


@pytest.mark.parametrize(("args", "err", "status"), [
    (["call", "--stdio", ECHO, "nope"], "mcp-stateless: server error -32602: Unknown tool: nope", 1),
    (["call", "--stdio", ECHO], "mcp-stateless: error: call needs TOOL", 2),
    (["call", "--stdio", ECHO, "echo", "bad"], "mcp-stateless: error: expected key=value, got 'bad'", 2),
    (["read", "--stdio", FIXTURES], "mcp-stateless: error: read needs URI", 2),
    (["read", "--stdio", FIXTURES, "a", "b"], "mcp-stateless: error: read takes one URI", 2),
    (["prompt", "--stdio", ECHO], "mcp-stateless: error: prompt needs NAME", 2),
    (["tools"], "mcp-stateless: error: give a TARGET URL or --stdio COMMAND", 2),
    (["tools", "http://127.0.0.1:1/mcp", "extra"],
     "mcp-stateless: error: unrecognized arguments: extra (see `mcp-stateless --help`)", 2),
    (["read", "--stdio", ECHO, "x://y"], "mcp-stateless: server error -32601: Method not found: resources/read", 1),
    (["resources", "--stdio", ECHO], "mcp-stateless: server error -32601: Method not found: resources/list", 1),
    (["prompts", "--stdio", ECHO], "mcp-stateless: server error -32601: Method not found: prompts/list", 1),
    (["prompts", "--stdio", ECHO, "extra"], "mcp-stateless: error: unexpected arguments: extra", 2),
])
def test_errors_are_one_line_with_their_exit_status(args: list[str], err: str, status: int) -> None:
    r = cli(*args)
    assert (r.stderr.strip(), r.returncode, r.stdout) == (err, status, "")


def test_resources_and_prompts_as_json() -> None:
    r = cli("resources", "--stdio", FRESH_FIXTURES, "--json")
    assert r.returncode == 0, r.stderr
    listed = json.loads(r.stdout)
    assert sorted(listed) == ["resourceTemplates", "resources"]
    assert [x["uri"] for x in listed["resources"]] == ["test://static-text", "test://static-binary",
                                                       "test://watched-resource"]
    assert listed["resourceTemplates"] == [{"uriTemplate": "test://template/{id}/data", "name": "template-data",
                                            "description": "A resource template with an id parameter",
                                            "mimeType": "application/json"}]
    r = cli("prompts", "--stdio", FRESH_FIXTURES, "--json")
    assert r.returncode == 0, r.stderr
    prompts = {p["name"]: p for p in json.loads(r.stdout)}
    assert prompts["test_prompt_with_arguments"]["arguments"] == [
        {"name": "arg1", "required": True}, {"name": "arg2", "required": True}]


def test_resources_and_prompts_over_http() -> None:
    argv = [CLI, "serve", "examples/conformance_server.py:app", "--http", "127.0.0.1:{port}",
            "--log-level", "warning", "--state", "memory://"]
    with http_server(argv, "conformance server", cwd=ROOT) as url:
        r = cli("resources", url)
        assert (r.stdout, r.stderr, r.returncode) == (RESOURCES, "", 0)
        r = cli("prompts", url)
        assert (r.stdout, r.stderr, r.returncode) == (PROMPTS, "", 0)


GREET = f"{sys.executable} -m mcp_stateless.cli serve examples/greet.py:app --stdio"


def test_an_elicitation_without_a_terminal_is_declined_and_said_so() -> None:
    r = cli("call", "--stdio", GREET, "greet")
    assert (r.stdout, r.returncode) == ("Hello, stranger!\n", 0)
    assert r.stderr == ('mcp-stateless: declined the server\'s elicitation "What is your name?": stdin is not a '
                        "terminal\n")


def test_an_elicitation_is_asked_at_the_terminal_on_stderr() -> None:
    import os
    import pty

    controller, terminal = pty.openpty()
    try:
        os.write(controller, b"Ada\n")
        r = subprocess.run([CLI, "call", "--stdio", GREET, "greet"], cwd=ROOT, capture_output=True, text=True,
                           timeout=30, stdin=terminal)
    finally:
        os.close(terminal)
        os.close(controller)
    assert (r.stdout, r.returncode) == ("Hello, Ada!\n", 0)  # the question is not in the result
    assert r.stderr == "? What is your name?\n  name (string): "


def test_unreachable_server_exits_1() -> None:
    r = cli("tools", "http://127.0.0.1:1/mcp", "--timeout", "5")
    assert r.returncode == 1 and r.stdout == ""
    [line] = r.stderr.strip().splitlines()
    assert line.startswith("mcp-stateless: error: ")


def test_a_url_without_the_endpoint_path_says_what_to_fix() -> None:
    argv = [CLI, "serve", "examples/echo.py:app", "--http", "127.0.0.1:{port}", "--state", "memory://"]
    with http_server(argv, "echo server", path="") as base:
        r = cli("tools", base)
        assert (r.returncode, r.stdout) == (1, "")
        assert r.stderr.strip() == (f"mcp-stateless: error: nothing answers MCP at {base}/ (HTTP 404): check the "
                                    f"URL's path; servers usually serve MCP at /mcp, e.g. {base}/mcp "
                                    "(mcp-stateless serve does)")
        r = cli("tools", base + "/api/mcp")
        assert r.stderr.strip() == (f"mcp-stateless: error: nothing answers MCP at {base}/api/mcp (HTTP 404): "
                                    "check the URL's path")
        assert cli("tools", base + "/mcp").returncode == 0


def test_listen_prints_changes_until_count() -> None:
    argv = [CLI, "serve", "examples/conformance_server.py:app", "--http", "127.0.0.1:{port}",
            "--log-level", "warning", "--state", "memory://"]
    with http_server(argv, "conformance server", cwd=ROOT) as url:
        listener = subprocess.Popen([CLI, "listen", url, "--count", "1"], cwd=ROOT, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
        try:
            assert listener.stdout is not None
            first = listener.stdout.readline()  # the acknowledgement: subscribed before anything changes
            assert first.startswith("subscribed: "), (first, listener.stderr)
            assert "tools" in first and "prompts" in first
            deadline = time.monotonic() + 20
            while listener.poll() is None and time.monotonic() < deadline:
                assert cli("call", url, "test_trigger_tool_change").returncode == 0
                time.sleep(0.2)
            rest, err = listener.communicate(timeout=10)
        finally:
            if listener.poll() is None:
                listener.kill()
                listener.wait()
        assert listener.returncode == 0, err
        assert rest == "tools/list_changed\n"
