"""What a Client ID Metadata Document client needs in the tests: a throwaway self-signed certificate for
127.0.0.1 (the document's URL must be HTTPS), a loopback HTTPS server for the document, and the
authorization server (tests/auth/as/authcode.mjs) in CIMD mode, trusting that certificate.

Test-only relaxations, both in authcode.mjs and nowhere else: oidc-provider's SSRF guard is dropped so it
may fetch the document from 127.0.0.1, and it trusts the certificate through NODE_EXTRA_CA_CERTS."""

from __future__ import annotations

import contextlib
import http.server
import json
import ssl
import subprocess
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from as_harness import AUTHCODE_SCRIPT, AuthServer, running_auth_server

from services import free_port

Tls = tuple[Path, Path]  # (certificate, private key), PEM files


def self_signed_certificate(directory: Path) -> Tls:
    """A one-day self-signed certificate for IP 127.0.0.1."""
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True, timeout=60)
    return cert, key


@contextlib.contextmanager
def https_document(tls: Tls, path: str, make: Callable[[str], Any]) -> Iterator[str]:
    """Serve one JSON document over HTTPS on 127.0.0.1 (`make(url)` builds it); yields its URL. On exit,
    asserts that it was fetched at least once (the authorization server must have read it)."""
    port = free_port()
    url = f"https://127.0.0.1:{port}{path}"
    body = json.dumps(make(url)).encode()
    fetched: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            fetched.append(self.path)
            if self.path != path:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(str(tls[0]), str(tls[1]))
    server.socket = ctx.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield url
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
        assert fetched, "the authorization server never fetched the client metadata document"


@contextlib.contextmanager
def cimd_auth_server(workdir: Path, tls: Tls, kid: str) -> Iterator[AuthServer]:
    """authcode.mjs with Client ID Metadata Documents enabled, trusting `tls`'s certificate."""
    env = {"AS_CIMD": "1", "NODE_EXTRA_CA_CERTS": str(tls[0])}
    with running_auth_server(workdir, kid, AUTHCODE_SCRIPT, env) as server:
        yield server
