"""In-process cost of bearer-token authentication on our HTTP hot path: `python bench/auth_cost.py`.

Drives the same `HttpTransport` + App as `bench/hotpath.py` twice: anonymous, and with a
`BearerAuthenticator` checking an RS256 JWT access token on every request (its issuer's metadata and
JWKS served on loopback by `issuer.Issuer`, fetched once, then cached). Prints µs per request for
both and the overhead.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import hotpath
import targets
from issuer import Issuer

from mcp_stateless.auth import BearerAuthenticator
from mcp_stateless.protocol.principal import AnonymousAuthenticator
from mcp_stateless.transports.http import HttpTransport

RESOURCE = "http://127.0.0.1:8000/mcp"


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
    issuer = Issuer()
    endpoint = targets.build_ours()[0].endpoint
    token = issuer.token(RESOURCE)
    anonymous = HttpTransport(endpoint, authenticator=AnonymousAuthenticator())
    bearer = with_header(HttpTransport(endpoint, authenticator=BearerAuthenticator(RESOURCE, [issuer.url])),
                         b"authorization", f"Bearer {token}".encode())
    results: dict[str, float] = {}
    for name, app in (("anonymous", anonymous), ("jwt", bearer)):
        asyncio.run(hotpath.drive(app, 2000, a.conc, False))  # warm up (and the one JWKS fetch)
        results[name] = min(asyncio.run(hotpath.drive(app, a.n, a.conc, False)) for _ in range(3))
    issuer.stop()
    over = results["jwt"] / results["anonymous"] - 1
    print(f"anonymous: {results['anonymous']:.1f} µs/request; JWT bearer: {results['jwt']:.1f} µs/request "
          f"(+{over:.0%})")


if __name__ == "__main__":
    main()
