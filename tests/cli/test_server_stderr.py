"""What a client command does with a stdio server's stderr (issue 27, item 22b): held back on success (a
published 1.x server writes 94 lines of warnings for the version probe alone), its last lines shown after
the error when the command fails, all of it live with `--verbose`; a server writing more than a pipe holds
never stalls."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from services import CLI, need

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
NOISY = f"{sys.executable} -m mcp_stateless.cli serve tests/apps/noisy_stdio_app.py:app --stdio"
TIME_PYTHON = ROOT / ".cache" / "venv-mcp-server-time-2025.9.25" / "bin" / "python"


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([CLI, *args], cwd=ROOT, capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL)


def test_a_published_1x_server_spills_nothing_on_success() -> None:
    need(TIME_PYTHON, "mcp-server-time 2025.9.25 (scripts/setup.sh)")
    r = cli("tools", "--stdio", f"{TIME_PYTHON} -m mcp_server_time --local-timezone UTC")
    assert r.returncode == 0, r.stderr
    assert [line.split("(")[0] for line in r.stdout.splitlines()] == ["get_current_time", "convert_time"]
    assert r.stderr == ""


def test_a_noisy_server_spills_nothing_on_success_and_never_stalls() -> None:
    r = cli("call", "--stdio", NOISY, "hello", "name=ada")
    assert (r.stdout, r.stderr, r.returncode) == ("hello ada\n", "", 0)


def test_a_failing_command_shows_the_end_of_the_servers_stderr_after_the_error() -> None:
    r = cli("call", "--stdio", NOISY, "nope")
    assert (r.stdout, r.returncode) == ("", 1)
    error, heading, *tail = r.stderr.splitlines()
    assert error == "mcp-stateless: server error -32602: Unknown tool: nope"
    assert heading == "mcp-stateless: the server's stderr ended with (--verbose shows all of it):"
    assert tail == [f"  noise {n:04d}: a warning the server writes on its stderr, which is not for the user"
                    for n in range(2980, 3000)]


def test_a_server_that_dies_at_start_says_why() -> None:
    dying = f"{sys.executable} -c \"import sys; print('boom: no module named app', file=sys.stderr); sys.exit(3)\""
    r = cli("tools", "--stdio", dying, "--timeout", "10")
    assert (r.stdout, r.returncode) == ("", 1)
    lines = r.stderr.splitlines()
    heading = lines.index("mcp-stateless: the server's stderr ended with (--verbose shows all of it):")
    assert lines[heading - 1] == "mcp-stateless: error: the server process exited (status 3)", lines
    # The client restarted it once before giving up: each start said the same.
    assert lines[heading + 1:] == ["  boom: no module named app"] * 2


def test_verbose_passes_all_of_it_through() -> None:
    r = cli("call", "--stdio", NOISY, "hello", "name=ada", "--verbose")
    assert (r.stdout, r.returncode) == ("hello ada\n", 0)
    noise = [line for line in r.stderr.splitlines() if line.startswith("noise")]
    assert noise[0].startswith("noise 0000: ") and noise[2999].startswith("noise 2999: ")
    assert noise[3000:] == ["noise: greeting ada"]
