"""`mcp-stateless login` against a protected resource and an authorization server that misbehave (issue 27,
item 18): a real local HTTP server (threads) that trickles its metadata a byte at a time, or streams an
endless chunked metadata body declared as one 200 MiB chunk. The login fails promptly, within its
`--timeout` per exchange, with one clear line, and its memory stays flat (the body is refused while read)."""

from __future__ import annotations

import contextlib
import http.server
import os
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from services import CLI

pytestmark = pytest.mark.slow

TIMEOUT = 2.0  # the login's --timeout in these tests
TRICKLE_FOR = 60.0  # how long a trickling answer would go on: far beyond what the login may wait


class Hostile(http.server.ThreadingHTTPServer):
    daemon_threads = True


def _handler() -> type[http.server.BaseHTTPRequestHandler]:
    class H(http.server.BaseHTTPRequestHandler):
        server: Hostile
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: object) -> None:
            pass

        @property
        def base(self) -> str:
            return f"http://127.0.0.1:{self.server.server_address[1]}"

        def _json(self, doc: object) -> None:
            data = orjson.dumps(doc)
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _trickle(self) -> None:
            """A JSON document that never completes: a space every 0.1 s (bounded by TRICKLE_FOR)."""
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(1 << 20))
            self.end_headers()
            deadline = time.monotonic() + TRICKLE_FOR
            try:
                while time.monotonic() < deadline:
                    self.wfile.write(b" ")
                    self.wfile.flush()
                    time.sleep(0.1)
            except OSError:
                pass  # the client hung up: what it should do

        def _endless_chunk(self) -> None:
            """One chunk declared as 200 MiB, its bytes sent as fast as the client takes them."""
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("transfer-encoding", "chunked")
            self.end_headers()
            piece = b" " * (1 << 20)
            try:
                self.wfile.write(b"%x\r\n" % (200 << 20))
                for _ in range(200):
                    self.wfile.write(piece)
                self.wfile.write(b"\r\n0\r\n\r\n")
            except OSError:
                pass

        def do_POST(self) -> None:  # the MCP endpoint: /mcp/<where>/<how>, always 401 naming its metadata
            self.rfile.read(int(self.headers.get("content-length", "0")))
            where_how = self.path.removeprefix("/mcp/")
            self.send_response(401)
            self.send_header("www-authenticate", f'Bearer resource_metadata="{self.base}/prm/{where_how}"')
            self.send_header("content-length", "0")
            self.end_headers()

        def do_GET(self) -> None:
            if self.path.startswith("/prm/"):
                where, how = self.path.removeprefix("/prm/").split("/")
                if where == "resource":
                    self._trickle() if how == "trickle" else self._endless_chunk()
                else:
                    self._json({"resource": f"{self.base}/mcp/{where}/{how}",
                                "authorization_servers": [f"{self.base}/as/{how}"]})
            elif self.path.startswith("/.well-known/oauth-authorization-server/as/"):
                how = self.path.rsplit("/", 1)[1]
                self._trickle() if how == "trickle" else self._endless_chunk()
            else:
                self.send_response(404)
                self.send_header("content-length", "0")
                self.end_headers()

    return H


@pytest.fixture(scope="module")
def hostile() -> Iterator[str]:
    srv = Hostile(("127.0.0.1", 0), _handler())
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{srv.server_address[1]}"
    finally:
        srv.shutdown()
        srv.server_close()


def login(url: str, tmp: Path, budget: float) -> tuple[int, str, float, int]:
    """Run `mcp-stateless login URL` to its end (killed after `budget` s): its exit status, stderr, seconds
    taken and peak memory (KiB: the highest VmHWM of that one program, sampled every 10 ms while it runs; the
    rusage of wait4 would count the RSS of this test process it was forked from, ~190 MB late in a full run)."""
    with tempfile.TemporaryFile() as err:
        start = time.monotonic()
        proc = subprocess.Popen([CLI, "login", url, "--no-browser", "--wait", "5", "--timeout", str(TIMEOUT),
                                 "--token-store", str(tmp / "tokens.json")],
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err)
        peak = 0
        while True:
            with contextlib.suppress(OSError, ValueError, StopIteration):
                status_text = Path(f"/proc/{proc.pid}/status").read_text()
                peak = max(peak, int(next(line.split()[1] for line in status_text.splitlines()
                                          if line.startswith("VmHWM:"))))
            pid, status, _usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() - start > budget:
                proc.kill()
                os.wait4(proc.pid, 0)
                proc.returncode = -9  # reaped here: Popen must not wait for it again
                pytest.fail(f"login still running after {budget} s")
            time.sleep(0.01)
        took = time.monotonic() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        return proc.returncode, err.read().decode(), took, peak


@pytest.mark.parametrize("where", ["resource", "server"])
def test_trickling_metadata_ends_the_login_promptly(hostile: str, tmp_path: Path, where: str) -> None:
    """Each metadata exchange has the whole `--timeout`, however slowly its bytes arrive (a per-read timeout
    never trips on a byte every 0.1 s)."""
    status, err, took, _ = login(f"{hostile}/mcp/{where}/trickle", tmp_path, budget=30)
    assert status == 1, err
    metadata = (f"{hostile}/prm/resource/trickle" if where == "resource"
                else f"{hostile}/.well-known/oauth-authorization-server/as/trickle")
    assert f"{metadata}: no complete answer within {TIMEOUT:g} s" in err, err
    assert err.startswith("mcp-stateless: login failed: "), err
    assert took < TIMEOUT + 5, took  # one exchange's budget, and the process's start


@pytest.mark.parametrize("where", ["resource", "server"])
def test_an_endless_chunked_metadata_body_is_refused_while_read(hostile: str, tmp_path: Path, where: str) -> None:
    status, err, took, peak_kib = login(f"{hostile}/mcp/{where}/endless", tmp_path, budget=60)
    assert status == 1, err
    assert "answered with more than 1048576 bytes" in err, err
    assert peak_kib < 120 * 1024, f"peak {peak_kib} KiB"  # the 200 MiB chunk was never buffered
    assert took < 10, took

