"""The OAuth resource server end to end: a real authorization server (oidc-provider) issues tokens, a
protected `mcp-stateless serve` subprocess checks them on every request over real HTTP."""

from __future__ import annotations

import base64
import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from as_harness import ROOT, AuthServer, signing_key
from joserfc import jwt
from joserfc.jwk import RSAKey

from services import CLI, free_port

APP = "tests/auth/protected_app.py:app"
PV = "2026-07-28"


@contextlib.contextmanager
def protected(issuers: list[str], *extra: str, app: str = APP, port: int | None = None,
              env_extra: dict[str, str] | None = None) -> Iterator[str]:
    """`mcp-stateless serve` trusting `issuers` (none: the app brings its own authenticator); yields its
    canonical resource URL."""
    port = port or free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    argv = [CLI, "serve", app, "--http", f"127.0.0.1:{port}", "--state", "memory://", "--log-level", "warning",
            *extra]
    if issuers:
        argv += ["--resource-url", url]
    for issuer in issuers:
        argv += ["--auth-issuer", issuer]
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCP_STATELESS_")} | (env_extra or {})
    proc = subprocess.Popen(argv, cwd=ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, env=env)
    try:
        deadline = time.monotonic() + 20
        while True:
            assert proc.poll() is None, proc.communicate()[1]
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(f"http://127.0.0.1:{port}/.well-known/oauth-protected-resource").status_code == 200:
                    break
            assert time.monotonic() < deadline, "server did not come up"
            time.sleep(0.1)
        yield url
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def call(url: str, method: str, params: dict[str, Any] | None = None, token: str | None = None,
         authorization: str | None = None, rid: int = 7) -> httpx.Response:
    p = dict(params or {})
    p["_meta"] = {"io.modelcontextprotocol/protocolVersion": PV, "io.modelcontextprotocol/clientCapabilities": {}}
    headers = {"content-type": "application/json", "accept": "application/json, text/event-stream",
               "mcp-protocol-version": PV, "mcp-method": method}
    if "name" in p or "uri" in p:
        headers["mcp-name"] = p.get("name", p.get("uri"))
    if token is not None:
        headers["authorization"] = f"Bearer {token}"
    if authorization is not None:
        headers["authorization"] = authorization
    msg = {"jsonrpc": "2.0", "id": rid, "method": method, "params": p}
    return httpx.post(url, content=orjson.dumps(msg), headers=headers, timeout=15)


def prm_url(url: str) -> str:
    return url.replace("/mcp", "/.well-known/oauth-protected-resource/mcp")


def invalid_token(url: str) -> str:
    return f'Bearer error="invalid_token", resource_metadata="{prm_url(url)}", scope="tools:read"'


def assert_refused(r: httpx.Response, url: str, message: str, secret: str | None = None) -> None:
    assert r.status_code == 401, r.text
    assert r.headers["www-authenticate"] == invalid_token(url)
    assert r.json() == {"jsonrpc": "2.0",
                        "error": {"code": -32600, "message": f"Invalid access token: {message}"}}
    if secret is not None:
        assert secret not in r.text and secret not in r.headers["www-authenticate"]


@pytest.fixture(scope="module")
def server(auth_server: AuthServer) -> Iterator[str]:
    with protected([auth_server.issuer], "--auth-required-scopes", "tools:read") as url:
        yield url


# ------------------------------------------------------------------------------ metadata, 401
@pytest.mark.slow
def test_protected_resource_metadata_at_both_well_known_paths(server: str, auth_server: AuthServer) -> None:
    # scopes_supported: the required scope, then what the app's tool `reset`, prompt `audit` and resource
    # memo://secret need (tests/auth/protected_app.py)
    expected = {"resource": server, "authorization_servers": [auth_server.issuer],
                "bearer_methods_supported": ["header"], "scopes_supported": ["tools:read", "tools:admin"]}
    for url in (prm_url(server), server.replace("/mcp", "/.well-known/oauth-protected-resource")):
        r = httpx.get(url)
        assert r.status_code == 200
        assert r.headers["content-type"] == "application/json"
        assert r.json() == expected
    # only GET, only those paths
    assert httpx.get(server.replace("/mcp", "/.well-known/oauth-protected-resource/other")).status_code == 404


