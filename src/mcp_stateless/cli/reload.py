"""`serve --reload`: run the server in a child process and start a fresh one when a Python file of the app's
source tree changes (needs the `reload` extra, watchfiles).

A fresh process, not a re-import: module state, registered tools and open stores all start over, exactly as
in production. The child gets the supervisor's `ServeConfig` the way workers do (one environment
variable) and runs this module. A child that dies (a syntax error mid-edit) is reported and replaced on the
next change; SIGINT/SIGTERM stop the child, then the supervisor.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from types import FrameType

from .base import CliError
from .config import ServeConfig

log = logging.getLogger("mcp_stateless.reload")
DEBOUNCE_MS = 300  # an editor's save is often several writes: wait for them to settle
STOP_TIMEOUT_S = 10.0  # uvicorn's graceful shutdown is 5 s; then the child is killed


def source_dirs(app: str) -> list[Path]:
    """The directory of `path/to/file.py`, or of the top-level package of `package.module` (found without
    importing it)."""
    target = app.partition(":")[0]
    if target.endswith(".py") or os.sep in target:
        return [Path(target).resolve().parent]
    try:
        spec = importlib.util.find_spec(target.split(".")[0])
    except (ImportError, ValueError):
        spec = None
    if spec is None:
        raise CliError(f"--reload: cannot find module {target!r} to watch (give --reload-dir DIR)")
    if spec.submodule_search_locations:
        return [Path(p).resolve() for p in spec.submodule_search_locations]
    if spec.origin is None:
        raise CliError(f"--reload: {target!r} has no source file to watch (give --reload-dir DIR)")
    return [Path(spec.origin).resolve().parent]


def _start(config: ServeConfig) -> subprocess.Popen[bytes]:
    env = dict(os.environ)
    config.to_env(env)
    child = subprocess.Popen([sys.executable, "-m", __name__], env=env)
    log.info("server started (pid %d)", child.pid)
    return child


def _stop(child: subprocess.Popen[bytes]) -> None:
    if child.poll() is not None:
        return
    child.send_signal(signal.SIGTERM)
    try:
        child.wait(STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        log.warning("server pid %d did not stop in %gs: killed", child.pid, STOP_TIMEOUT_S)
        child.kill()
        child.wait()


def supervise(config: ServeConfig, dirs: Sequence[str] = ()) -> int:
    if config.transport != "http":
        raise CliError("--reload needs --http: a stdio client holds the pipes of one process")
    try:
        from watchfiles import PythonFilter, watch
    except ImportError:
        raise CliError("--reload needs the 'reload' extra (pip install 'mcp-stateless[reload]')") from None
    watched = [Path(d).resolve() for d in dirs] or source_dirs(config.app)
    for d in watched:
        if not d.is_dir():
            raise CliError(f"--reload-dir {d}: not a directory")
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    logging.getLogger("watchfiles").setLevel(logging.WARNING)  # our own line says what changed
    previous = signal.signal(signal.SIGTERM, on_signal)
    from .serve import check_port_free

    check_port_free(config.host, config.port)  # fail now, not in every child
    log.info("watching %s", ", ".join(map(str, watched)))
    child = _start(config)
    exited = False
    try:
        # yield_on_timeout wakes the loop every half second, so a dead child is noticed between changes.
        for changes in watch(*watched, watch_filter=PythonFilter(), debounce=DEBOUNCE_MS, rust_timeout=500,
                             yield_on_timeout=True, stop_event=stop, raise_interrupt=False):
            if not changes:
                if child.poll() is not None and not exited:
                    exited = True
                    log.error("server exited with status %d; waiting for a change", child.returncode)
                continue
            names = sorted({os.path.relpath(path) for _, path in changes})
            log.info("%s changed, restarting", ", ".join(names[:3]) + (" ..." if len(names) > 3 else ""))
            _stop(child)
            child = _start(config)
            exited = False
    finally:
        _stop(child)
        signal.signal(signal.SIGTERM, previous)
    return 0


def _child() -> int:
    """The server the supervisor started: its config, served as without --reload."""
    from . import logs
    from .serve import serve

    config = ServeConfig.from_env()
    logs.configure(config.log_level, config.log_format)
    try:
        return serve(config)
    except CliError as e:
        print(f"mcp-stateless: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(_child())
