"""`serve --reload` for real: a supervisor subprocess watching a temporary app; editing the file changes the
tool's answer, a syntax error mid-edit is survived, and stopping the supervisor stops its server."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_serve import CLI, ROOT, env

from mcp_stateless.cli.base import CliError
from mcp_stateless.cli.reload import source_dirs
from services import free_port

APP = '''from mcp_stateless import App

app = App("reloading")


@app.tool()
def version() -> str:
    return "{answer}"
'''
WAIT_S = 40.0  # a change is picked up in well under a second; the machine may be busy


def write_app(path: Path, answer: str) -> None:
    path.write_text(APP.format(answer=answer))


def call(url: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([CLI, "call", url, "version", "--timeout", "5"], capture_output=True, text=True,
                          timeout=30, stdin=subprocess.DEVNULL)


def wait_answer(url: str, answer: str) -> None:
    deadline = time.monotonic() + WAIT_S
    last = None
    while time.monotonic() < deadline:
        last = call(url)
        if (last.returncode, last.stdout) == (0, answer + "\n"):
            return
        time.sleep(0.3)
    pytest.fail(f"no {answer!r} within {WAIT_S}s; last: {last}")


@pytest.fixture
def reloading(tmp_path: Path) -> Iterator[tuple[str, Path, subprocess.Popen[str], Path]]:
    app = tmp_path / "src" / "app.py"
    app.parent.mkdir()
    write_app(app, "v1")
    port = free_port()
    log = tmp_path / "stderr.log"
    with log.open("w") as err:
        proc = subprocess.Popen([CLI, "serve", str(app), "--http", f"127.0.0.1:{port}", "--reload",
                                 "--state", "memory://"], cwd=tmp_path, stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=err, text=True, env=env())
        try:
            yield f"http://127.0.0.1:{port}/mcp", app, proc, log
        finally:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(30)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(5)


def server_pids(log: Path) -> list[int]:
    return [int(p) for p in re.findall(r"mcp_stateless\.reload: server started \(pid (\d+)\)", log.read_text())]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.slow
def test_editing_the_app_changes_the_answer(reloading: tuple[str, Path, subprocess.Popen[str], Path]) -> None:
    url, app, proc, log = reloading
    wait_answer(url, "v1")
    write_app(app, "v2")
    wait_answer(url, "v2")
    pids = server_pids(log)
    assert len(pids) == 2 and not alive(pids[0])  # a fresh process, the old one gone
    assert f"INFO mcp_stateless.reload: watching {app.parent}" in log.read_text()
    assert "INFO mcp_stateless.reload: src/app.py changed, restarting" in log.read_text()
    # a change outside Python sources is not a reason to restart
    (app.parent / "notes.txt").write_text("x")
    time.sleep(1.5)
    assert len(server_pids(log)) == 2
    # stopping the supervisor stops its server
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(30) == 0
    assert not alive(pids[1])


@pytest.mark.slow
def test_a_broken_edit_is_survived(reloading: tuple[str, Path, subprocess.Popen[str], Path]) -> None:
    url, app, proc, log = reloading
    wait_answer(url, "v1")
    app.write_text(APP.format(answer="v2") + "\ndef broken(:\n")
    deadline = time.monotonic() + WAIT_S
    while "waiting for a change" not in log.read_text():
        assert time.monotonic() < deadline, log.read_text()
        time.sleep(0.2)
    text = log.read_text()
    assert f"mcp-stateless: error: cannot load '{app}': syntax error in {app}, line 10: invalid syntax" in text
    assert "ERROR mcp_stateless.reload: server exited with status 2; waiting for a change" in text
    assert call(url).returncode == 1  # nothing listens meanwhile
    assert proc.poll() is None  # but the supervisor keeps watching
    write_app(app, "v3")
    wait_answer(url, "v3")


@pytest.mark.slow
def test_reload_needs_http() -> None:
    r = subprocess.run([CLI, "serve", "examples/echo.py", "--stdio", "--reload"], cwd=ROOT, capture_output=True,
                       text=True, timeout=30, stdin=subprocess.DEVNULL, env=env())
    assert (r.returncode, r.stderr) == (
        2, "mcp-stateless: error: --reload needs --http: a stdio client holds the pipes of one process\n")


@pytest.mark.slow
def test_reload_dir_must_exist(tmp_path: Path) -> None:
    r = subprocess.run([CLI, "serve", "examples/echo.py", "--http", f"127.0.0.1:{free_port()}", "--reload",
                        "--reload-dir", str(tmp_path / "nope")], cwd=ROOT, capture_output=True, text=True,
                       timeout=30, stdin=subprocess.DEVNULL, env=env())
    assert (r.returncode, r.stderr) == (2, f"mcp-stateless: error: --reload-dir {tmp_path / 'nope'}: not a directory\n")


def test_source_dirs() -> None:
    assert source_dirs("examples/echo.py:app") == [ROOT / "examples"]
    package = Path(__import__("mcp_stateless").__file__).resolve().parent
    assert source_dirs("mcp_stateless.cli.serve:app") == [package]  # the whole top-level package
    with pytest.raises(CliError, match=r"^--reload: cannot find module 'no_such_module_t14c' to watch "
                                       r"\(give --reload-dir DIR\)$"):
        source_dirs("no_such_module_t14c:app")