@pytest.mark.slow
def test_no_token_is_401_pointing_at_the_metadata(server: str) -> None:
    r = call(server, "tools/list")
    assert r.status_code == 401
    assert r.headers["www-authenticate"] == f'Bearer resource_metadata="{prm_url(server)}", scope="tools:read"'
    assert r.json() == {"jsonrpc": "2.0",
                        "error": {"code": -32600, "message": "Authentication required"}}


# ------------------------------------------------------------------------------ a real token
@pytest.mark.slow
def test_real_token_calls_a_protected_tool(server: str, auth_server: AuthServer) -> None:
    token = auth_server.token("full", server, "tools:read tools:admin")
    r = call(server, "tools/call", {"name": "whoami", "arguments": {}}, token)
    assert r.status_code == 200, r.text
    result = r.json()["result"]
    assert result["structuredContent"] == {"id": f"{auth_server.issuer}#full",
                                           "scopes": ["tools:admin", "tools:read"], "client_id": "full"}
    r = call(server, "tools/call", {"name": "reset", "arguments": {}}, token)
    assert r.status_code == 200 and r.json()["result"]["content"][0]["text"] == "reset"


# ------------------------------------------------------------------------------ refusals
@pytest.mark.slow
@pytest.mark.parametrize(("authorization", "why"), [
    ("Bearer not-a-jwt", "not a JWT"),
    ("Bearer a.b.c", "malformed JWT"),
    ("Basic dXNlcjpwYXNz", "the Authorization header must be 'Bearer <token>'"),
    ("Bearer", "the Authorization header must be 'Bearer <token>'"),
])
def test_malformed_tokens(server: str, authorization: str, why: str) -> None:
    assert_refused(call(server, "tools/list", authorization=authorization), server, why)


def _mint(key: dict[str, Any], claims: dict[str, Any], kid: str, typ: str = "at+jwt") -> str:
    return jwt.encode({"alg": "RS256", "kid": kid, "typ": typ}, claims, RSAKey.import_key(key))


@pytest.mark.slow
def test_wrong_signature(server: str, auth_server: AuthServer) -> None:
    """The issuer's real claims and kid, signed by another key."""
    claims = _claims_of(auth_server.token("full", server, "tools:read"))
    forged = _mint(signing_key("attacker"), {**claims, "sub": "admin"}, kid="as1-key1")
    assert_refused(call(server, "tools/list", token=forged), server, "bad signature", forged)


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


@pytest.mark.slow
def test_alg_none_and_hs256_keyed_with_the_public_key(server: str, auth_server: AuthServer) -> None:
    """The classic downgrades: an unsigned token, and an HMAC whose secret is the issuer's public key (what
    a verifier that lets the token pick its algorithm would check it against)."""
    import hashlib
    import hmac

    claims = _claims_of(auth_server.token("full", server, "tools:read"))
    kid = auth_server.keys[0]["kid"]
    payload = _b64(orjson.dumps({**claims, "sub": "admin"}))
    unsigned = f"{_b64(orjson.dumps({'alg': 'none', 'kid': kid, 'typ': 'at+jwt'}))}.{payload}."
    assert_refused(call(server, "tools/list", token=unsigned), server, "bad signature", unsigned)
    public = RSAKey.import_key(auth_server.keys[0])
    for secret in (public.as_pem(private=False), orjson.dumps(public.as_dict(private=False))):
        signing_input = f"{_b64(orjson.dumps({'alg': 'HS256', 'kid': kid, 'typ': 'at+jwt'}))}.{payload}"
        mac = hmac.new(secret, signing_input.encode("ascii"), hashlib.sha256).digest()
        forged = f"{signing_input}.{_b64(mac)}"
        assert_refused(call(server, "tools/list", token=forged), server, "bad signature", forged)


