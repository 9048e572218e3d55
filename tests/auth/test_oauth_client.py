"""Our OAuth client against a real authorization server (oidc-provider, tests/auth/as/authcode.mjs) and a
protected `mcp-stateless serve` app, over real HTTP: the authorization code flow with a pre-registered, a
dynamically registered and a Client ID Metadata Document client, refresh (before expiry and on a 401),
step-up on a tool that needs more scope, and `mcp-stateless login` feeding the other CLI commands.

The user is a headless user agent (httpx following redirects with cookies) that `LoopbackAuthorizer` sends
to the authorization URL; the last redirect lands on the authorizer's real loopback listener."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import os
import stat
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from as_harness import AUTHCODE_SCRIPT, ROOT, AuthServer, running_auth_server
from cimd_harness import Tls, cimd_auth_server, https_document
from test_resource_server import CLI, protected

from mcp_stateless.client import Client, OAuthError
from mcp_stateless.client.oauth import (
    FileTokenStore,
    LoopbackAuthorizer,
    MemoryTokenStore,
    OAuth,
    PreRegistered,
    Tokens,
    client_metadata_document,
)
from mcp_stateless.client.oauth.store import Records
from services import free_port, need


@pytest.fixture(scope="module")
def code_as(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AuthServer]:
    with running_auth_server(tmp_path_factory.mktemp("code-as"), "code-key1", AUTHCODE_SCRIPT) as server:
        yield server


@pytest.fixture(scope="module")
def mcp_url(code_as: AuthServer) -> Iterator[str]:
    with protected([code_as.issuer], "--auth-required-scopes", "tools:read") as url:
        yield url


class Browser:
    """The user: opens each authorization URL it is given in a fresh cookie jar and follows every redirect,
    through oidc-provider's (headless) login and consent, to the client's redirect URI."""

    def __init__(self) -> None:
        self.visits: list[str] = []
        self.errors: list[BaseException] = []

    def __call__(self, url: str) -> None:
        self.visits.append(url)
        threading.Thread(target=self._follow, args=(url,), daemon=True).start()

    def _follow(self, url: str) -> None:
        try:
            with httpx.Client(follow_redirects=True, timeout=15, max_redirects=10) as ua:
                r = ua.get(url)
                assert r.status_code == 200, r.text[:300]
        except BaseException as e:
            self.errors.append(e)

    def query(self, i: int) -> dict[str, list[str]]:
        return parse_qs(urlsplit(self.visits[i]).query)

    def scopes(self, i: int) -> set[str]:
        return set(self.query(i).get("scope", [""])[0].split())


def oauth(browser: Browser, **kw: Any) -> OAuth:
    return OAuth(authorizer=LoopbackAuthorizer(open_browser=browser, announce=lambda url: None, timeout=30), **kw)


async def whoami(url: str, auth: OAuth) -> dict[str, Any]:
    async with Client(url, auth=auth) as c:
        result = await c.call_tool("whoami", {})
    assert result.get("isError") is not True, result
    doc: dict[str, Any] = result["structuredContent"]
    return doc


@pytest.mark.slow
async def test_a_pre_registered_public_client_gets_a_token_and_calls(code_as: AuthServer, mcp_url: str) -> None:
    ua = Browser()
    store = MemoryTokenStore()
    me = await whoami(mcp_url, oauth(ua, store=store, pre_registered=PreRegistered("cli-public")))
    assert me["id"] == f"{code_as.issuer}#alice"
    assert me["client_id"] == "cli-public"
    assert "tools:read" in me["scopes"]
    assert ua.errors == [] and len(ua.visits) == 1
    q = ua.query(0)
    assert q["resource"] == [mcp_url]
    assert q["code_challenge_method"] == ["S256"] and len(q["code_challenge"][0]) == 43
    assert ua.scopes(0) == {"tools:read", "offline_access"}  # the challenge's scope; refresh offered by the AS
    tokens = await Records(store).tokens(code_as.issuer, mcp_url)
    assert tokens is not None and tokens.refresh_token and not tokens.expired()


@pytest.mark.slow
async def test_a_confidential_pre_registered_client_authenticates_with_basic(code_as: AuthServer, mcp_url: str) -> None:
    ua = Browser()
    me = await whoami(mcp_url, oauth(ua, pre_registered=PreRegistered("cli-secret", "cli-secret-secret",
                                                                      issuer=code_as.issuer)))
    assert me["client_id"] == "cli-secret" and ua.errors == []


@pytest.mark.slow
async def test_a_wrong_client_secret_is_refused_by_the_token_endpoint(code_as: AuthServer, mcp_url: str) -> None:
    ua = Browser()
    with pytest.raises(Exception, match="invalid_client") as e:
        await whoami(mcp_url, oauth(ua, pre_registered=PreRegistered("cli-secret", "not-the-secret")))
    assert "not-the-secret" not in str(e.value)


@pytest.mark.slow
async def test_dynamic_registration_then_refresh_before_expiry_and_on_a_401(
    code_as: AuthServer, mcp_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    ua = Browser()
    store = MemoryTokenStore()
    me = await whoami(mcp_url, oauth(ua, store=store, client_name="dcr-test"))
    records = Records(store)
    identity = await records.client(code_as.issuer)
    assert identity is not None and identity.kind == "registered"
    assert me["client_id"] == identity.client_id not in ("cli-public", "cli-secret")
    first = await records.tokens(code_as.issuer, mcp_url)
    assert first is not None and first.refresh_token

    # A later process finds the token expired: it refreshes (no authorizer, so no new authorization).
    await records.save_tokens(code_as.issuer, mcp_url, dataclasses.replace(first, expires_at=time.time() - 5))
    await whoami(mcp_url, OAuth(store=store))
    second = await records.tokens(code_as.issuer, mcp_url)
    assert second is not None and second.access_token != first.access_token and not second.expired()

    # The server refuses a token the client thought valid: the client refreshes and resends.
    await records.save_tokens(code_as.issuer, mcp_url, dataclasses.replace(second, access_token="garbage"))
    await whoami(mcp_url, OAuth(store=store))
    third = await records.tokens(code_as.issuer, mcp_url)
    assert third is not None and third.access_token not in ("garbage", second.access_token)
    assert len(ua.visits) == 1  # one authorization in all
    assert "authorizing" in caplog.text and "refreshing the token" not in caplog.text  # logged; none failed
    secrets = [t.access_token for t in (first, second, third)] + [t.refresh_token or "" for t in (first, third)]
    assert identity.client_secret is None or identity.client_secret not in caplog.text
    assert not [s for s in secrets if s and s in caplog.text]  # no token in any log line


@pytest.mark.slow
async def test_without_a_stored_token_and_no_authorizer_the_error_says_to_log_in(mcp_url: str) -> None:
    with pytest.raises(Exception, match="log in first"):
        await whoami(mcp_url, OAuth())


@pytest.mark.slow
async def test_step_up_asks_for_the_union_of_scopes(code_as: AuthServer, mcp_url: str) -> None:
    ua = Browser()
    auth = oauth(ua, pre_registered=PreRegistered("cli-public"))
    async with Client(mcp_url, auth=auth) as c:
        await c.call_tool("whoami", {})
        result = await c.call_tool("reset", {})  # needs tools:admin: 403 insufficient_scope, then step-up
        assert result["content"][0]["text"] == "reset"
        me = (await c.call_tool("whoami", {}))["structuredContent"]
    assert ua.errors == [] and len(ua.visits) == 2
    assert ua.scopes(1) >= {"tools:read", "tools:admin"}
    assert {"tools:read", "tools:admin"} <= set(me["scopes"])


@pytest.mark.slow
async def test_a_dynamically_registered_client_steps_up(code_as: AuthServer, mcp_url: str) -> None:
    """oidc-provider holds a registered client to the scopes it registered with (RFC 7591 `scope`): our client
    registers for every scope the resource's metadata lists, while its first authorization asks only for the
    challenge's, so the step-up to tools:admin is granted. (Registered for tools:read alone, a client is
    refused the step-up with invalid_scope: the TS client in test_ts_oauth_client.py.)"""
    ua = Browser()
    store = MemoryTokenStore()
    async with Client(mcp_url, auth=oauth(ua, store=store, client_name="dcr-step-up")) as c:
        await c.call_tool("whoami", {})
        result = await c.call_tool("reset", {})
        assert result["content"][0]["text"] == "reset"
        me = (await c.call_tool("whoami", {}))["structuredContent"]
    identity = await Records(store).client(code_as.issuer)
    assert identity is not None and identity.kind == "registered" and me["client_id"] == identity.client_id
    assert ua.errors == [] and len(ua.visits) == 2
    assert ua.scopes(0) == {"tools:read", "offline_access"}  # least privilege at first
    assert ua.scopes(1) == {"tools:read", "tools:admin", "offline_access"}
    assert {"tools:read", "tools:admin"} <= set(me["scopes"])


@pytest.mark.slow
def test_login_stores_a_token_the_other_commands_use(code_as: AuthServer, mcp_url: str, tmp_path: Path) -> None:
    store = tmp_path / "cfg" / "tokens.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCP_STATELESS_")}
    login = subprocess.Popen([CLI, "login", mcp_url, "--no-browser", "--client-id", "cli-public",
                              "--token-store", str(store), "--wait", "60"],
                             cwd=ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, env=env)
    try:
        assert login.stderr is not None
        url = ""
        deadline = time.monotonic() + 30
        while not url.startswith("http"):
            assert time.monotonic() < deadline and login.poll() is None, "login printed no URL"
            url = login.stderr.readline().strip()
        ua = Browser()
        ua(url)
        _out, err = login.communicate(timeout=60)
    finally:
        if login.poll() is None:
            login.kill()
            login.wait()
    assert login.returncode == 0, err
    assert "logged in" in err and ua.errors == []
    assert stat.S_IMODE(store.stat().st_mode) == 0o600 and stat.S_IMODE(store.parent.stat().st_mode) == 0o700
    tools = subprocess.run([CLI, "tools", mcp_url, "--token-store", str(store)], cwd=ROOT, capture_output=True,
                           text=True, timeout=60, env=env)
    assert tools.returncode == 0, tools.stderr
    assert "whoami" in tools.stdout and "reset" not in tools.stdout  # listed per the token's scopes
    # Without the store the same command is refused, and says how to fix it.
    bare = subprocess.run([CLI, "tools", mcp_url, "--token-store", str(tmp_path / "none.json")], cwd=ROOT,
                          capture_output=True, text=True, timeout=60, env=env)
    assert bare.returncode == 1 and f"mcp-stateless login {mcp_url}" in bare.stderr


@pytest.mark.slow
@pytest.mark.parametrize("secret", [["--client-secret", "s3cret"], []])
def test_login_with_a_secret_needs_the_issuer_it_belongs_to(secret: list[str], tmp_path: Path) -> None:
    """The protected resource names the authorization server, so a secret with no fixed issuer could be sent
    to one a hostile resource chose: refused before any request (the URL is never contacted)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCP_STATELESS_")}
    if not secret:
        env["MCP_STATELESS_CLIENT_SECRET"] = "s3cret"
    r = subprocess.run([CLI, "login", "http://127.0.0.1:9/mcp", "--no-browser", "--client-id", "cli-secret",
                        *secret, "--token-store", str(tmp_path / "t.json")], cwd=ROOT, capture_output=True,
                       text=True, timeout=60, env=env)
    assert r.returncode == 2
    assert r.stderr == ("mcp-stateless: error: --client-secret needs --client-issuer (the authorization server "
                        "the secret belongs to)\n")
    assert "s3cret" not in r.stderr and not (tmp_path / "t.json").exists()


