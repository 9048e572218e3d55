"""Instances the auditor starts itself on free loopback ports, behind its own round-robin proxy, and restarts."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import shlex
import shutil
import signal
import socket
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

from ...client.http11 import Pool
from ..proxy import INSTANCE, TAG, RoundRobinProxy
from ..wire import Exchange, Message
from .base import Restart, TargetError
from .http import HttpTarget, http_exchange


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class _Instance:
    def __init__(self, argv: list[str], port: int, log: Path) -> None:
        self.argv, self.port, self.log = argv, port, log
        self.proc: asyncio.subprocess.Process | None = None

    async def start(self, timeout: float) -> None:
        with self.log.open("ab") as out:
            try:
                self.proc = await asyncio.create_subprocess_exec(
                    *self.argv, stdin=asyncio.subprocess.DEVNULL, stdout=out, stderr=out, start_new_session=True)
            except OSError as e:
                raise TargetError(f"cannot start {self.argv[0]!r}: {e.strerror or e}") from None
        deadline = time.monotonic() + timeout
        while True:
            with contextlib.suppress(OSError):
                _, w = await asyncio.open_connection("127.0.0.1", self.port)
                w.close()
                return
            if self.proc.returncode is not None or time.monotonic() > deadline:
                tail = self.log.read_text(errors="replace")[-800:]
                state = f"exited with status {self.proc.returncode}" if self.proc.returncode is not None \
                    else f"did not listen on port {self.port} within {timeout:g} s"
                await self.stop()
                raise TargetError(f"{shlex.join(self.argv)} {state}; its output ends with:\n{tail}")
            await asyncio.sleep(0.05)

    async def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None or proc.returncode is not None:
            return
        for sig, wait in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 5.0)):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, sig)  # its own session: a shell wrapper's children go too
            try:
                await asyncio.wait_for(proc.wait(), wait)
                return
            except TimeoutError:
                continue


class LaunchedTarget(HttpTarget):
    """N instances of `command` (with `{port}` and optionally `{instance}` filled in) on free loopback ports,
    started, restarted and stopped by the auditor, behind its own round-robin proxy: a request for no
    instance in particular goes through the proxy (the proxy's record says which instance served it); a
    check that targets one instance, or holds a connection to it (a lane, a listen stream), goes direct."""

    can_restart = True

    def __init__(self, command: str, instances: int = 3, *, path: str = "/mcp",
                 principals: Mapping[str, str] | None = None, start_timeout: float = 30.0) -> None:
        if "{port}" not in command:
            raise TargetError('--launch needs "{port}" in the command, where the instance\'s port goes')
        if not 1 <= instances <= 16:
            raise TargetError("--instances must be between 1 and 16")
        self.workdir = Path(tempfile.mkdtemp(prefix="mcp-audit-"))
        self.start_timeout = start_timeout
        self.path = path
        self._procs: list[_Instance] = []
        for n in range(instances):
            port = free_port()
            argv = [a.replace("{port}", str(port)).replace("{instance}", f"i{n + 1}") for a in shlex.split(command)]
            self._procs.append(_Instance(argv, port, self.workdir / f"i{n + 1}.log"))
        super().__init__([f"http://127.0.0.1:{p.port}{path}" for p in self._procs], principals)
        self.proxy = RoundRobinProxy([("127.0.0.1", p.port) for p in self._procs])
        self.command = command
        self.description = f"{command} × {instances} (launched, behind the auditor's round-robin proxy)"
        self._tags = itertools.count(1)

    @property
    def url(self) -> str | None:
        """Where untargeted traffic goes: the proxy (known once started)."""
        return self.proxy.url(self.path)

    async def start(self) -> None:
        try:
            await self.proxy.start()
            self.description = f"{self.url} → {self.command} × {self.instances} (launched, round-robin proxy)"
            await asyncio.gather(*(p.start(self.start_timeout) for p in self._procs))
        except BaseException:
            await self.aclose()
            raise

    @property
    def pids(self) -> list[int | None]:
        """Each instance's process id (None while it is stopped)."""
        return [p.proc.pid if p.proc is not None else None for p in self._procs]

    async def _exchange(self, message: Message | None, instance: int | None, http_method: str,
                        headers: dict[str, str], timeout: float) -> Exchange:
        if instance is not None:
            return await super()._exchange(message, instance, http_method, headers, timeout)
        tag = f"t{next(self._tags)}"
        ex = await http_exchange(self.pool, self.proxy.url(self.path), message, instance=0, http_method=http_method,
                                  headers={**headers, TAG: tag}, timeout=timeout)
        ex.headers.pop(TAG, None)
        ex.response_headers.pop(INSTANCE, None)
        served = self.proxy.instance_for(tag)
        if served is not None:  # None: the proxy never read the request (refused, or dropped before it did)
            ex.instance = self.last_instance = served
        return ex

    async def restart(self, which: Restart = "all") -> None:
        chosen = self._procs if which == "all" else [self._procs[self.last_instance]]
        await self.pool.aclose()
        self.pool = Pool()
        await asyncio.gather(*(p.stop() for p in chosen))
        await asyncio.gather(*(p.start(self.start_timeout) for p in chosen))

    async def aclose(self) -> None:
        await super().aclose()
        await self.proxy.aclose()
        await asyncio.gather(*(p.stop() for p in self._procs))
        # The instances' output only serves a start-up error, which quotes its tail: nothing to keep.
        shutil.rmtree(self.workdir, ignore_errors=True)
