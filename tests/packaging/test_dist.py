"""The built distributions, installed the way a user installs them: `python -m build` makes a wheel and an
sdist; each goes into a fresh virtual environment outside the repository, whose `mcp-stateless` then
serves an app over HTTP and calls it. The wheel carries LICENSE, py.typed and the schema data."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from services import http_server

# Every test here starts a process (a server, a client, a tool): the fast lane leaves them out.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
APP = '''from mcp_stateless import App

app = App("packaged", "1.0.0")


@app.tool()
def echo(text: str) -> str:
    return text
'''


def run(*argv: str | Path, cwd: Path, timeout: float = 300) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    r = subprocess.run([str(a) for a in argv], cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env)
    assert r.returncode == 0, f"{argv}: {r.stdout[-2000:]}\n{r.stderr[-4000:]}"
    return r.stdout


def version() -> str:
    import tomllib

    found: str = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    return found


def serve_and_call(venv: Path, workdir: Path) -> None:
    exe = venv / "bin" / "mcp-stateless"
    assert run(exe, "--version", cwd=workdir) == f"mcp-stateless {version()}\n"
    (workdir / "packaged.py").write_text(APP)
    argv = [str(exe), "serve", "packaged.py:app", "--http", "127.0.0.1:{port}", "--state", "memory://"]
    with http_server(argv, "the installed server", cwd=workdir) as url:
        assert run(exe, "call", url, "echo", "text=from the wheel", cwd=workdir) == "from the wheel\n"
    probe = "import mcp_stateless, pathlib; print(pathlib.Path(mcp_stateless.__file__).parent)"
    installed = Path(run(venv / "bin" / "python", "-c", probe, cwd=workdir).strip())
    assert installed.is_relative_to(venv), installed  # the installed copy, not this checkout
    assert (installed / "py.typed").is_file()
    assert (installed / "conformance" / "schemas" / "2026-07-28.json").is_file()


def test_wheel_and_sdist_install_and_serve_in_a_clean_venv(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    run(sys.executable, "-m", "build", "--outdir", dist, ROOT, cwd=tmp_path, timeout=600)
    [wheel] = dist.glob("*.whl")
    [sdist] = dist.glob("*.tar.gz")
    assert wheel.name == f"mcp_stateless-{version()}-py3-none-any.whl"
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
    assert f"mcp_stateless-{version()}.dist-info/licenses/LICENSE" in names
    assert "mcp_stateless/py.typed" in names
    assert not any(n.startswith(("tests/", "bench/", "examples/")) for n in names)

    for name, artifact in (("wheel", wheel), ("sdist", sdist)):
        venv = tmp_path / f"venv-{name}"
        run(sys.executable, "-m", "venv", venv, cwd=tmp_path)
        run(venv / "bin" / "pip", "install", "-q", artifact, cwd=tmp_path, timeout=600)
        workdir = tmp_path / f"work-{name}"
        workdir.mkdir()
        serve_and_call(venv, workdir)