@pytest.mark.slow
async def test_tokens_are_kept_per_issuer_and_resource(code_as: AuthServer, mcp_url: str) -> None:
    store = FileTokenStore(Path(os.environ.get("TMPDIR", "/tmp")) / f"t13a-{os.getpid()}-{time.time_ns()}.json")
    try:
        ua = Browser()
        await whoami(mcp_url, oauth(ua, store=store, pre_registered=PreRegistered("cli-public")))
        records = Records(store)
        assert await records.binding(mcp_url) == (code_as.issuer, mcp_url)
        assert isinstance(await records.tokens(code_as.issuer, mcp_url), Tokens)
        assert await records.tokens(code_as.issuer, mcp_url + "/other") is None
    finally:
        store.path.unlink(missing_ok=True)



@pytest.mark.slow
def test_a_client_id_metadata_document_client(tmp_path_factory: pytest.TempPathFactory, tls: Tls) -> None:
    """The authorization server fetches the client's metadata document from its HTTPS client_id URL; no
    registration happens (the test-only relaxations are in cimd_harness.py)."""
    doc = lambda url: client_metadata_document(url, "cimd-test", ["http://127.0.0.1/callback"])  # noqa: E731
    with cimd_auth_server(tmp_path_factory.mktemp("cimd-as"), tls, "cimd-key1") as server, \
            https_document(tls, "/client.json", doc) as cimd_url, \
            protected([server.issuer], "--auth-required-scopes", "tools:read") as url:
        ua = Browser()
        store = MemoryTokenStore()
        me = asyncio.run(whoami(url, oauth(ua, store=store, client_metadata_url=cimd_url)))
        assert me["client_id"] == cimd_url and ua.errors == []
        assert ua.query(0)["client_id"] == [cimd_url]
        identity = asyncio.run(Records(store).client(server.issuer))
        assert identity is not None and identity.kind == "metadata-document"


