"""`complete`, `call --task`, `task get|cancel|wait` and the progress line, as subprocesses against a real
HTTP server (tasks in SQLite, so each command is a separate client process) and over stdio."""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from services import CLI, http_server

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = f"{sys.executable} -m mcp_stateless.cli serve examples/conformance_server.py:app --stdio --state memory://"
CLEAR = "\r\x1b[2K"


def cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    # Decoded by hand: text mode would turn the progress line's carriage returns into newlines.
    r = subprocess.run([CLI, *args], cwd=ROOT, capture_output=True, timeout=timeout, stdin=subprocess.DEVNULL)
    return subprocess.CompletedProcess(r.args, r.returncode, r.stdout.decode(), r.stderr.decode())


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    db = tmp_path_factory.mktemp("tasks") / "tasks.db"
    with http_server([CLI, "serve", "examples/conformance_server.py:app", "--http", "127.0.0.1:{port}",
                      "--state", f"sqlite:///{db}"], "the conformance server", cwd=ROOT) as u:
        yield u


def start_task(url: str, *args: str) -> str:
    r = cli("call", url, *args, "--task", "--json")
    assert r.returncode == 0, r.stderr
    task = json.loads(r.stdout)
    assert (task["resultType"], task["status"]) == ("task", "working")
    assert task["taskId"].startswith("tsk_")
    return str(task["taskId"])


@pytest.mark.slow
def test_task_lifecycle_across_processes(url: str) -> None:
    r = cli("call", url, "slow_compute", "seconds=1.5", "--task")
    assert r.returncode == 0, r.stderr
    words = r.stdout.split()
    assert (len(words), words[0], words[2]) == (3, "task", "working") and r.stdout.endswith("\n")
    tid = words[1].rstrip(":")
    r = cli("task", "get", url, tid)
    assert (r.returncode, r.stdout, r.stderr) == (0, f"task {tid}: working\n", "")
    r = cli("task", "wait", url, tid)  # stderr is a pipe: no progress line
    assert (r.returncode, r.stdout, r.stderr) == (0, "compute: done after 1.5s\n", "")
    r = cli("task", "get", url, tid)
    assert (r.returncode, r.stdout) == (0, f"task {tid}: completed\ncompute: done after 1.5s\n")
    r = cli("task", "get", url, tid, "--json")
    got = json.loads(r.stdout)
    assert (got["taskId"], got["status"], got["result"]["content"]) == (
        tid, "completed", [{"type": "text", "text": "compute: done after 1.5s"}])


@pytest.mark.slow
def test_cancel_then_wait(url: str) -> None:
    tid = start_task(url, "slow_compute", "seconds=30")
    r = cli("task", "cancel", url, tid)
    assert (r.returncode, r.stdout) == (0, f"task {tid}: cancelled (Cancelled by the client)\n"), r.stderr
    r = cli("task", "wait", url, tid)
    assert (r.returncode, r.stdout, r.stderr) == (1, "", f"mcp-stateless: error: task {tid} was cancelled\n")


@pytest.mark.slow
def test_failed_and_tool_error_outcomes(url: str) -> None:
    tid = start_task(url, "failing_job")  # a tool error: the task completes with isError
    r = cli("task", "wait", url, tid, "--wait-timeout", "30")
    assert (r.returncode, r.stdout) == (1, "The job failed: simulated tool error\n"), r.stderr
    tid = start_task(url, "protocol_error_job")  # a JSON-RPC error: the task fails
    r = cli("task", "wait", url, tid, "--wait-timeout", "30")
    assert (r.returncode, r.stdout, r.stderr) == (
        1, "", "mcp-stateless: server error -32603: Simulated protocol error in a task\n")


@pytest.mark.slow
def test_wait_answers_the_tasks_input_request(url: str) -> None:
    """The task parks in input_required; `wait` answers through the same handler as `call` (stdin is not a
    terminal here, so the elicitation is declined) and the task finishes with that answer."""
    tid = start_task(url, "confirm_delete", "filename=notes.txt")
    r = cli("task", "wait", url, tid, "--wait-timeout", "30")
    assert (r.returncode, r.stdout) == (0, "Kept notes.txt\n"), r.stderr
    assert r.stderr == ('mcp-stateless: declined the server\'s elicitation "Delete notes.txt?": stdin is not a '
                        "terminal\n")


@pytest.mark.slow
def test_wait_timeout_leaves_the_task_running(url: str) -> None:
    tid = start_task(url, "slow_compute", "seconds=30")
    r = cli("task", "wait", url, tid, "--wait-timeout", "0.3")
    assert r.returncode == 1
    assert r.stderr == f"mcp-stateless: error: task {tid} still working after 0.3s\n"
    assert cli("task", "get", url, tid).stdout == f"task {tid}: working\n"
    assert cli("task", "cancel", url, tid).returncode == 0


@pytest.mark.slow
def test_wait_draws_status_when_asked(url: str) -> None:
    tid = start_task(url, "slow_compute", "seconds=1")
    r = cli("task", "wait", url, tid, "--progress")
    assert (r.returncode, r.stdout) == (0, "compute: done after 1s\n"), r.stderr
    frames = r.stderr.split(CLEAR)
    assert frames[0] == "" and frames[-1] == ""  # every frame starts by clearing; the line is erased at the end
    drawn = frames[1:-1]
    assert len(drawn) >= 3
    for frame in drawn:
        spinner, status, elapsed = frame.split("  ")[0].split(" ") + frame.split("  ")[1:2]
        assert spinner in "|/-\\" and status == "working" and elapsed.endswith("s")


