"""The command line imports what its command needs and no more: a client command never loads the server stack."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

# Every test here starts a process (a server, a client, a tool): the fast lane leaves them out.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
SERVER_STACK = ("pydantic", "jsonschema", "uvicorn", "mcp_stateless.server", "mcp_stateless.state",
                "mcp_stateless.transports")
ECHO = f"{sys.executable} -m mcp_stateless.cli serve examples/echo.py:app --stdio"


def modules_after(code: str) -> list[str]:
    """Top-level packages of SERVER_STACK (and their submodules) imported once `code` has run."""
    probe = (
        "import sys, json\n"
        f"{code}\n"
        f"stack = {SERVER_STACK!r}\n"
        "loaded = sorted(m for m in sys.modules if any(m == s or m.startswith(s + '.') for s in stack))\n"
        "sys.__stdout__.write('\\n' + json.dumps(loaded) + '\\n')\n"
    )
    r = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=60,
                       stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr
    loaded: list[str] = json.loads(r.stdout.strip().splitlines()[-1])
    return loaded


def test_importing_the_cli_loads_no_server_stack() -> None:
    assert modules_after("import mcp_stateless.cli") == []


def test_help_loads_no_server_stack() -> None:
    code = ("from mcp_stateless.cli import main\n"
            "for argv in (['--help'], ['serve', '--help'], ['tools', '--help']):\n"
            "    try:\n        main(argv)\n    except SystemExit as e:\n        assert e.code == 0, e\n")
    assert modules_after(code) == []


def test_client_commands_load_no_server_stack() -> None:
    code = ("from mcp_stateless.cli import main\n"
            f"assert main(['tools', '--stdio', {ECHO!r}]) == 0\n"
            f"assert main(['call', '--stdio', {ECHO!r}, 'add', 'a=1', 'b=2']) == 0\n"
            f"assert main(['discover', '--stdio', {ECHO!r}, '--json']) == 0\n")
    assert modules_after(code) == []


def test_complete_task_and_install_load_no_server_stack() -> None:
    fixtures = f"{sys.executable} -m mcp_stateless.cli serve examples/conformance_server.py:app --stdio " \
               "--state memory://"
    code = ("from mcp_stateless.cli import main\n"
            f"assert main(['complete', '--stdio', {fixtures!r}, '--prompt', 'test_prompt_with_arguments', "
            "'arg1=p']) == 0\n"
            f"assert main(['task', 'get', '--stdio', {fixtures!r}, 'tsk_unknown']) == 1\n"
            "assert main(['install', 'cursor', 'examples/echo.py:app', '--print']) == 0\n")
    assert modules_after(code) == []


def test_the_probe_sees_the_server_stack_when_it_is_loaded() -> None:
    """The check above can fail: serving does import the stack."""
    loaded = modules_after("from mcp_stateless.cli.loader import load_app\nload_app('examples/echo.py:app')")
    assert "pydantic" in loaded and "mcp_stateless.server.app" in loaded