@pytest.mark.slow
async def test_concurrent_requests_share_one_authorization(code_as: AuthServer, mcp_url: str) -> None:
    ua = Browser()
    async with Client(mcp_url, version="2026-07-28", auth=oauth(ua, pre_registered=PreRegistered("cli-public"))) as c:
        results = await asyncio.gather(*(c.call_tool("whoami", {}) for _ in range(6)))
    assert [r["structuredContent"]["id"] for r in results] == [f"{code_as.issuer}#alice"] * 6
    assert len(ua.visits) == 1 and ua.errors == []


@pytest.mark.slow
async def test_metadata_for_another_resource_stops_the_probe_without_a_legacy_fallback(code_as: AuthServer) -> None:
    """The server's metadata names http://localhost:… while the client talks to 127.0.0.1: the client
    refuses to get a token for it, and the 401 is not mistaken for a legacy server."""
    port = free_port()
    ua = Browser()
    env = {"MCP_STATELESS_AUTH_ISSUERS": code_as.issuer, "MCP_STATELESS_RESOURCE_URL": f"http://localhost:{port}/mcp"}
    with protected([], port=port, env_extra=env) as url:
        c = Client(url, auth=oauth(ua, pre_registered=PreRegistered("cli-public")))
        with pytest.raises(OAuthError, match=f"is for http://localhost:{port}/mcp"):
            await c.connect()
        assert c.session is None and c.era is None
        await c.aclose()
    assert ua.visits == []  # no authorization request was made


