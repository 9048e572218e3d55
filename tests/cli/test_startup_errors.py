"""What a user sees when their app cannot be loaded, and `--version`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import mcp_stateless

# Every test here starts a process (a server, a client, a tool): the fast lane leaves them out.
pytestmark = pytest.mark.slow

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


def test_debug_shows_every_frame_of_an_import_error(tmp_path: Path) -> None:
    app = tmp_path / "broken.py"
    app.write_text('CONFIG = {}\napp = CONFIG["missing"]\n')
    r = run("serve", f"{app}:app", "--stdio", "--log-level", "debug")
    assert r.returncode == 2
    lines = r.stderr.splitlines()
    assert lines[0] == "Traceback (most recent call last):"
    assert "mcp_stateless/cli/loader.py" in lines[1]  # the loader's own frame: nothing is hidden at debug
    assert f'  File "{app}", line 2, in <module>' in lines
    assert lines[-1] == f"mcp-stateless: error: cannot load '{app}:app': importing it raised KeyError: 'missing'"


def test_a_module_in_the_working_directory_is_found_without_pythonpath(tmp_path: Path) -> None:
    (tmp_path / "notes.py").write_text("from mcp_stateless import App\napp = App('notes')\n")
    exe = Path(sys.executable).parent / "mcp-stateless"  # the console script: its sys.path[0] is bin/, not cwd
    r = subprocess.run([str(exe), "serve", "notes:app", "--stdio", "--state", "memory://"], cwd=tmp_path,
                       input="", capture_output=True, text=True, timeout=30)
    assert (r.returncode, r.stdout) == (0, ""), r.stderr


def test_a_missing_dependency_is_not_called_a_missing_module(tmp_path: Path) -> None:
    (tmp_path / "uses_missing.py").write_text("import not_a_real_dependency_xyz\n")
    r = subprocess.run([*EXE, "serve", "uses_missing:app", "--stdio"], cwd=tmp_path, capture_output=True,
                       text=True, timeout=30)
    assert r.returncode == 2
    assert f'  File "{tmp_path / "uses_missing.py"}", line 1, in <module>' == r.stderr.splitlines()[1]
    assert r.stderr.splitlines()[-1] == (
        "mcp-stateless: error: cannot load 'uses_missing:app': importing it raised ModuleNotFoundError: No module "
        "named 'not_a_real_dependency_xyz' (is 'not_a_real_dependency_xyz' installed in this environment, "
        f"{sys.prefix}? e.g. {Path(sys.executable).parent / 'pip'} install not_a_real_dependency_xyz)")


def test_version() -> None:
    r = run("--version")
    assert (r.returncode, r.stdout, r.stderr) == (0, f"mcp-stateless {mcp_stateless.__version__}\n", "")
    assert mcp_stateless.__version__ != ""
