"""`BearerAuthenticator`'s rules, one by one and exactly, in process: every refusal's status and message, the
principal a token becomes, what is cached and what is fetched again, and RFC 7662 introspection.

The issuer is a small HTTP server on 127.0.0.1 in a thread of this process, serving real RFC 8414 metadata,
a JWKS and an introspection endpoint, with tokens signed by joserfc; it counts every request, so a rule about
caching or refetching is checked by what reached the issuer. The real authorization server (oidc-provider)
is exercised end to end in test_resource_server.py; this file pins the rules those flows cannot isolate."""

from __future__ import annotations

import base64
import functools
import json
import threading
import time
import urllib.parse
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import orjson
import pytest
from joserfc import jws
from joserfc.jwk import RSAKey

from mcp_stateless.auth import BearerAuthenticator, Introspection
from mcp_stateless.protocol.principal import Challenge, Credentials, Principal

RESOURCE = "https://mcp.example/mcp"
META = "https://mcp.example/.well-known/oauth-protected-resource/mcp"


@dataclass
class Issuer:
    """What the issuer serves; tests change it between requests."""

    url: str = ""
    keys: list[RSAKey] = field(default_factory=list)
    metadata: dict[str, Any] | None = None  # None: the default document
    metadata_status: dict[str, int] = field(default_factory=dict)  # path -> status instead of the document
    introspection: dict[str, Any] = field(default_factory=dict)  # token -> answer
    introspection_status: int = 200
    introspection_raw: bytes | None = None
    hits: Counter[str] = field(default_factory=Counter)
    basic: list[str] = field(default_factory=list)
    forms: list[dict[str, list[str]]] = field(default_factory=list)
    accepts: list[str | None] = field(default_factory=list)  # the Accept header of each introspection
    get_accepts: list[str | None] = field(default_factory=list)  # the Accept header of each GET
    jwks_raw: bytes | None = None  # served as the JWKS instead of the keys
    chunked: bool = False  # bodies without Content-Length, in chunks of 100 bytes
    redirects: dict[str, str] = field(default_factory=dict)  # path -> Location of a 302

    def document(self) -> dict[str, Any]:
        if self.metadata is not None:
            return self.metadata
        return {"issuer": self.url, "jwks_uri": f"{self.url}/jwks", "introspection_endpoint": f"{self.url}/introspect"}

    def token(self, claims: dict[str, Any] | None = None, *, key: RSAKey | None = None,
              header: dict[str, Any] | None = None, drop: tuple[str, ...] = ()) -> str:
        key = key or self.keys[0]
        now = int(time.time())
        body = {"iss": self.url, "sub": "alice", "aud": RESOURCE, "exp": now + 300, "iat": now,
                "scope": "read write", **(claims or {})}
        for name in drop:
            body.pop(name, None)
        head = {"alg": "RS256", "typ": "at+jwt", "kid": key.kid, **(header or {})}
        return jws.serialize_compact({k: v for k, v in head.items() if v is not None}, orjson.dumps(body), key)