def _claims_of(token: str) -> dict[str, Any]:
    payload = token.split(".")[1]
    return dict(orjson.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4))))


@pytest.mark.slow
def test_expired_and_not_yet_valid_tokens_signed_by_the_issuer(server: str, auth_server: AuthServer) -> None:
    """The AS's own key (the test made it) signs tokens oidc-provider would not mint on demand."""
    key = auth_server.keys[0]
    claims = _claims_of(auth_server.token("full", server, "tools:read"))
    now = int(time.time())
    expired = _mint(key, {**claims, "iat": now - 600, "exp": now - 120}, kid=key["kid"])
    assert_refused(call(server, "tools/list", token=expired), server, "expired", expired)
    early = _mint(key, {**claims, "nbf": now + 600}, kid=key["kid"])
    assert_refused(call(server, "tools/list", token=early), server, "not valid yet", early)
    no_typ = _mint(key, claims, kid=key["kid"], typ="JWT")  # e.g. an ID token: not an access token
    assert_refused(call(server, "tools/list", token=no_typ), server, "not an access token (typ must be at+jwt)")
    # and the same key with good claims passes: the refusals above are about the claims only
    good = _mint(key, claims, kid=key["kid"])
    assert call(server, "tools/list", token=good).status_code == 200


@pytest.mark.slow
def test_token_from_an_untrusted_issuer(server: str, other_auth_server: AuthServer) -> None:
    token = other_auth_server.token("full", server, "tools:read")
    assert_refused(call(server, "tools/list", token=token), server, "issuer not trusted", token)


@pytest.mark.slow
def test_token_for_another_resource(server: str, auth_server: AuthServer) -> None:
    token = auth_server.token("full", "http://127.0.0.1:1/elsewhere", "tools:read")
    assert _claims_of(token)["aud"] == "http://127.0.0.1:1/elsewhere"
    assert_refused(call(server, "tools/list", token=token), server, "audience is not this resource", token)


@pytest.mark.slow
def test_missing_scope_is_403_with_a_step_up_challenge(server: str, auth_server: AuthServer) -> None:
    token = auth_server.token("reader", server, "tools:read")
    step_up = (f'Bearer error="insufficient_scope", scope="tools:read tools:admin", '
               f'resource_metadata="{prm_url(server)}"')
    for method, params, what in [
        ("tools/call", {"name": "reset", "arguments": {}}, "tool reset"),
        ("prompts/get", {"name": "audit"}, "prompt audit"),
        ("resources/read", {"uri": "memo://secret"}, "resource memo://secret"),
    ]:
        r = call(server, method, params, token, rid=11)
        assert r.status_code == 403, r.text
        assert r.headers["www-authenticate"] == step_up
        assert r.json() == {"jsonrpc": "2.0", "id": 11, "error": {
            "code": -32600, "message": f"Insufficient scope: {what} needs tools:admin",
            "data": {"requiredScopes": ["tools:admin"]}}}
    # the server-wide scope: a token without tools:read at all
    bare = auth_server.token("full", server, "tools:admin")
    r = call(server, "tools/list", token=bare)
    assert r.status_code == 403
    assert r.headers["www-authenticate"] == (f'Bearer error="insufficient_scope", scope="tools:read", '
                                             f'resource_metadata="{prm_url(server)}"')


