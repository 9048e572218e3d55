"""A stand-in authorization server for the authentication benchmarks: its RFC 8414 metadata and JWKS
served by a stdlib HTTP server on loopback (fetched once by the resource server, then cached), and RS256
JWT access tokens (RFC 9068) minted with its key, shaped like a real authorization server's."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from joserfc import jwt
from joserfc.jwk import RSAKey


class Issuer:
    """Serves until `stop()`; `url` is its issuer identifier."""

    def __init__(self) -> None:
        self.key = RSAKey.generate_key(2048, parameters={"kid": "bench", "alg": "RS256"}, private=True)
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        docs = {"/.well-known/oauth-authorization-server": {"issuer": self.url, "jwks_uri": f"{self.url}/jwks"},
                "/jwks": {"keys": [self.key.as_dict(private=False)]}}

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                doc = docs.get(self.path)
                body = json.dumps(doc).encode() if doc is not None else b"{}"
                self.send_response(200 if doc is not None else 404)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self._server.RequestHandlerClass = Handler
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def token(self, resource: str, scope: str = "tools:read", ttl: int = 3600) -> str:
        now = int(time.time())
        claims = {"iss": self.url, "sub": "bench-user", "aud": resource, "iat": now, "exp": now + ttl,
                  "jti": "bench-jti-0001", "scope": scope, "client_id": "bench"}
        return jwt.encode({"alg": "RS256", "kid": "bench", "typ": "at+jwt"}, claims, self.key)

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
