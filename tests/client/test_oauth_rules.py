"""The OAuth client's pure decisions: PKCE, which metadata is trusted, scopes, client identity and token
endpoint authentication, the authorization response (state, RFC 9207 iss), token answers."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import stat
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from mcp_stateless.client.errors import OAuthError
from mcp_stateless.client.oauth import FileTokenStore, MemoryTokenStore
from mcp_stateless.client.oauth.rules import (
    ClientIdentity,
    ResourceMetadata,
    Tokens,
    authorization_code,
    authorization_request,
    callback_params,
    choose_scopes,
    client_metadata_document,
    is_metadata_document_url,
    pkce_pair,
    read_registration,
    read_resource_metadata,
    read_server_metadata,
    read_token_response,
    registration_request,
    registration_scopes,
    token_auth_method,
)
from mcp_stateless.client.oauth.store import Records

ISSUER = "https://as.example"


def as_doc(**over: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "issuer": ISSUER, "authorization_endpoint": f"{ISSUER}/authorize", "token_endpoint": f"{ISSUER}/token",
        "registration_endpoint": f"{ISSUER}/register", "code_challenge_methods_supported": ["S256"],
        "grant_types_supported": ["authorization_code", "refresh_token"],
        "token_endpoint_auth_methods_supported": ["none"], "authorization_response_iss_parameter_supported": True,
    }
    doc.update(over)
    return {k: v for k, v in doc.items() if v is not None}


def test_pkce_verifier_and_s256_challenge() -> None:
    verifier, challenge = pkce_pair()
    assert 43 <= len(verifier) <= 128
    assert re.fullmatch(r"[A-Za-z0-9\-._~]+", verifier)  # RFC 7636 §4.1 unreserved characters
    assert challenge == base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    assert pkce_pair()[0] != verifier
    # RFC 7636 appendix B
    from mcp_stateless.client.oauth.rules import s256
    assert s256("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk") == "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"


def test_resource_metadata_must_name_this_server() -> None:
    doc = {"resource": "https://mcp.example/mcp", "authorization_servers": [ISSUER], "scopes_supported": ["a"]}
    assert read_resource_metadata(doc, "https://mcp.example/mcp") == ResourceMetadata(
        "https://mcp.example/mcp", (ISSUER,), ("a",))
    with pytest.raises(OAuthError, match=re.escape("is for https://evil.example/mcp")):
        read_resource_metadata({**doc, "resource": "https://evil.example/mcp"}, "https://mcp.example/mcp")
    with pytest.raises(OAuthError, match="no authorization server"):
        read_resource_metadata({**doc, "authorization_servers": []}, "https://mcp.example/mcp")
    with pytest.raises(OAuthError, match="not a JSON object"):
        read_resource_metadata(["x"], "https://mcp.example/mcp")


def test_server_metadata_issuer_equality_pkce_and_https() -> None:
    md = read_server_metadata(as_doc(), ISSUER)
    assert md.iss_parameter_supported and md.refresh_supported and md.registration_endpoint == f"{ISSUER}/register"
    with pytest.raises(OAuthError, match=re.escape("names issuer 'https://as.example/'")):
        read_server_metadata(as_doc(issuer=ISSUER + "/"), ISSUER)  # exact string comparison
    with pytest.raises(OAuthError, match="PKCE"):
        read_server_metadata(as_doc(code_challenge_methods_supported=None), ISSUER)
    with pytest.raises(OAuthError, match="PKCE"):
        read_server_metadata(as_doc(code_challenge_methods_supported=["plain"]), ISSUER)
    with pytest.raises(OAuthError, match="non-HTTPS"):
        read_server_metadata(as_doc(token_endpoint="http://as.example/token"), ISSUER)
    loopback = "http://127.0.0.1:4444"
    assert read_server_metadata(as_doc(issuer=loopback, token_endpoint=f"{loopback}/token",
                                       authorization_endpoint=f"{loopback}/auth", registration_endpoint=None),
                                loopback).registration_endpoint is None
    # RFC 8414 defaults: no refresh grant, client_secret_basic
    bare = read_server_metadata(as_doc(grant_types_supported=None, token_endpoint_auth_methods_supported=None), ISSUER)
    assert not bare.refresh_supported and bare.token_endpoint_auth_methods == ("client_secret_basic",)


def test_scope_selection_order_union_and_offline_access() -> None:
    prm = ResourceMetadata("https://m/mcp", (ISSUER,), ("r1", "r2", "offline_access"))
    md = read_server_metadata(as_doc(scopes_supported=["r1", "offline_access"]), ISSUER)
    no_offline = read_server_metadata(as_doc(scopes_supported=["r1"]), ISSUER)
    assert choose_scopes(["c1"], prm, no_offline) == ["c1"]  # the challenge decides
    assert choose_scopes([], prm, no_offline) == ["r1", "r2"]  # else the resource's list, minus offline_access
    assert choose_scopes([], ResourceMetadata("https://m", (ISSUER,), None), no_offline) == []  # else none
    assert choose_scopes(["c2"], prm, no_offline, ["c1", "r1"]) == ["c1", "r1", "c2"]  # step-up keeps the rest
    assert choose_scopes(["c1"], prm, md) == ["c1", "offline_access"]  # offered by the authorization server
    assert choose_scopes(["c1"], prm, md, want_refresh=False) == ["c1"]
    no_refresh = read_server_metadata(as_doc(scopes_supported=["offline_access"], grant_types_supported=[
        "authorization_code"]), ISSUER)
    assert choose_scopes(["c1"], prm, no_refresh) == ["c1"]


def test_a_registration_is_for_the_scopes_asked_and_every_scope_the_resource_lists() -> None:
    prm = ResourceMetadata("https://m/mcp", (ISSUER,), ("r1", "r2", "offline_access"))
    assert registration_scopes(["r1", "offline_access"], prm) == ["r1", "offline_access", "r2"]
    assert registration_scopes(["c1"], prm) == ["c1", "r1", "r2"]  # never offline_access because a resource did
    assert registration_scopes(["c1"], ResourceMetadata("https://m", (ISSUER,), None)) == ["c1"]
    assert registration_scopes([], ResourceMetadata("https://m", (ISSUER,), None)) == []


def test_token_endpoint_authentication_as_advertised() -> None:
    def method(supported: list[str], identity: ClientIdentity) -> str:
        return token_auth_method(identity, read_server_metadata(
            as_doc(token_endpoint_auth_methods_supported=supported), ISSUER))

    secret = ClientIdentity("c", "s")
    public = ClientIdentity("c")
    assert method(["client_secret_basic"], secret) == "client_secret_basic"
    assert method(["client_secret_post"], secret) == "client_secret_post"
    assert method(["none"], secret) == "none"
    assert method(["client_secret_post", "none"], public) == "none"
    assert method(["client_secret_basic", "client_secret_post"], ClientIdentity("c", "s", "client_secret_post")) \
        == "client_secret_post"  # what the registration chose
    with pytest.raises(OAuthError, match="supports token endpoint authentication"):
        method(["client_secret_basic"], public)
    with pytest.raises(OAuthError):
        method(["private_key_jwt"], secret)


def test_registration_request_and_answer() -> None:
    md = read_server_metadata(as_doc(token_endpoint_auth_methods_supported=["client_secret_basic"]), ISSUER)
    doc = registration_request(md, "cli", "http://127.0.0.1:5000/callback", ["a", "b"])
    assert doc == {"client_name": "cli", "redirect_uris": ["http://127.0.0.1:5000/callback"],
                   "grant_types": ["authorization_code", "refresh_token"], "response_types": ["code"],
                   "token_endpoint_auth_method": "client_secret_basic", "application_type": "native",
                   "scope": "a b"}
    assert registration_request(read_server_metadata(as_doc(), ISSUER), "w", "https://app.example/cb", [])[
        "application_type"] == "web"
    got = read_registration({"client_id": "id1", "client_secret": "s1", "token_endpoint_auth_method": "none"})
    assert (got.client_id, got.client_secret, got.auth_method, got.kind) == ("id1", "s1", "none", "registered")
    assert "s1" not in repr(got)
    with pytest.raises(OAuthError, match="no client_id"):
        read_registration({"client_secret": "x"})


def test_client_metadata_documents() -> None:
    assert is_metadata_document_url("https://app.example/client.json")
    assert not is_metadata_document_url("https://app.example/") and not is_metadata_document_url("http://a/b.json")
    doc = client_metadata_document("https://app.example/c.json", "app", ["http://127.0.0.1/cb"])
    assert doc["client_id"] == "https://app.example/c.json" and doc["application_type"] == "native"


def pending(iss_required: bool = True) -> Any:
    md = read_server_metadata(as_doc(authorization_response_iss_parameter_supported=iss_required), ISSUER)
    return authorization_request(md, ClientIdentity("cid"), "http://127.0.0.1:1/cb", "https://m/mcp", ["a", "b"])


def test_the_authorization_request_carries_pkce_state_resource_and_scope() -> None:
    p = pending()
    q = {k: v[0] for k, v in parse_qs(urlsplit(p.url).query).items()}
    assert q == {"response_type": "code", "client_id": "cid", "redirect_uri": "http://127.0.0.1:1/cb",
                 "state": p.state, "code_challenge": q["code_challenge"], "code_challenge_method": "S256",
                 "resource": "https://m/mcp", "scope": "a b"}
    from mcp_stateless.client.oauth.rules import s256
    assert q["code_challenge"] == s256(p.verifier)


def test_the_authorization_response_rfc9207_then_state_then_outcome() -> None:
    p = pending(iss_required=True)
    ok = {"code": "c1", "state": p.state, "iss": ISSUER}
    assert authorization_code(p, ok) == "c1"
    with pytest.raises(OAuthError, match="names issuer"):
        authorization_code(p, {**ok, "iss": ISSUER + "/"})  # no normalization
    with pytest.raises(OAuthError, match="names issuer"):  # a mismatched iss hides even the error
        authorization_code(p, {"error": "access_denied", "state": p.state, "iss": "https://evil.example"})
    with pytest.raises(OAuthError, match="lacks the iss"):
        authorization_code(p, {"code": "c1", "state": p.state})
    with pytest.raises(OAuthError, match="state"):
        authorization_code(p, {**ok, "state": "other"})
    with pytest.raises(OAuthError, match="access_denied"):
        authorization_code(p, {"error": "access_denied", "state": p.state, "iss": ISSUER})
    loose = pending(iss_required=False)
    assert authorization_code(loose, {"code": "c2", "state": loose.state}) == "c2"  # not advertised, absent
    with pytest.raises(OAuthError, match="names issuer"):
        authorization_code(loose, {"code": "c2", "state": loose.state, "iss": "https://evil.example"})
    assert callback_params("http://127.0.0.1/cb?code=a&state=b&code=z") == {"code": "a", "state": "b"}


def test_token_answers() -> None:
    t = read_token_response({"access_token": "AT-1", "token_type": "bearer", "expires_in": 60,
                             "refresh_token": "RT-1", "scope": "a b"}, ["a"], now=1000.0)
    assert t == Tokens("AT-1", 1060.0, "RT-1", ("a", "b"))
    assert not t.expired(now=1000.0) and t.expired(now=1031.0)  # 30 s early
    assert "AT-1" not in repr(t) and "RT-1" not in repr(t)
    kept = read_token_response({"access_token": "AT-2", "token_type": "Bearer"}, ["a"], previous=t)
    assert (kept.refresh_token, kept.scopes, kept.expires_at) == ("RT-1", ("a",), None)
    for bad in ({"token_type": "Bearer"}, {"access_token": "x", "token_type": "DPoP"}, "nope"):
        with pytest.raises(OAuthError):
            read_token_response(bad, [])


async def test_memory_and_file_stores(tmp_path: Path) -> None:
    path = tmp_path / "dir" / "tokens.json"
    for store in (MemoryTokenStore(), FileTokenStore(path)):
        r = Records(store)
        assert await r.tokens(ISSUER, "https://m/mcp") is None
        await r.save_tokens(ISSUER, "https://m/mcp", Tokens("at", 5.0, "rt", ("a",)))
        await r.save_client(ISSUER, ClientIdentity("cid", "sec", "none", "registered", ("http://127.0.0.1/cb",)))
        await r.save_binding("https://m/mcp", ISSUER, "https://m/mcp")
        assert await r.tokens(ISSUER, "https://m/mcp") == Tokens("at", 5.0, "rt", ("a",))
        assert await r.tokens("https://other.example", "https://m/mcp") is None  # per issuer
        assert await r.client(ISSUER) == ClientIdentity("cid", "sec", "none", "registered", ("http://127.0.0.1/cb",))
        assert await r.binding("https://m/mcp") == (ISSUER, "https://m/mcp")
        await r.forget_tokens(ISSUER, "https://m/mcp")
        assert await r.tokens(ISSUER, "https://m/mcp") is None
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert sorted(p.name for p in path.parent.iterdir()) == ["tokens.json", "tokens.json.lock"]  # no temp file
    assert await Records(FileTokenStore(path)).client(ISSUER) is not None  # another process reads it


async def test_a_corrupt_token_file_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "tokens.json"
    path.write_text("{not json")
    with pytest.raises(OAuthError, match="is not JSON; remove it"):
        await FileTokenStore(path).get("x")
    assert path.read_text() == "{not json"  # nothing lost


def test_the_default_token_file(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from mcp_stateless.client.oauth import default_token_file

    monkeypatch.setenv("MCP_STATELESS_TOKEN_STORE", str(tmp_path / "x.json"))
    assert default_token_file() == tmp_path / "x.json"
    monkeypatch.delenv("MCP_STATELESS_TOKEN_STORE")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    assert default_token_file() == tmp_path / "mcp-stateless" / "tokens.json"
    assert os.sep in str(default_token_file())


@pytest.mark.slow
def test_writers_in_several_processes_keep_every_record(tmp_path: Path) -> None:
    """Four processes writing 40 records each into one file: all 160 are there (fails without the lock)."""
    import subprocess
    import sys

    path = tmp_path / "tokens.json"
    code = ("import asyncio, sys; from mcp_stateless.client.oauth import FileTokenStore\n"
            "s = FileTokenStore(sys.argv[1])\n"
            "async def main():\n"
            "    for i in range(40): await s.set(f'{sys.argv[2]}-{i}', {'n': i})\n"
            "asyncio.run(main())\n")
    procs = [subprocess.Popen([sys.executable, "-c", code, str(path), f"w{n}"]) for n in range(4)]
    assert [p.wait(60) for p in procs] == [0, 0, 0, 0]
    assert len(json.loads(path.read_text())) == 160