@pytest.mark.slow
def test_lists_are_filtered_and_private(server: str, auth_server: AuthServer) -> None:
    reader = auth_server.token("reader", server, "tools:read")
    full = auth_server.token("full", server, "tools:read tools:admin")
    names = {t: [x["name"] for x in call(server, "tools/list", token=t).json()["result"]["tools"]]
             for t in (reader, full)}
    assert names[reader] == ["whoami", "new_cart", "peek_cart"]
    assert names[full] == ["whoami", "reset", "new_cart", "peek_cart"]
    for token, prompts, uris in [(reader, [], ["memo://public"]), (full, ["audit"], ["memo://public", "memo://secret"])]:
        result = call(server, "prompts/list", token=token).json()["result"]
        assert [p["name"] for p in result["prompts"]] == prompts and result["cacheScope"] == "private"
        result = call(server, "resources/list", token=token).json()["result"]
        assert [x["uri"] for x in result["resources"]] == uris and result["cacheScope"] == "private"
    assert call(server, "tools/list", token=reader).json()["result"]["cacheScope"] == "private"
    # a readable, unscoped resource still reads
    r = call(server, "resources/read", {"uri": "memo://public"}, reader)
    assert r.json()["result"]["contents"][0]["text"] == "hello"


@pytest.mark.slow
def test_another_principals_handle_is_unknown(server: str, auth_server: AuthServer) -> None:
    full = auth_server.token("full", server, "tools:read")
    reader = auth_server.token("reader", server, "tools:read")
    handle = call(server, "tools/call", {"name": "new_cart", "arguments": {}}, full).json()[
        "result"]["structuredContent"]["cartHandle"]
    mine = call(server, "tools/call", {"name": "peek_cart", "arguments": {"cartHandle": handle}}, full)
    assert mine.json()["result"]["structuredContent"] == {"items": []}
    theirs = call(server, "tools/call", {"name": "peek_cart", "arguments": {"cartHandle": handle}}, reader)
    fake = handle[:-4] + "AAAA"
    made_up = call(server, "tools/call", {"name": "peek_cart", "arguments": {"cartHandle": fake}}, reader)
    assert theirs.status_code == made_up.status_code == 200
    result = theirs.json()["result"]
    assert result["isError"] is True and result["content"][0]["text"].startswith(f"Unknown cart handle '{handle}'")
    # refused exactly like a handle that never existed (nothing tells the other principal it exists)
    assert theirs.text.replace(handle, fake) == made_up.text


# ------------------------------------------------------------------------------ keys
@pytest.mark.slow
def test_key_rotation_and_jwks_outage(tmp_path: Path, other_auth_server: AuthServer) -> None:
    """Rotation at the AS is picked up without a restart (an unknown kid refetches the JWKS); with the
    AS down, cached keys keep working and a token with a new kid is a clear 503 / -32603."""
    from as_harness import NODE, OIDC

    from services import need

    need(NODE, "Node 22 (tools/node)")
    need(OIDC, "oidc-provider (tools/node)")
    rotating = AuthServer(tmp_path)
    key_a, key_b, key_c = signing_key("rot-a"), signing_key("rot-b"), signing_key("rot-c")
    rotating.start([key_a])
    try:
        with protected([rotating.issuer, other_auth_server.issuer], "--auth-jwks-refresh", "1") as url:
            token_a = rotating.token("full", url, "tools:read")
            assert call(url, "tools/list", token=token_a).status_code == 200
            # two trusted issuers: the other one's tokens work too
            assert call(url, "tools/list", token=other_auth_server.token("full", url, "tools:read")).status_code == 200

            rotating.stop()
            rotating.start([key_b, key_a])  # B signs now; A still published
            token_b = rotating.token("full", url, "tools:read")
            assert _header_kid(token_b) == "rot-b"
            time.sleep(1.1)
            assert call(url, "tools/list", token=token_b).status_code == 200
            assert call(url, "tools/list", token=token_a).status_code == 200

            rotating.stop()
            rotating.start([key_c, key_b])
            token_c = rotating.token("full", url, "tools:read")
            rotating.stop()  # the AS (and its JWKS endpoint) is down
            time.sleep(1.1)
            assert call(url, "tools/list", token=token_b).status_code == 200  # cached key
            r = call(url, "tools/list", token=token_c)
            assert r.status_code == 503
            assert "www-authenticate" not in r.headers
            assert r.json() == {"jsonrpc": "2.0", "error": {
                "code": -32603, "message": "Authorization server unavailable; try again later"}}
            # a made-up kid within the refresh interval is refused without a fetch
            forged = _mint(key_c, _claims_of(token_c), kid="nobody")
            r = call(url, "tools/list", token=forged)
            assert r.status_code == 401 and r.json()["error"]["message"] == "Invalid access token: unknown signing key"
            # the AS comes back: the new key is fetched
            rotating.start([key_c, key_b])
            time.sleep(1.1)
            assert call(url, "tools/list", token=token_c).status_code == 200
    finally:
        rotating.stop()


