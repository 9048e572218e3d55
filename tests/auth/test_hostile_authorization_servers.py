"""`BearerAuthenticator` against authorization servers that misbehave: a real local HTTP server (threads)
that trickles its JWKS or introspection answers, streams a huge JWKS, serves a key set without `keys`, or
answers for another issuer. Each refusal is prompt and exact (503 while the issuer is unusable, 401 for a
bad token), memory stays flat, and nothing escapes as an exception (a 500)."""

from __future__ import annotations

import asyncio
import base64
import http.server
import resource
import threading
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import orjson
import pytest

from mcp_stateless.auth import BearerAuthenticator, Introspection
from mcp_stateless.auth.bearer import IssuerUnavailable, TokenRejected
from mcp_stateless.protocol.principal import Challenge, Credentials, Principal

RESOURCE = "http://127.0.0.1:9/mcp"
TIMEOUT = 1.0  # the authenticator's fetch budget in these tests


class Hostile(http.server.ThreadingHTTPServer):
    daemon_threads = True
    seen: Counter[str]
    answers: dict[str, Any]  # introspection answers by token


def _handler() -> type[http.server.BaseHTTPRequestHandler]:
    class H(http.server.BaseHTTPRequestHandler):
        server: Hostile
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: object) -> None:
            pass

        def _json(self, doc: object) -> None:
            data = orjson.dumps(doc)
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            base = f"http://127.0.0.1:{self.server.server_address[1]}"
            if self.path.startswith("/.well-known/oauth-authorization-server/"):
                mode = self.path.rsplit("/", 1)[1]
                self._json({"issuer": f"{base}/{mode}", "jwks_uri": f"{base}/jwks/{mode}",
                            "introspection_endpoint": f"{base}/introspect/{mode}"})
                return
            mode = self.path.rsplit("/", 1)[1]
            self.server.seen[self.path] += 1
            if mode == "nokeys":
                self._json({"issuer": "x"})
            elif mode == "trickle":  # a byte every 0.1 s, for at most 20 s
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", "200")
                self.end_headers()
                for _ in range(200):
                    self.wfile.write(b" ")
                    self.wfile.flush()
                    time.sleep(0.1)
            elif mode in ("huge", "declared"):  # 200 MiB of JSON, chunked (no length) or declared up front
                self.send_response(200)
                self.send_header("content-type", "application/json")
                if mode == "huge":
                    self.send_header("transfer-encoding", "chunked")
                else:
                    self.send_header("content-length", str(200 << 20))
                self.end_headers()
                piece = b" " * (1 << 20)
                for _ in range(200):
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece) if mode == "huge" else piece)
                self.wfile.write(b"0\r\n\r\n" if mode == "huge" else b"")
            else:
                self.send_error(404)

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["content-length"])).decode()
            token = body.partition("token=")[2].partition("&")[0]
            self.server.seen[f"introspect:{token}"] += 1
            if self.path.endswith("/trickle"):
                self.send_response(200)
                self.send_header("content-length", "200")
                self.end_headers()
                for _ in range(200):
                    self.wfile.write(b" ")
                    self.wfile.flush()
                    time.sleep(0.1)
                return
            self._json(self.server.answers.get(token, {"active": False}))

    return H


@pytest.fixture(scope="module")
def hostile() -> Iterator[Hostile]:
    srv = Hostile(("127.0.0.1", 0), _handler())
    srv.seen = Counter()
    srv.answers = {}
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        yield srv
    finally:
        srv.shutdown()
        srv.server_close()


def base_of(srv: Hostile) -> str:
    return f"http://127.0.0.1:{srv.server_address[1]}"


def _b64(doc: object) -> str:
    return base64.urlsafe_b64encode(orjson.dumps(doc)).rstrip(b"=").decode()


def jwt_of(issuer: str) -> str:
    """A JWT-shaped token naming `issuer` and an unknown kid: verifying it needs the issuer's JWKS."""
    claims = {"iss": issuer, "sub": "u", "aud": RESOURCE, "exp": int(time.time()) + 60}
    return f"{_b64({'alg': 'RS256', 'typ': 'at+jwt', 'kid': 'k1'})}.{_b64(claims)}.c2ln"


def authenticate(auth: BearerAuthenticator, header: str) -> tuple[Principal | Challenge, float]:
    async def run() -> tuple[Principal | Challenge, float]:
        start = time.monotonic()
        try:
            return await auth.authenticate(Credentials("http", {"authorization": header})), time.monotonic() - start
        finally:
            await auth.aclose()
    return asyncio.run(run())


UNAVAILABLE = Challenge(503, "", "Authorization server unavailable; try again later", -32603)


@pytest.mark.slow
def test_a_trickling_jwks_is_a_prompt_503(hostile: Hostile) -> None:
    issuer = f"{base_of(hostile)}/trickle"
    got, took = authenticate(BearerAuthenticator(RESOURCE, [issuer], timeout=TIMEOUT), f"Bearer {jwt_of(issuer)}")
    assert got == UNAVAILABLE
    assert took < TIMEOUT + 1.0, took  # the old per-read timeout never tripped: 20 s of trickle


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["huge", "declared"])
def test_a_two_hundred_mebibyte_jwks_is_refused_while_read_and_memory_stays_flat(hostile: Hostile, mode: str) -> None:
    issuer = f"{base_of(hostile)}/{mode}"
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    with pytest.raises(IssuerUnavailable, match=r"body larger than 1048576 bytes$"):
        asyncio.run(_verify(BearerAuthenticator(RESOURCE, [issuer], timeout=10), jwt_of(issuer)))
    grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert grown < 50 * 1024, f"grew {grown} KiB"