def _handler(issuer: Issuer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        protocol_version = "HTTP/1.1"

        def _send(self, status: int, body: bytes) -> None:
            self.send_response(status)
            self.send_header("content-type", "application/json")
            if issuer.chunked:
                self.send_header("transfer-encoding", "chunked")
                self.send_header("connection", "close")
                self.end_headers()
                for i in range(0, len(body), 100):
                    part = body[i:i + 100]
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
                self.wfile.write(b"0\r\n\r\n")
                self.close_connection = True
                return
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            issuer.hits[self.path] += 1
            issuer.get_accepts.append(self.headers.get("accept"))
            if self.path in issuer.redirects:
                self.send_response(302)
                self.send_header("location", issuer.redirects[self.path])
                self.send_header("content-length", "0")
                self.end_headers()
            elif self.path in issuer.metadata_status:
                self._send(issuer.metadata_status[self.path], b"{}")
            elif self.path == "/.well-known/oauth-authorization-server":
                self._send(200, json.dumps(issuer.document()).encode())
            elif self.path == "/jwks" and issuer.jwks_raw is not None:
                self._send(200, issuer.jwks_raw)
            elif self.path == "/jwks":
                self._send(200, json.dumps({"keys": [k.as_dict(private=False) for k in issuer.keys]}).encode())
            else:
                self._send(404, b"{}")

        def do_POST(self) -> None:
            issuer.hits[self.path] += 1
            form = urllib.parse.parse_qs(self.rfile.read(int(self.headers["content-length"])).decode())
            issuer.forms.append(form)
            issuer.basic.append(self.headers.get("authorization", ""))
            issuer.accepts.append(self.headers.get("accept"))
            if issuer.introspection_raw is not None:
                self._send(issuer.introspection_status, issuer.introspection_raw)
                return
            answer = issuer.introspection.get(form["token"][0], {"active": False})
            self._send(issuer.introspection_status, json.dumps(answer).encode())

    return Handler


@functools.cache
def _key(name: str, kid: str) -> RSAKey:
    """One RSA key per name for the whole module (generating one takes a while)."""
    return RSAKey.generate_key(2048, parameters={"kid": kid})


@pytest.fixture
def issuer() -> Iterator[Issuer]:
    state = Issuer(keys=[_key("k1", "k1")])
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    yield state
    server.shutdown()
    server.server_close()


def _creds(value: str | None) -> Credentials:
    return Credentials(transport="http", headers={} if value is None else {"authorization": value})


async def _auth(auth: BearerAuthenticator, token: str) -> Principal | Challenge:
    return await auth.authenticate(_creds(f"Bearer {token}"))


def _refused(got: Principal | Challenge, why: str, scope: str = "") -> None:
    assert isinstance(got, Challenge), got
    suffix = f', scope="{scope}"' if scope else ""
    assert (got.status, got.www_authenticate, got.message) == (
        401, f'Bearer error="invalid_token", resource_metadata="{META}"{suffix}', f"Invalid access token: {why}")


async def test_a_valid_token_is_its_issuer_and_subject_with_its_scopes_and_claims(issuer: Issuer) -> None:
    auth = BearerAuthenticator(RESOURCE, [issuer.url])
    token = issuer.token({"exp": 2_000_000_000, "team": "blue"})
    got = await _auth(auth, token)
    assert isinstance(got, Principal)
    assert (got.id, got.scopes, got.claims["team"], got.expires_at) == (
        f"{issuer.url}#alice", frozenset({"read", "write"}), "blue", 2_000_000_030.0)  # exp + the 30 s leeway
    await auth.aclose()


async def test_scp_lists_are_scopes_when_there_is_no_scope_string(issuer: Issuer) -> None:
    auth = BearerAuthenticator(RESOURCE, [issuer.url])
    got = await _auth(auth, issuer.token({"scp": ["a", 7, "b"]}, drop=("scope",)))
    assert isinstance(got, Principal) and got.scopes == frozenset({"a", "b"})
    got = await _auth(auth, issuer.token({"scp": "a b"}, drop=("scope",)))
    assert isinstance(got, Principal) and got.scopes == frozenset()
    await auth.aclose()


async def test_the_audience_may_be_a_list_that_names_this_resource(issuer: Issuer) -> None:
    auth = BearerAuthenticator(RESOURCE, [issuer.url])
    assert isinstance(await _auth(auth, issuer.token({"aud": ["https://other", RESOURCE]})), Principal)
    _refused(await _auth(auth, issuer.token({"aud": ["https://other"]})), "audience is not this resource")
    _refused(await _auth(auth, issuer.token({"aud": "https://mcp.example/"})), "audience is not this resource")
    _refused(await _auth(auth, issuer.token(drop=("aud",))), "audience is not this resource")
    await auth.aclose()


@pytest.mark.parametrize(("change", "why"), [
    ({"exp": -90}, "expired"),  # well past the 30 s leeway
    ({"nbf": 90}, "not valid yet"),
    ({"nbf": "soon"}, "not valid yet"),
    ({"exp": "later"}, "no exp claim"),
    ({"exp": True}, "no exp claim"),
    ({"sub": ""}, "no sub claim"),
    ({"sub": 42}, "no sub claim"),
    ({"iss": "https://untrusted.example"}, "issuer not trusted"),
    ({"iss": 5}, "issuer not trusted"),
])
async def test_each_claim_rule_refuses_with_its_own_reason(issuer: Issuer, change: dict[str, Any], why: str) -> None:
    now = int(time.time())
    claims = {k: now + v if k in ("exp", "nbf") and isinstance(v, int) and not isinstance(v, bool) else v
              for k, v in change.items()}
    auth = BearerAuthenticator(RESOURCE, [issuer.url], required_scopes=["read"])
    _refused(await _auth(auth, issuer.token(claims)), why, scope="read")
    await auth.aclose()


async def test_times_within_the_leeway_are_accepted(issuer: Issuer) -> None:
    now = int(time.time())
    auth = BearerAuthenticator(RESOURCE, [issuer.url])
    assert isinstance(await _auth(auth, issuer.token({"exp": now - 20})), Principal)
    assert isinstance(await _auth(auth, issuer.token({"nbf": now + 20})), Principal)
    strict = BearerAuthenticator(RESOURCE, [issuer.url], leeway=0)
    _refused(await _auth(strict, issuer.token({"exp": now - 2})), "expired")
    await auth.aclose()
    await strict.aclose()


async def test_a_token_missing_exp_is_refused(issuer: Issuer) -> None:
    auth = BearerAuthenticator(RESOURCE, [issuer.url])
    _refused(await _auth(auth, issuer.token(drop=("exp",))), "no exp claim")
    await auth.aclose()


@pytest.mark.parametrize(("typ", "accepted"), [
    ("at+jwt", True), ("AT+JWT", True), ("application/at+jwt", True), ("JWT", False), (None, False)])
async def test_only_access_token_typs_are_accepted(issuer: Issuer, typ: str | None, accepted: bool) -> None:
    auth = BearerAuthenticator(RESOURCE, [issuer.url])
    got = await _auth(auth, issuer.token(header={"typ": typ}))
    if accepted:
        assert isinstance(got, Principal)
    else:
        _refused(got, "not an access token (typ must be at+jwt)")
    await auth.aclose()


async def test_malformed_headers_and_tokens_are_refused_by_name(issuer: Issuer) -> None:
    auth = BearerAuthenticator(RESOURCE, [issuer.url], required_scopes=["read"])
    bare = await auth.authenticate(_creds(None))
    assert isinstance(bare, Challenge)
    assert (bare.status, bare.www_authenticate) == (401, f'Bearer resource_metadata="{META}", scope="read"')
    for header in ("Basic abc", "Bearer ", "Bearer    ", "bearer"):
        _refused(await auth.authenticate(_creds(header)),
                 "the Authorization header must be 'Bearer <token>'", scope="read")
    assert isinstance(await auth.authenticate(_creds("bEaReR " + issuer.token())), Principal)
    _refused(await _auth(auth, "opaque-token"), "not a JWT", scope="read")
    _refused(await _auth(auth, "a.b.c"), "malformed JWT", scope="read")
    good = issuer.token()
    head, _, sig = good.split(".")
    not_object = base64.urlsafe_b64encode(b"[1, 2]").rstrip(b"=").decode()
    _refused(await _auth(auth, f"{head}.{not_object}.{sig}"), "malformed JWT claims", scope="read")
    await auth.aclose()


async def test_a_signature_by_another_key_with_the_same_kid_is_refused(issuer: Issuer) -> None:
    auth = BearerAuthenticator(RESOURCE, [issuer.url])
    forged = _key("forged", "k1")
    _refused(await _auth(auth, issuer.token(key=forged)), "bad signature")
    await auth.aclose()


async def test_a_symmetric_algorithm_is_refused(issuer: Issuer) -> None:
    auth = BearerAuthenticator(RESOURCE, [issuer.url], algorithms=["RS384"])
    _refused(await _auth(auth, issuer.token()), "bad signature")  # RS256 is not among the allowed
    await auth.aclose()


async def test_required_scopes_all_of_them_or_403(issuer: Issuer) -> None:
    auth = BearerAuthenticator(RESOURCE, [issuer.url], required_scopes=["read", "admin"])
    got = await _auth(auth, issuer.token({"scope": "read"}))
    assert isinstance(got, Challenge)
    assert (got.status, got.www_authenticate, got.message) == (
        403, f'Bearer error="insufficient_scope", scope="read admin", resource_metadata="{META}"',
        "Insufficient scope: needs read admin")
    assert isinstance(await _auth(auth, issuer.token({"scope": "admin read extra"})), Principal)
    step = auth.scope_challenge(frozenset({"z", "b"}))
    assert step.www_authenticate == (
        f'Bearer error="insufficient_scope", scope="read admin b z", resource_metadata="{META}"')
    await auth.aclose()


async def test_keys_are_fetched_once_and_a_verified_token_is_not_checked_again(issuer: Issuer) -> None:
    auth = BearerAuthenticator(RESOURCE, [issuer.url])
    token = issuer.token()
    for _ in range(3):
        assert isinstance(await _auth(auth, token), Principal)
    assert isinstance(await _auth(auth, issuer.token({"sub": "bob"})), Principal)
    assert (issuer.hits["/.well-known/oauth-authorization-server"], issuer.hits["/jwks"]) == (1, 1)
    await auth.aclose()


async def test_a_new_kid_within_the_refresh_interval_is_refused_without_asking_the_issuer(issuer: Issuer) -> None:
    auth = BearerAuthenticator(RESOURCE, [issuer.url], min_refresh_interval=60)
    assert isinstance(await _auth(auth, issuer.token()), Principal)
    rotated = _key("k2", "k2")
    issuer.keys.append(rotated)
    _refused(await _auth(auth, issuer.token(key=rotated)), "unknown signing key")
    assert issuer.hits["/jwks"] == 1
    await auth.aclose()


async def test_a_new_kid_after_the_refresh_interval_refetches_the_keys(issuer: Issuer) -> None:
    auth = BearerAuthenticator(RESOURCE, [issuer.url], min_refresh_interval=0.3)
    assert isinstance(await _auth(auth, issuer.token()), Principal)
    rotated = _key("k2", "k2")
    issuer.keys.append(rotated)
    time.sleep(0.4)
    assert isinstance(await _auth(auth, issuer.token(key=rotated)), Principal)
    assert issuer.hits["/jwks"] == 2
    time.sleep(0.4)
    stray = _key("k3", "k3")  # a kid the fresh set does not have either
    _refused(await _auth(auth, issuer.token(key=stray)), "unknown signing key")
    assert (issuer.hits["/jwks"], issuer.hits["/.well-known/oauth-authorization-server"]) == (3, 1)
    await auth.aclose()


async def test_a_token_without_kid_needs_a_single_key_set(issuer: Issuer) -> None:
    auth = BearerAuthenticator(RESOURCE, [issuer.url], min_refresh_interval=0)
    assert isinstance(await _auth(auth, issuer.token(header={"kid": None})), Principal)
    issuer.keys.append(_key("k2", "k2"))
    fresh = BearerAuthenticator(RESOURCE, [issuer.url], min_refresh_interval=0)
    _refused(await _auth(fresh, issuer.token(header={"kid": None})), "unknown signing key")
    await auth.aclose()
    await fresh.aclose()


def _unavailable(got: Principal | Challenge) -> None:
    assert isinstance(got, Challenge), got
    assert (got.status, got.www_authenticate, got.message) == (
        503, "", "Authorization server unavailable; try again later")


async def test_metadata_of_another_issuer_is_not_used(issuer: Issuer) -> None:
    issuer.metadata = {"issuer": "https://someone-else.example", "jwks_uri": f"{issuer.url}/jwks"}
    auth = BearerAuthenticator(RESOURCE, [issuer.url])
    _unavailable(await _auth(auth, issuer.token()))
    assert issuer.hits["/jwks"] == 0
    await auth.aclose()


async def test_the_openid_configuration_is_tried_when_rfc8414_metadata_fails(issuer: Issuer) -> None:
    issuer.metadata_status["/.well-known/oauth-authorization-server"] = 500
    auth = BearerAuthenticator(RESOURCE, [issuer.url], min_refresh_interval=0)
    _unavailable(await _auth(auth, issuer.token()))  # the OIDC path answers 404 here
    assert issuer.hits["/.well-known/openid-configuration"] == 1
    await auth.aclose()


async def test_metadata_without_jwks_uri_is_unavailable_and_retried_only_after_the_interval(issuer: Issuer) -> None:
    issuer.metadata = {"issuer": issuer.url}
    auth = BearerAuthenticator(RESOURCE, [issuer.url], min_refresh_interval=30)
    _unavailable(await _auth(auth, issuer.token()))
    _unavailable(await _auth(auth, issuer.token()))  # within the interval: not fetched again
    assert issuer.hits["/.well-known/oauth-authorization-server"] == 1
    await auth.aclose()


async def test_an_unreachable_issuer_is_503(issuer: Issuer) -> None:
    auth = BearerAuthenticator(RESOURCE, ["http://127.0.0.1:9"], timeout=1.0)
    token = issuer.token({"iss": "http://127.0.0.1:9"})
    _unavailable(await _auth(auth, token))
    await auth.aclose()


# -- introspection ------------------------------------------------------------------------------------------

def _introspecting(issuer: Issuer, **kw: Any) -> BearerAuthenticator:
    return BearerAuthenticator(RESOURCE, [issuer.url], introspection=Introspection("rs", "s3cret", **kw))


async def test_an_active_opaque_token_is_a_principal_and_the_call_carries_the_credentials(issuer: Issuer) -> None:
    exp = int(time.time()) + 300
    issuer.introspection["opaque-1"] = {"active": True, "sub": "carol", "aud": RESOURCE, "exp": exp,
                                        "scope": "read", "iss": issuer.url}
    auth = _introspecting(issuer)
    got = await _auth(auth, "opaque-1")
    assert isinstance(got, Principal)
    assert (got.id, got.scopes, got.expires_at) == (f"{issuer.url}#carol", frozenset({"read"}), exp + 30.0)
    assert issuer.basic == ["Basic " + base64.b64encode(b"rs:s3cret").decode()]
    assert issuer.forms == [{"token": ["opaque-1"]}]
    await auth.aclose()


async def test_a_client_credentials_token_is_its_client_and_iss_defaults_to_the_issuer(issuer: Issuer) -> None:
    issuer.introspection["cc"] = {"active": True, "client_id": "robot", "aud": [RESOURCE],
                                  "exp": int(time.time()) + 60}
    auth = _introspecting(issuer, endpoint=f"{issuer.url}/introspect")
    got = await _auth(auth, "cc")
    assert isinstance(got, Principal) and got.id == f"{issuer.url}#robot"
    assert issuer.hits["/.well-known/oauth-authorization-server"] == 0  # the endpoint was given
    await auth.aclose()


@pytest.mark.parametrize("answer", [
    {"active": False},
    {"active": "true", "sub": "x", "aud": RESOURCE, "exp": 2_000_000_000},
    {"active": True, "sub": "x", "aud": "https://other", "exp": 2_000_000_000},
    {"active": True, "sub": "x", "aud": RESOURCE},
    {"active": True, "aud": RESOURCE, "exp": 2_000_000_000},
    {"active": True, "sub": "x", "aud": RESOURCE, "exp": 2_000_000_000, "iss": "https://untrusted.example"},
])
async def test_inactive_or_unacceptable_introspection_answers_are_refused(issuer: Issuer, answer: Any) -> None:
    issuer.introspection["t"] = answer
    auth = _introspecting(issuer)
    _refused(await _auth(auth, "t"), "inactive")
    await auth.aclose()


async def test_answers_are_cached_for_cache_seconds_then_asked_again(issuer: Issuer) -> None:
    issuer.introspection["t"] = {"active": True, "sub": "x", "aud": RESOURCE, "exp": int(time.time()) + 300}
    auth = _introspecting(issuer, cache_seconds=1.5)
    for _ in range(3):
        assert isinstance(await _auth(auth, "t"), Principal)
    _refused(await _auth(auth, "nope"), "inactive")
    _refused(await _auth(auth, "nope"), "inactive")  # a negative answer is cached too
    assert issuer.hits["/introspect"] == 2
    issuer.introspection["t"] = {"active": False}  # revoked
    time.sleep(1.6)
    _refused(await _auth(auth, "t"), "inactive")
    assert issuer.hits["/introspect"] == 3
    await auth.aclose()


async def test_a_cached_answer_never_outlives_the_tokens_exp(issuer: Issuer) -> None:
    issuer.introspection["t"] = {"active": True, "sub": "x", "aud": RESOURCE, "exp": time.time() + 1.0}
    auth = BearerAuthenticator(RESOURCE, [issuer.url], leeway=0,
                               introspection=Introspection("rs", "s", cache_seconds=60))
    assert isinstance(await _auth(auth, "t"), Principal)
    time.sleep(1.2)
    _refused(await _auth(auth, "t"), "inactive")  # asked again: now past exp
    assert issuer.hits["/introspect"] == 2
    await auth.aclose()


async def test_the_cache_is_bounded_and_drops_the_oldest(issuer: Issuer) -> None:
    for t in ("a", "b", "c"):
        issuer.introspection[t] = {"active": True, "sub": t, "aud": RESOURCE, "exp": int(time.time()) + 300}
    auth = _introspecting(issuer, cache_size=2)
    for t in ("a", "b", "c", "c", "b"):
        assert isinstance(await _auth(auth, t), Principal)
    assert issuer.hits["/introspect"] == 3
    assert isinstance(await _auth(auth, "a"), Principal)  # dropped: asked again
    assert issuer.hits["/introspect"] == 4
    await auth.aclose()


@pytest.mark.parametrize(("status", "raw"), [
    (500, b"{}"), (200, b"not json"), (200, b"[1, 2]"), (401, b'{"active": true}')])
async def test_a_failing_introspection_endpoint_is_503(issuer: Issuer, status: int, raw: bytes) -> None:
    issuer.introspection_status, issuer.introspection_raw = status, raw
    auth = _introspecting(issuer)
    _unavailable(await _auth(auth, "t"))
    await auth.aclose()


async def test_no_introspection_endpoint_in_the_metadata_is_503(issuer: Issuer) -> None:
    issuer.metadata = {"issuer": issuer.url, "jwks_uri": f"{issuer.url}/jwks"}
    auth = _introspecting(issuer)
    _unavailable(await _auth(auth, "t"))
    assert issuer.hits["/introspect"] == 0
    await auth.aclose()


def test_an_authenticator_needs_an_issuer_and_an_absolute_resource() -> None:
    with pytest.raises(ValueError, match="at least one trusted issuer"):
        BearerAuthenticator(RESOURCE, [])
    with pytest.raises(ValueError, match="absolute canonical URI"):
        BearerAuthenticator("/mcp", ["https://a.example"])
    assert "s3cret" not in repr(Introspection("rs", "s3cret"))


class Clock:
    """The module's clocks, moved by hand: a cache boundary is checked at its exact instant, not by sleeping."""

    def __init__(self) -> None:
        self.mono, self.wall = 1000.0, time.time()

    def monotonic(self) -> float:
        return self.mono

    def time(self) -> float:
        return self.wall

    def advance(self, seconds: float) -> None:
        self.mono += seconds
        self.wall += seconds


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    import types

    from mcp_stateless.auth import bearer

    c = Clock()
    monkeypatch.setattr(bearer, "time", types.SimpleNamespace(monotonic=c.monotonic, time=c.time))
    return c


async def test_an_introspected_answer_is_cached_up_to_but_not_at_cache_seconds(issuer: Issuer, clock: Clock) -> None:
    issuer.introspection["t"] = {"active": True, "sub": "x", "aud": RESOURCE, "exp": int(clock.wall) + 3600}
    auth = _introspecting(issuer, cache_seconds=10)
    assert isinstance(await _auth(auth, "t"), Principal)
    clock.advance(9.999)
    assert isinstance(await _auth(auth, "t"), Principal)
    assert issuer.hits["/introspect"] == 1
    clock.advance(0.001)  # exactly cache_seconds: asked again
    assert isinstance(await _auth(auth, "t"), Principal)
    assert issuer.hits["/introspect"] == 2
    await auth.aclose()


async def test_a_refusal_is_cached_up_to_but_not_at_cache_seconds(issuer: Issuer, clock: Clock) -> None:
    auth = _introspecting(issuer, cache_seconds=10)
    _refused(await _auth(auth, "t"), "inactive")
    clock.advance(9.999)
    _refused(await _auth(auth, "t"), "inactive")
    assert issuer.hits["/introspect"] == 1
    clock.advance(0.001)
    issuer.introspection["t"] = {"active": True, "sub": "x", "aud": RESOURCE, "exp": int(clock.wall) + 3600}
    got = await _auth(auth, "t")  # asked again, and now active
    assert isinstance(got, Principal) and got.id == f"{issuer.url}#x"
    assert issuer.hits["/introspect"] == 2
    await auth.aclose()


async def test_refusals_are_bounded_and_the_oldest_is_dropped(issuer: Issuer, clock: Clock) -> None:
    auth = _introspecting(issuer, cache_size=2)
    for t in ("a", "b"):
        _refused(await _auth(auth, t), "inactive")
    for t in ("a", "b"):  # two fit: both still cached
        _refused(await _auth(auth, t), "inactive")
    assert issuer.hits["/introspect"] == 2
    _refused(await _auth(auth, "c"), "inactive")  # a third drops the oldest, "a"
    _refused(await _auth(auth, "c"), "inactive")
    _refused(await _auth(auth, "b"), "inactive")
    assert issuer.hits["/introspect"] == 3
    _refused(await _auth(auth, "a"), "inactive")
    assert issuer.hits["/introspect"] == 4
    await auth.aclose()


async def test_introspection_asks_for_json_and_a_sub_wins_over_client_id(issuer: Issuer) -> None:
    issuer.introspection["t"] = {"active": True, "sub": "dave", "client_id": "robot", "aud": RESOURCE,
                                 "exp": int(time.time()) + 300}
    auth = _introspecting(issuer)
    got = await _auth(auth, "t")
    assert isinstance(got, Principal) and got.id == f"{issuer.url}#dave"
    assert issuer.accepts == ["application/json"]
    await auth.aclose()


@pytest.mark.parametrize(("status", "raw", "logged"), [
    (500, b"{}", "introspection: HTTP 500"),
    (200, b"not json", "introspection: not JSON"),
    (200, b"[1, 2]", "introspection: not a JSON object"),
    (401, b'{"active": true}', "introspection: HTTP 401"),
])
async def test_why_introspection_is_unavailable_is_logged(issuer: Issuer, caplog: pytest.LogCaptureFixture,
                                                          status: int, raw: bytes, logged: str) -> None:
    caplog.set_level("WARNING", logger="mcp_stateless.auth")
    issuer.introspection_status, issuer.introspection_raw = status, raw
    auth = _introspecting(issuer)
    _unavailable(await _auth(auth, "t"))
    assert [r.getMessage() for r in caplog.records] == [f"authorization server unavailable: {logged}"]
    await auth.aclose()


async def test_a_missing_introspection_endpoint_is_logged_by_name(issuer: Issuer,
                                                                   caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level("WARNING", logger="mcp_stateless.auth")
    issuer.metadata = {"issuer": issuer.url, "jwks_uri": f"{issuer.url}/jwks"}
    auth = _introspecting(issuer)
    _unavailable(await _auth(auth, "t"))
    assert [r.getMessage() for r in caplog.records] == [
        "authorization server unavailable: the issuer advertises no introspection_endpoint"]
    await auth.aclose()


# -- what each failure says, and the exact edges of each bound ---------------------------------------------

async def _unavailable_logged(auth: BearerAuthenticator, token: str, caplog: pytest.LogCaptureFixture) -> list[str]:
    caplog.clear()
    got = await _auth(auth, token)
    _unavailable(got)
    assert isinstance(got, Challenge) and got.code == -32603  # INTERNAL_ERROR in the refusal's body
    return [r.getMessage().removeprefix("authorization server unavailable: ") for r in caplog.records
            if r.name == "mcp_stateless.auth" and r.levelname == "WARNING"]


@pytest.fixture
def warnings(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level("WARNING", logger="mcp_stateless.auth")
    return caplog


async def test_unreachable_metadata_names_every_url_tried_and_why(issuer: Issuer, clock: Clock,
                                                                  warnings: pytest.LogCaptureFixture) -> None:
    oauth, oidc = (f"{issuer.url}/.well-known/oauth-authorization-server",
                   f"{issuer.url}/.well-known/openid-configuration")
    issuer.metadata = {"issuer": "https://someone.else", "jwks_uri": f"{issuer.url}/jwks"}  # RFC 8414's URL
    issuer.metadata_status = {"/.well-known/openid-configuration": 500}
    auth = BearerAuthenticator(RESOURCE, [issuer.url])
    assert await _unavailable_logged(auth, issuer.token(), warnings) == [
        f"no metadata for {issuer.url} ({oauth}: issuer mismatch; {oidc}: IssuerUnavailable)"]
    # within the refresh interval nothing is asked again, and the log says so
    assert await _unavailable_logged(auth, issuer.token(), warnings) == [
        f"keys of {issuer.url} not fetched (retrying later)"]
    assert issuer.hits["/.well-known/openid-configuration"] == 1
    clock.advance(30)  # exactly the refresh interval: asked again
    assert len(await _unavailable_logged(auth, issuer.token(), warnings)) == 1
    assert issuer.hits["/.well-known/openid-configuration"] == 2
    await auth.aclose()


@pytest.mark.parametrize(("jwks", "logged"), [
    (b'{"nokeys": []}', 'JWKS of {url} has no "keys" list'),
    (b"[]", "GET {url}/jwks: not a JSON object"),
    (b"{not json", "GET {url}/jwks: not JSON"),
])
async def test_a_bad_key_set_is_logged_by_name(issuer: Issuer, warnings: pytest.LogCaptureFixture,
                                               jwks: bytes, logged: str) -> None:
    issuer.jwks_raw = jwks
    auth = BearerAuthenticator(RESOURCE, [issuer.url])
    assert await _unavailable_logged(auth, issuer.token(), warnings) == [logged.format(url=issuer.url)]
    await auth.aclose()


async def test_metadata_without_jwks_uri_is_logged_by_name(issuer: Issuer,
                                                           warnings: pytest.LogCaptureFixture) -> None:
    issuer.metadata = {"issuer": issuer.url}
    auth = BearerAuthenticator(RESOURCE, [issuer.url])
    assert await _unavailable_logged(auth, issuer.token(), warnings) == [f"{issuer.url} metadata has no jwks_uri"]
    await auth.aclose()


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
async def test_a_document_of_exactly_the_cap_is_read_and_one_byte_more_is_not(
        issuer: Issuer, warnings: pytest.LogCaptureFixture, chunked: bool) -> None:
    issuer.chunked = chunked
    keys = json.dumps({"keys": [k.as_dict(private=False) for k in issuer.keys]}).encode()
    cap = len(keys) + 50
    issuer.jwks_raw = keys + b" " * 50  # exactly the cap
    auth = BearerAuthenticator(RESOURCE, [issuer.url], max_document_bytes=cap)
    assert isinstance(await _auth(auth, issuer.token()), Principal)
    await auth.aclose()
    issuer.jwks_raw = keys + b" " * 51
    auth = BearerAuthenticator(RESOURCE, [issuer.url], max_document_bytes=cap)
    assert await _unavailable_logged(auth, issuer.token(), warnings) == [
        f"GET {issuer.url}/jwks: body larger than {cap} bytes"]
    await auth.aclose()


async def test_documents_are_asked_for_as_json_and_redirects_are_not_followed(
        issuer: Issuer, warnings: pytest.LogCaptureFixture) -> None:
    auth = BearerAuthenticator(RESOURCE, [issuer.url])
    assert isinstance(await _auth(auth, issuer.token()), Principal)
    assert issuer.get_accepts == ["application/json", "application/json"]  # metadata, JWKS
    await auth.aclose()
    issuer.redirects = {"/jwks": f"{issuer.url}/jwks-elsewhere"}
    auth = BearerAuthenticator(RESOURCE, [issuer.url])
    assert await _unavailable_logged(auth, issuer.token(), warnings) == [f"GET {issuer.url}/jwks: HTTP 302"]
    assert issuer.hits["/jwks-elsewhere"] == 0
    await auth.aclose()


async def test_a_verified_token_is_taken_from_the_cache_until_exp_plus_leeway_inclusive(
        issuer: Issuer, clock: Clock) -> None:
    exp = int(clock.wall) + 100
    token = issuer.token({"exp": exp, "iat": exp - 200})
    auth = BearerAuthenticator(RESOURCE, [issuer.url], leeway=30)
    first = await _auth(auth, token)
    assert isinstance(first, Principal) and first.expires_at == exp + 30.0
    issuer.keys = [_key("k2", "k2")]  # the cached answer is all that could still accept it
    clock.advance(exp + 30 - clock.wall)  # exactly exp + leeway: still cached
    assert await _auth(auth, token) is first
    assert await auth.verify(token) is first
    clock.advance(0.5)  # past it: verified again, and now expired
    _refused(await _auth(auth, token), "expired")
    await auth.aclose()


async def test_the_verified_cache_is_bounded_and_drops_the_oldest(issuer: Issuer) -> None:
    auth = BearerAuthenticator(RESOURCE, [issuer.url], verified_cache_size=2)
    tokens = [issuer.token({"sub": s}) for s in ("a", "b", "c")]
    got = [await _auth(auth, t) for t in tokens]
    assert all(isinstance(p, Principal) for p in got)
    assert await _auth(auth, tokens[2]) is got[2] and await _auth(auth, tokens[1]) is got[1]
    again = await _auth(auth, tokens[0])  # dropped: verified anew, an equal but new principal
    assert isinstance(again, Principal) and again == got[0] and again is not got[0]
    await auth.aclose()


async def test_token_size_bounds_are_exact(issuer: Issuer) -> None:
    auth = BearerAuthenticator(RESOURCE, [issuer.url], max_token_bytes=64)
    _refused(await _auth(auth, "x" * 64), "not a JWT")  # at the bound: parsed
    _refused(await _auth(auth, "x" * 65), "token larger than 64 bytes")
    _refused(await auth.authenticate(_creds("Bearer " + "x" * 89)), "token larger than 64 bytes")  # 96 > 64 + 32
    _refused(await auth.authenticate(_creds("Bearer" + " " * 26 + "x" * 64)), "not a JWT")  # 96 = 64 + 32
    with pytest.raises(Exception, match=r"^token larger than 64 bytes$"):
        await auth.verify("x" * 65)
    await auth.aclose()


def test_configuration_errors_say_what_is_wrong() -> None:
    with pytest.raises(ValueError, match=r"^BearerAuthenticator needs at least one trusted issuer$"):
        BearerAuthenticator(RESOURCE, [])
    with pytest.raises(ValueError, match=r"^resource must be the server's absolute canonical URI$"):
        BearerAuthenticator("mcp.example/mcp", ["https://issuer.example"])
    assert BearerAuthenticator("http://127.0.0.1:8000/mcp", ["https://issuer.example"]).resource.startswith("http:")
    with pytest.raises(ValueError, match=r"^Introspection.issuer must be one of the trusted issuers$"):
        BearerAuthenticator(RESOURCE, ["https://a.example"],
                            introspection=Introspection("rs", "s", issuer="https://b.example"))
    ok = BearerAuthenticator(RESOURCE, ["https://a.example", "https://b.example"],
                             introspection=Introspection("rs", "s", issuer="https://b.example"))
    assert ok._introspecting_issuer == "https://b.example"


def test_the_challenges_name_the_metadata_and_every_required_scope() -> None:
    auth = BearerAuthenticator(RESOURCE, ["https://a.example"], required_scopes=["read", "write"])
    assert auth._bare == Challenge(401, f'Bearer resource_metadata="{META}", scope="read write"',
                                   "Authentication required")
    bare = BearerAuthenticator(RESOURCE, ["https://a.example"])._bare
    assert (bare.www_authenticate, bare.message) == (f'Bearer resource_metadata="{META}"', "Authentication required")
    assert auth._invalid("why") == Challenge(
        401, f'Bearer error="invalid_token", resource_metadata="{META}", scope="read write"',
        "Invalid access token: why")


def test_the_documented_defaults() -> None:
    import inspect

    params = inspect.signature(BearerAuthenticator).parameters
    assert {n: params[n].default for n in ("leeway", "min_refresh_interval", "timeout", "verified_cache_size",
                                            "max_token_bytes", "max_document_bytes")} == {
        "leeway": 30.0, "min_refresh_interval": 30.0, "timeout": 5.0, "verified_cache_size": 4096,
        "max_token_bytes": 16 * 1024, "max_document_bytes": 1024 * 1024}