def _header_kid(token: str) -> str:
    head = token.split(".")[0]
    return str(orjson.loads(base64.urlsafe_b64decode(head + "=" * (-len(head) % 4)))["kid"])


# ------------------------------------------------------------------------------ opaque tokens
@pytest.mark.slow
def test_opaque_tokens_by_introspection_and_revocation(auth_server: AuthServer) -> None:
    """An app with its own BearerAuthenticator (the Python API) checks opaque tokens at the AS's
    introspection endpoint; a revoked token stops working once the 1 s introspection cache expires."""
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    env = {"AUTH_TEST_ISSUER": auth_server.issuer, "AUTH_TEST_RESOURCE": url}
    with protected([], app="tests/auth/introspected_app.py:app", port=port, env_extra=env):
        token = auth_server.token("opaque", url, "tools:read")
        assert token.count(".") == 0  # opaque, not a JWT
        r = call(url, "tools/call", {"name": "whoami", "arguments": {}}, token)
        assert r.status_code == 200, r.text
        assert r.json()["result"]["structuredContent"] == {"id": f"{auth_server.issuer}#opaque",
                                                           "scopes": ["tools:read"]}
        other = auth_server.token("opaque", "http://127.0.0.1:1/elsewhere", "tools:read")
        r = call(url, "tools/list", token=other)
        assert r.status_code == 401 and r.json()["error"]["message"] == "Invalid access token: inactive"
        revoked = httpx.post(f"{auth_server.issuer}/token/revocation", timeout=10, data={
            "token": token, "client_id": "opaque", "client_secret": "opaque-secret"})
        assert revoked.status_code == 200
        deadline = time.monotonic() + 5
        while call(url, "tools/list", token=token).status_code == 200:
            assert time.monotonic() < deadline, "a revoked token kept working past the introspection cache"
            time.sleep(0.2)
        r = call(url, "tools/list", token=token)
        assert r.status_code == 401
        assert r.headers["www-authenticate"] == (f'Bearer error="invalid_token", '
                                                 f'resource_metadata="{prm_url(url)}"')
        assert token not in r.text


@pytest.mark.slow
def test_a_cached_verification_still_ends_at_exp(auth_server: AuthServer) -> None:
    """Verified tokens are cached (perf), but only until their exp: the cache never extends a token."""
    import asyncio

    from mcp_stateless.auth import BearerAuthenticator
    from mcp_stateless.auth.bearer import TokenRejected

    resource = "http://127.0.0.1:9/mcp"
    key = auth_server.keys[0]
    claims = _claims_of(auth_server.token("full", resource, "tools:read"))
    short = _mint(key, {**claims, "exp": int(time.time()) + 2}, kid=key["kid"])

    async def scenario() -> None:
        auth = BearerAuthenticator(resource, [auth_server.issuer], leeway=0)
        try:
            first = await auth.verify(short)
            assert first.id == f"{auth_server.issuer}#full"
            assert await auth.verify(short) is first  # the cache answered
            await asyncio.sleep(max(0.0, claims_exp(short) - time.time()) + 0.2)
            with pytest.raises(TokenRejected, match=r"^expired$"):
                await auth.verify(short)
        finally:
            await auth.aclose()

    asyncio.run(scenario())