async def _verify(auth: BearerAuthenticator, token: str) -> Principal:
    try:
        return await auth.verify(token)
    finally:
        await auth.aclose()


def test_a_jwks_without_keys_is_a_503_naming_it_not_an_exception(hostile: Hostile) -> None:
    issuer = f"{base_of(hostile)}/nokeys"
    with pytest.raises(IssuerUnavailable, match=r'^JWKS of http://127\.0\.0\.1:\d+/nokeys has no "keys" list$'):
        asyncio.run(_verify(BearerAuthenticator(RESOURCE, [issuer]), jwt_of(issuer)))
    got, _ = authenticate(BearerAuthenticator(RESOURCE, [issuer]), f"Bearer {jwt_of(issuer)}")
    assert got == UNAVAILABLE


@pytest.mark.slow
def test_a_trickling_introspection_endpoint_is_a_prompt_503(hostile: Hostile) -> None:
    issuer = f"{base_of(hostile)}/trickle"
    auth = BearerAuthenticator(RESOURCE, [issuer], timeout=TIMEOUT, introspection=Introspection(
        "rs", "secret", endpoint=f"{base_of(hostile)}/introspect/trickle"))
    got, took = authenticate(auth, "Bearer opaque-trickle")
    assert got == UNAVAILABLE
    assert took < TIMEOUT + 1.0, took


def test_an_answer_of_issuer_a_naming_trusted_issuer_b_is_not_credited_to_b(hostile: Hostile) -> None:
    a, b = f"{base_of(hostile)}/a", f"{base_of(hostile)}/b"
    hostile.answers["cross"] = {"active": True, "iss": b, "sub": "mallory", "aud": RESOURCE,
                                "exp": int(time.time()) + 60}
    hostile.answers["own"] = {"active": True, "iss": a, "sub": "alice", "aud": RESOURCE,
                              "exp": int(time.time()) + 60}
    for conf in (Introspection("rs", "secret", endpoint=f"{base_of(hostile)}/introspect/a"),  # default: the first
                 Introspection("rs", "secret", endpoint=f"{base_of(hostile)}/introspect/a", issuer=a)):
        with pytest.raises(TokenRejected, match=r"^inactive$"):
            asyncio.run(_verify(BearerAuthenticator(RESOURCE, [a, b], introspection=conf), "cross"))
        assert asyncio.run(_verify(BearerAuthenticator(RESOURCE, [a, b], introspection=conf), "own")).id == f"{a}#alice"
    with pytest.raises(ValueError, match="one of the trusted issuers"):
        BearerAuthenticator(RESOURCE, [a], introspection=Introspection("rs", "s", issuer=b))


def test_random_tokens_do_not_evict_a_cached_introspection(hostile: Hostile) -> None:
    issuer = f"{base_of(hostile)}/c"
    hostile.answers["real-user"] = {"active": True, "sub": "bob", "aud": RESOURCE, "exp": int(time.time()) + 60}
    auth = BearerAuthenticator(RESOURCE, [issuer], introspection=Introspection(
        "rs", "secret", endpoint=f"{base_of(hostile)}/introspect/c", cache_size=10))

    async def run() -> None:
        try:
            assert (await auth.verify("real-user")).id == f"{issuer}#bob"
            for i in range(50):  # five times the cache: each refused by the endpoint
                with pytest.raises(TokenRejected, match=r"^inactive$"):
                    await auth.verify(f"random-{i}")
            assert (await auth.verify("real-user")).id == f"{issuer}#bob"
        finally:
            await auth.aclose()

    asyncio.run(run())
    assert hostile.seen["introspect:real-user"] == 1  # the second use came from the cache
    assert hostile.seen["introspect:random-7"] == 1


@pytest.mark.parametrize("size", [768 << 10, 1 << 20, 8 << 20])
def test_an_oversized_token_is_refused_before_any_work(hostile: Hostile, size: int) -> None:
    issuer = f"{base_of(hostile)}/c"
    auth = BearerAuthenticator(RESOURCE, [issuer], introspection=Introspection(
        "rs", "secret", endpoint=f"{base_of(hostile)}/introspect/c"))
    token = "a" * size
    got, took = authenticate(auth, f"Bearer {token}")
    assert isinstance(got, Challenge) and (got.status, got.message) == (
        401, "Invalid access token: token larger than 16384 bytes")
    assert took < 0.05, took
    assert hostile.seen[f"introspect:{token}"] == 0  # never sent to the endpoint
    with pytest.raises(TokenRejected, match=r"^token larger than 16384 bytes$"):
        asyncio.run(_verify(auth, "b" * size))
    # a JWT-shaped one of the same size is not even split
    got, _ = authenticate(auth, "Bearer " + "a" * (size // 2) + "." + "b" * (size // 2) + ".c")
    assert isinstance(got, Challenge) and got.message == "Invalid access token: token larger than 16384 bytes"
