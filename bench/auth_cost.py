"""In-process cost of bearer-token authentication on our HTTP hot path: `python bench/auth_cost.py`.

Drives the same `HttpTransport` + App as `bench/hotpath.py` twice: anonymous, and with a
`BearerAuthenticator` checking an RS256 JWT access token on every request (its issuer's metadata and
JWKS served by a stdlib HTTP server on loopback, fetched once, then cached). Prints µs per request for
both and the overhead.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import hotpath
import targets
from joserfc import jwt
from joserfc.jwk import RSAKey

from mcp_stateless.auth import BearerAuthenticator
from mcp_stateless.protocol.principal import AnonymousAuthenticator
from mcp_stateless.transports.http import HttpTransport

RESOURCE = "http://127.0.0.1:8000/mcp"


def start_issuer(key: RSAKey) -> tuple[ThreadingHTTPServer, str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    issuer = f"http://127.0.0.1:{server.server_address[1]}"
    docs = {"/.well-known/oauth-authorization-server": {"issuer": issuer, "jwks_uri": f"{issuer}/jwks"},
            "/jwks": {"keys": [key.as_dict(private=False)]}}

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

    server.RequestHandlerClass = Handler
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, issuer


def with_header(app: Any, name: bytes, value: bytes) -> Any:
    async def wrapped(scope: dict[str, Any], receive: Any, send: Any) -> None:
        scope["headers"] = [*scope["headers"], (name, value)]
        await app(scope, receive, send)

    return wrapped


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("-n", type=int, default=40_000)
    p.add_argument("--conc", type=int, default=16)
    a = p.parse_args()
    key = RSAKey.generate_key(2048, parameters={"kid": "bench", "alg": "RS256"}, private=True)
    server, issuer = start_issuer(key)
    endpoint = targets.build_ours()[0].endpoint
    now = int(time.time())
    token = jwt.encode({"alg": "RS256", "kid": "bench", "typ": "at+jwt"},
                       {"iss": issuer, "sub": "bench-user", "aud": RESOURCE, "iat": now, "exp": now + 3600,
                        "scope": "tools:read", "client_id": "bench"}, key)
    anonymous = HttpTransport(endpoint, authenticator=AnonymousAuthenticator())
    bearer = with_header(HttpTransport(endpoint, authenticator=BearerAuthenticator(RESOURCE, [issuer])),
                         b"authorization", f"Bearer {token}".encode())
    results: dict[str, float] = {}
    for name, app in (("anonymous", anonymous), ("jwt", bearer)):
        asyncio.run(hotpath.drive(app, 2000, a.conc, False))  # warm up (and the one JWKS fetch)
        results[name] = min(asyncio.run(hotpath.drive(app, a.n, a.conc, False)) for _ in range(3))
    server.shutdown()
    over = results["jwt"] / results["anonymous"] - 1
    print(f"anonymous: {results['anonymous']:.1f} µs/request; JWT bearer: {results['jwt']:.1f} µs/request "
          f"(+{over:.0%})")


if __name__ == "__main__":
    main()
