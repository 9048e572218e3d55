"""What a user sees when their app cannot be loaded, and `--version`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import mcp_stateless

EXE = [sys.executable, "-m", "mcp_stateless.cli"]


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*EXE, *args], capture_output=True, text=True, timeout=30)


def test_an_import_error_shows_the_users_traceback_then_one_line(tmp_path: Path) -> None:
    app = tmp_path / "broken.py"
    app.write_text('CONFIG = {}\n\n\ndef make():\n    return CONFIG["missing"]\n\n\napp = make()\n')
    r = run("serve", f"{app}:app", "--stdio")
    assert r.returncode == 2
    assert r.stdout == ""
    lines = r.stderr.splitlines()
    assert lines[0] == "Traceback (most recent call last):"
    assert lines[1] == f'  File "{app}", line 8, in <module>'  # starts in the user's module, not the loader
    assert f'  File "{app}", line 5, in make' in lines
    assert "KeyError: 'missing'" in lines
    assert lines[-1] == f"mcp-stateless: error: cannot load '{app}:app': importing it raised KeyError: 'missing'"


def test_a_failing_factory_shows_its_traceback(tmp_path: Path) -> None:
    app = tmp_path / "factory.py"
    app.write_text("def app():\n    raise RuntimeError('no database')\n")
    r = run("serve", f"{app}:app", "--stdio")
    assert r.returncode == 2
    assert f'  File "{app}", line 2, in app' in r.stderr.splitlines()
    assert r.stderr.splitlines()[-1].endswith("calling app() to build the app raised RuntimeError: no database")


def test_a_syntax_error_is_one_line(tmp_path: Path) -> None:
    app = tmp_path / "syntax.py"
    app.write_text("def broken(:\n")
    r = run("serve", f"{app}:app", "--stdio")
    assert r.returncode == 2
    assert r.stderr.splitlines() == [f"mcp-stateless: error: cannot load '{app}:app': syntax error in {app}, "
                                     "line 1: invalid syntax"]


def test_version() -> None:
    r = run("--version")
    assert (r.returncode, r.stdout, r.stderr) == (0, f"mcp-stateless {mcp_stateless.__version__}\n", "")
    assert mcp_stateless.__version__ != ""