@pytest.mark.slow
def test_task_errors(url: str) -> None:
    r = cli("task", "get", url, "tsk_nope")
    assert (r.returncode, r.stderr) == (1, "mcp-stateless: server error -32602: Unknown or expired task: tsk_nope\n")
    r = cli("task", "get", url)
    assert (r.returncode, r.stderr) == (2, "mcp-stateless: error: task get takes one task ID\n")
    r = cli("task", "frob", url, "x")
    assert r.returncode == 2 and "invalid choice: 'frob'" in r.stderr


@pytest.mark.slow
def test_call_without_task_flag_runs_synchronously(url: str) -> None:
    r = cli("call", url, "slow_compute", "seconds=0.1")
    assert (r.returncode, r.stdout) == (0, "compute: done after 0.1s\n"), r.stderr


@pytest.mark.slow
def test_call_progress_line() -> None:
    r = cli("call", "--stdio", FIXTURES, "test_tool_with_progress", "--progress")
    assert (r.returncode, r.stdout) == (0, "Progress test completed\n"), r.stderr
    assert r.stderr == (
        f"{CLEAR}[........................]   0%  Completed step 1 of 3"
        f"{CLEAR}[############............]  50%  Completed step 2 of 3"
        f"{CLEAR}[########################] 100%  Completed step 3 of 3{CLEAR}")
    r = cli("call", "--stdio", FIXTURES, "test_tool_with_progress")  # stderr is a pipe: quiet
    assert (r.returncode, r.stdout, r.stderr) == (0, "Progress test completed\n", "")


@pytest.mark.slow
def test_call_progress_on_a_terminal() -> None:
    """With stderr a terminal and no flag, the line is drawn (and stdout, a pipe, holds only the result)."""
    leader, follower = pty.openpty()
    try:
        proc = subprocess.Popen([CLI, "call", "--stdio", FIXTURES, "test_tool_with_progress"], cwd=ROOT,
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=follower)
        os.close(follower)
        seen = b""
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            ready, _, _ = select.select([leader], [], [], 1.0)
            if not ready:
                if proc.poll() is not None:
                    break
                continue
            try:
                chunk = os.read(leader, 4096)
            except OSError:  # the pty closes when the child exits
                break
            if not chunk:
                break
            seen += chunk
        out, _ = proc.communicate(timeout=30)
    finally:
        os.close(leader)
    assert (proc.returncode, out) == (0, b"Progress test completed\n")
    assert b"[############............]  50%  Completed step 2 of 3" in seen
    assert seen.endswith(CLEAR.encode())


@pytest.fixture(scope="module")
def completing_app(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("apps") / "files.py"
    path.write_text(textwrap.dedent('''
        from mcp_stateless import App

        app = App("files")

        @app.resource("file:///{path}", name="file")
        def read(path: str) -> str:
            return path

        @app.completion(resource="file:///{path}")
        def paths(argument: str, value: str, context: dict[str, str]) -> list[str]:
            return [f"{value}{i:03d}" for i in range(150)]
    '''))
    return f"{sys.executable} -m mcp_stateless.cli serve {path}:app --stdio --state memory://"


@pytest.mark.slow
def test_complete_over_http_option_after_target(url: str) -> None:
    r = cli("complete", url, "--prompt", "test_prompt_with_arguments", "arg1=pa")
    assert (r.returncode, r.stdout, r.stderr) == (0, "paris\npark\nparty\n", "")


@pytest.mark.slow
def test_complete_prompt_argument() -> None:
    r = cli("complete", "--stdio", FIXTURES, "--prompt", "test_prompt_with_arguments", "arg1=par")
    assert (r.returncode, r.stdout, r.stderr) == (0, "paris\npark\nparty\n", "")
    r = cli("complete", "--stdio", FIXTURES, "--prompt", "test_prompt_with_arguments", "arg2=", "--context",
            "arg1=paris", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == {"values": ["red", "green", "blue"]}


@pytest.mark.slow
def test_complete_resource_template(completing_app: str) -> None:
    r = cli("complete", "--stdio", completing_app, "--resource", "file:///{path}", "path=a")
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [f"a{i:03d}" for i in range(100)]
    assert r.stderr == "(100 shown of 150)\n"
    r = cli("complete", "--stdio", completing_app, "--resource", "file:///{path}", "path=a", "--json")
    got = json.loads(r.stdout)
    assert (len(got["values"]), got["total"], got["hasMore"]) == (100, 150, True)


@pytest.mark.slow
@pytest.mark.parametrize(("args", "err", "status"), [
    (["--prompt", "test_prompt_with_arguments"], "mcp-stateless complete: error: argument --prompt: expected 2 "
     "arguments (see `mcp-stateless complete --help`)\n", 2),
    (["--prompt", "test_prompt_with_arguments", "=x"],
     "mcp-stateless: error: expected ARG=PARTIAL after 'test_prompt_with_arguments', got '=x'\n", 2),
    (["--prompt", "test_prompt_with_arguments", "arg1"],
     "mcp-stateless: error: expected ARG=PARTIAL after 'test_prompt_with_arguments', got 'arg1'\n", 2),
    (["--prompt", "nope", "a=b"], "mcp-stateless: server error -32602: Unknown prompt: nope\n", 1),
])
def test_complete_mistakes(args: list[str], err: str, status: int) -> None:
    r = cli("complete", "--stdio", FIXTURES, *args)
    assert (r.returncode, r.stderr) == (status, err)