def claims_exp(token: str) -> float:
    return float(_claims_of(token)["exp"])


# ------------------------------------------------------------------------------ stdio
@pytest.mark.slow
def test_stdio_takes_its_token_from_the_environment(auth_server: AuthServer) -> None:
    resource = "http://127.0.0.1:9/mcp"  # a stdio server still has a canonical URI for its audience
    argv = [CLI, "serve", APP, "--stdio", "--state", "memory://", "--auth-issuer", auth_server.issuer,
            "--resource-url", resource]
    base = {k: v for k, v in os.environ.items() if not k.startswith("MCP_STATELESS_")}
    msg = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "whoami", "arguments": {}, "_meta": {
        "io.modelcontextprotocol/protocolVersion": PV, "io.modelcontextprotocol/clientCapabilities": {}}}}
    token = auth_server.token("reader", resource, "tools:read")
    r = subprocess.run(argv, cwd=ROOT, capture_output=True, timeout=30, input=orjson.dumps(msg) + b"\n",
                       env=base | {"MCP_STATELESS_AUTHORIZATION": f"Bearer {token}"})
    assert r.returncode == 0, r.stderr
    assert orjson.loads(r.stdout)["result"]["structuredContent"]["id"] == f"{auth_server.issuer}#reader"
    forged = _mint(signing_key("attacker"), _claims_of(token), kid=auth_server.keys[0]["kid"])
    r = subprocess.run(argv, cwd=ROOT, capture_output=True, timeout=30, input=orjson.dumps(msg) + b"\n",
                       env=base | {"MCP_STATELESS_AUTHORIZATION": f"Bearer {forged}"})
    assert r.returncode != 0 and r.stdout == b""
    assert b"credentials refused (401): Invalid access token: bad signature" in r.stderr
    assert forged.encode() not in r.stderr


@pytest.mark.parametrize(("iss", "trusted"), [(None, True), ("TRUSTED", True), ("https://other.example", False),
                                              (7, False)])
def test_an_introspection_answer_is_credited_only_to_a_trusted_issuer(iss: object, trusted: bool) -> None:
    """RFC 7662 `iss` is optional: absent, the token is the introspecting (trusted) issuer's; naming an issuer
    this resource does not trust, it is refused rather than credited to a trusted one. The introspection
    endpoint here answers what the test says (a real AS cannot be made to name another issuer)."""
    import asyncio
    import http.server
    import threading

    from mcp_stateless.auth import BearerAuthenticator, Introspection
    from mcp_stateless.auth.bearer import TokenRejected

    issuer, resource = "https://as.example", "http://127.0.0.1:9/mcp"
    answer: dict[str, object] = {"active": True, "sub": "carol", "aud": resource, "exp": int(time.time()) + 60,
                                 "scope": "tools:read"}
    if iss is not None:
        answer["iss"] = issuer if iss == "TRUSTED" else iss

    class Answer(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["content-length"]))
            body = orjson.dumps(answer)
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    endpoint = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Answer)
    threading.Thread(target=endpoint.serve_forever, daemon=True).start()

    async def scenario() -> None:
        auth = BearerAuthenticator(resource, [issuer], introspection=Introspection(
            "rs", "rs-secret", endpoint=f"http://127.0.0.1:{endpoint.server_address[1]}/introspect"))
        try:
            if trusted:
                assert (await auth.verify("opaque-token")).id == f"{issuer}#carol"
            else:
                with pytest.raises(TokenRejected, match=r"^inactive$"):
                    await auth.verify("opaque-token")
        finally:
            await auth.aclose()

    try:
        asyncio.run(scenario())
    finally:
        endpoint.shutdown()
        endpoint.server_close()
