"""The official TypeScript client 2.x (tools/node) runs the whole authorization flow against a protected
`mcp-stateless serve` app and a real authorization server: discovery from our 401, authorization code with
PKCE and a resource indicator, calls with the token, a step-up on our 403 insufficient_scope, and a
refresh after our 401 for an access token we refuse; as a pre-registered client, a dynamically registered
one and a Client ID Metadata Document client.
The client side is tests/auth/js/ts_oauth_client.mjs; every value it reports is checked here."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from as_harness import NODE, ROOT, AuthServer
from cimd_harness import Tls, cimd_auth_server, https_document
from test_resource_server import protected

from mcp_stateless.client.oauth import client_metadata_document
from services import need

# Every test here starts a process (a server, a client, a tool): the fast lane leaves them out.
pytestmark = pytest.mark.slow

CLIENT = Path(__file__).resolve().parent / "js" / "ts_oauth_client.mjs"
REDIRECT = "http://127.0.0.1/callback"  # the client's, in ts_oauth_client.mjs
SDK = ROOT / "tools" / "node" / "node_modules" / "@modelcontextprotocol" / "client" / "package.json"


@pytest.fixture(scope="module")
def server(auth_server: AuthServer) -> Iterator[str]:
    with protected([auth_server.issuer], "--auth-required-scopes", "tools:read") as url:
        yield url


def run_client(url: str, mode: str, issuer: str, *extra: str) -> dict[str, Any]:
    need(NODE, "Node 22 (tools/node)")
    need(SDK, "@modelcontextprotocol/client (tools/node)")
    r = subprocess.run([str(NODE), str(CLIENT), url, mode, issuer, *extra], capture_output=True, text=True,
                       timeout=90)
    assert r.returncode == 0, r.stderr
    assert "[mcp-sdk]" not in r.stderr, r.stderr  # no SDK warning about how the provider is written
    got: dict[str, Any] = json.loads(r.stdout)
    return got


def login(issuer: str, client_id: str, scope: str, resource: str) -> dict[str, Any]:
    return {"authorize": f"{issuer}/auth", "clientId": client_id, "scope": scope, "resource": resource,
            "codeChallengeMethod": "S256", "stateEchoed": True, "iss": issuer}


def assert_whole_flow(out: dict[str, Any], iss: str, client_id: str) -> None:
    """What a client that logs in, steps up and refreshes reports (the logins are checked by the caller)."""
    assert "connectedWithoutLogin" not in out and out["version"] == "2026-07-28"
    assert out["tools"] == ["whoami", "new_cart", "peek_cart"]  # filtered: no tools:admin yet
    assert out["whoami"] == {"id": f"{iss}#alice", "scopes": ["tools:read"], "client_id": client_id}
    assert out["stepUp"] is True and "stepUpRefused" not in out
    assert out["reset"] == "reset"
    assert out["whoamiAfter"] == {"id": f"{iss}#alice", "scopes": ["tools:admin", "tools:read"],
                                  "client_id": client_id}
    assert out["toolsAfter"] == ["whoami", "reset", "new_cart", "peek_cart"]
    # the client's private cache is per principal, and the principal did not change with the wider token
    assert out["toolsCachedAfter"] == ["whoami", "new_cart", "peek_cart"]
    # our 401 for a spoiled access token: the client refreshes (no new login) and the retried call works
    assert out["hadRefreshToken"] is True and out["refreshed"] is True
    assert out["whoamiRefreshed"] == out["whoamiAfter"]
    assert out["registered"] == []
    assert out["savedScopes"] == ["tools:read", "tools:read tools:admin", "tools:read tools:admin"]
    assert out["tokenType"] == "Bearer"


def test_pre_registered_client_logs_in_calls_steps_up_and_refreshes(server: str, auth_server: AuthServer) -> None:
    out = run_client(server, "pre-registered", auth_server.issuer)
    iss = auth_server.issuer
    # first login: the scope our 401 advertised; second: the union our 403 asked for
    assert out["logins"] == [login(iss, "public-app", "tools:read", server),
                             login(iss, "public-app", "tools:read tools:admin", server)]
    assert out["savedClients"] == []  # the client information it started with already names the issuer
    assert_whole_flow(out, iss, "public-app")


def test_dynamically_registered_client_logs_in_calls_and_refreshes(server: str, auth_server: AuthServer) -> None:
    """DCR (RFC 7591) then the same flow, with the step-up refused by the authorization server, correctly.

    The client registers with `scope` = the scope it picks for its first authorization, and it picks the
    401 challenge's `scope` ahead of our metadata's `scopes_supported` (the specification's scope
    selection order), so it registers for tools:read although our metadata lists tools:admin too.
    oidc-provider holds a client to its registered `scope` (RFC 7591 §2: the scopes the client can use
    when requesting access tokens), so the step-up asking for tools:admin is refused with invalid_scope
    at the authorization endpoint, and the client does not register again. Our server's part, the 403
    naming the union, is what the client asked for; our own client registers for every listed scope and
    steps up (test_oauth_client.py)."""
    prm = httpx.get(server.replace("/mcp", "/.well-known/oauth-protected-resource/mcp")).json()
    assert prm["scopes_supported"] == ["tools:read", "tools:admin"]
    out = run_client(server, "dcr", auth_server.issuer)
    iss = auth_server.issuer
    [client_id] = out["registered"]
    assert client_id != "public-app" and out["savedClients"] == [client_id]
    assert out["registeredScope"] == "tools:read"
    assert out["logins"] == [login(iss, client_id, "tools:read", server),
                             login(iss, client_id, "tools:read tools:admin", server)]
    assert out["whoami"] == {"id": f"{iss}#alice", "scopes": ["tools:read"], "client_id": client_id}
    assert out["stepUp"] is True
    assert out["stepUpRefused"] == {"code": "invalid_scope", "message": "requested scope is not allowed"}
    assert out["reset"] is None
    # the refused step-up left the client working with the token it had
    assert out["whoamiAfter"] == out["whoami"] and out["toolsAfter"] == ["whoami", "new_cart", "peek_cart"]
    assert out["hadRefreshToken"] is True and out["refreshed"] is True
    assert out["whoamiRefreshed"] == out["whoami"]
    assert out["savedScopes"] == ["tools:read", "tools:read"]


def test_client_id_metadata_document_client_logs_in_calls_steps_up_and_refreshes(
    tmp_path_factory: pytest.TempPathFactory, tls: Tls
) -> None:
    """The TS client names itself by the HTTPS URL of its Client ID Metadata Document (served on loopback),
    at an authorization server that advertises `client_id_metadata_document_supported`: no registration,
    the authorization server fetches the document; then the whole flow as above."""
    doc = lambda u: client_metadata_document(u, "mcp-stateless TS interop", [REDIRECT])  # noqa: E731
    with cimd_auth_server(tmp_path_factory.mktemp("ts-cimd-as"), tls, "ts-cimd-key1") as auth, \
            https_document(tls, "/ts-client.json", doc) as cimd_url, \
            protected([auth.issuer], "--auth-required-scopes", "tools:read") as url:
        out = run_client(url, "cimd", auth.issuer, cimd_url)
    iss = auth.issuer
    # this authorization server lists offline_access, so the client adds it (our PRM never names it)
    assert out["logins"] == [login(iss, cimd_url, "tools:read offline_access", url),
                             login(iss, cimd_url, "tools:read tools:admin offline_access", url)]
    assert out["savedClients"] == [cimd_url]  # no registration (`registered` is empty): the URL is the id
    assert_whole_flow(out, iss, cimd_url)