@pytest.mark.slow
async def test_a_legacy_session_is_authorized_the_same_way(code_as: AuthServer, mcp_url: str) -> None:
    """2025-11-25 over Streamable HTTP: initialize, the calls and the session's GET stream and DELETE all go
    through the same hook, so the session is opened and used with the token."""
    ua = Browser()
    async with Client(mcp_url, version="2025-11-25", auth=oauth(ua, pre_registered=PreRegistered("cli-public"))) as c:
        assert c.era == "legacy"
        me = (await c.call_tool("whoami", {}))["structuredContent"]
        assert [t["name"] for t in await c.list_tools()] == ["whoami", "new_cart", "peek_cart"]
    assert me["id"] == f"{code_as.issuer}#alice"
    assert len(ua.visits) == 1 and ua.errors == []


@pytest.mark.slow
async def test_a_legacy_session_steps_up_and_keeps_its_session(code_as: AuthServer, mcp_url: str) -> None:
    """The server answers a 2025-11-25 session's call that lacks a scope with 403 insufficient_scope: the
    client authorizes again with the scope union and retries on the same session (the principal is the same)."""
    ua = Browser()
    async with Client(mcp_url, version="2025-11-25", auth=oauth(ua, pre_registered=PreRegistered("cli-public"))) as c:
        assert c.era == "legacy"
        await c.call_tool("whoami", {})
        opened = getattr(c.session, "session_id", None)
        assert opened
        result = await c.call_tool("reset", {})  # needs tools:admin
        assert result["content"][0]["text"] == "reset"
        assert getattr(c.session, "session_id", None) == opened  # no second initialize
        me = (await c.call_tool("whoami", {}))["structuredContent"]
    assert ua.errors == [] and len(ua.visits) == 2
    assert ua.scopes(1) >= {"tools:read", "tools:admin"}
    assert me["id"] == f"{code_as.issuer}#alice" and {"tools:read", "tools:admin"} <= set(me["scopes"])



MCP1_PY = ROOT / ".cache" / "venv-mcp-1.30.0" / "bin" / "python"
MCP1_STEP_UP = Path(__file__).parent / "py" / "mcp1_step_up.py"


@pytest.mark.slow
def test_the_official_python_sdk_1x_steps_up_on_a_legacy_session(code_as: AuthServer, mcp_url: str) -> None:
    """A client nobody here wrote (`mcp` 1.30.0's `ClientSession` + `OAuthClientProvider`, 2025-11-25 only):
    registered dynamically, it authorizes, then steps up on the 403 and keeps its session."""
    need(MCP1_PY, "the mcp 1.30.0 venv")
    done = subprocess.run([str(MCP1_PY), str(MCP1_STEP_UP), mcp_url], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["version"] == "2025-11-25"
    assert out["reset"] == "reset"
    first, then = out["sessions"]
    assert first and first == then  # the retried call went to the session initialize opened
    assert len(out["authorizations"]) == 2 and "tools:admin" in out["authorizations"][1]
    assert out["before"]["id"] == out["after"]["id"] == f"{code_as.issuer}#alice"
    assert "tools:admin" not in out["before"]["scopes"] and "tools:admin" in out["after"]["scopes"]


@dataclasses.dataclass
class _Head:
    """What the flow reads of a response: its status and headers."""

    status: int
    headers: dict[str, str]


async def test_plain_http_metadata_off_loopback_is_refused_before_it_is_fetched() -> None:
    """A 401 naming http:// metadata on a non-loopback host is refused by rule, before any fetch (the
    address is unroutable: a fetch would fail with a different error)."""
    from mcp_stateless.client.auth import HttpRequest
    from mcp_stateless.client.http11 import HttpUrl

    flow = OAuth().auth_flow(HttpRequest("POST", HttpUrl.parse("http://127.0.0.1:9/mcp"), {}))
    await flow.__anext__()
    head = _Head(401, {"www-authenticate": 'Bearer resource_metadata="http://192.0.2.1/.well-known/prm"'})
    with pytest.raises(OAuthError, match="non-HTTPS"):
        await flow.asend(head)  # type: ignore[arg-type]
    await flow.aclose()
