"""The OAuth wire rules both roles share: WWW-Authenticate parsing, the well-known URLs, resource coverage."""

from __future__ import annotations

import pytest

from mcp_stateless.protocol.oauth import (
    AuthChallenge,
    authorization_server_metadata_urls,
    bearer_challenge,
    is_loopback_url,
    parse_www_authenticate,
    protected_resource_metadata_urls,
    resource_covers,
)


def test_a_bearer_challenge_with_quoted_parameters() -> None:
    h = ('Bearer error="insufficient_scope", scope="files:read files:write", '
         'resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource/mcp"')
    c = bearer_challenge(h)
    assert c == AuthChallenge("bearer", {
        "error": "insufficient_scope", "scope": "files:read files:write",
        "resource_metadata": "https://mcp.example.com/.well-known/oauth-protected-resource/mcp"})
    assert c.scopes == ("files:read", "files:write")


def test_several_challenges_token68_and_case() -> None:
    got = parse_www_authenticate('Negotiate abc123==, DPoP algs="ES256 PS256", BEARER Realm=mcp , scope="a"')
    assert got == [AuthChallenge("negotiate", {}), AuthChallenge("dpop", {"algs": "ES256 PS256"}),
                   AuthChallenge("bearer", {"realm": "mcp", "scope": "a"})]
    assert bearer_challenge('Basic realm="x"') is None


def test_escapes_inside_quoted_strings_and_commas_in_values() -> None:
    c = bearer_challenge(r'Bearer error_description="a \"quoted\" word, and a comma", error="invalid_token"')
    assert c is not None
    assert c.params == {"error_description": 'a "quoted" word, and a comma', "error": "invalid_token"}


@pytest.mark.parametrize("header", [None, "", "   ", "=x", 'Bearer scope="unterminated', ", ,"])
def test_malformed_headers_give_what_could_be_read_and_never_raise(header: str | None) -> None:
    got = parse_www_authenticate(header)
    assert all(c.params == {} for c in got)
    assert [c.scheme for c in got] in ([], ["bearer"])


def test_the_first_of_a_repeated_parameter_wins() -> None:
    assert bearer_challenge('Bearer scope="a", scope="b"') == AuthChallenge("bearer", {"scope": "a"})


def test_protected_resource_metadata_urls_path_suffixed_first() -> None:
    assert protected_resource_metadata_urls("https://h.example/mcp") == [
        "https://h.example/.well-known/oauth-protected-resource/mcp",
        "https://h.example/.well-known/oauth-protected-resource"]
    assert protected_resource_metadata_urls("http://127.0.0.1:8000/") == [
        "http://127.0.0.1:8000/.well-known/oauth-protected-resource"]
    assert protected_resource_metadata_urls("https://h/a/b/?q=1") == [
        "https://h/.well-known/oauth-protected-resource/a/b", "https://h/.well-known/oauth-protected-resource"]


def test_authorization_server_metadata_urls_for_issuers_with_and_without_a_path() -> None:
    assert authorization_server_metadata_urls("https://as.example") == [
        "https://as.example/.well-known/oauth-authorization-server",
        "https://as.example/.well-known/openid-configuration"]
    assert authorization_server_metadata_urls("https://as.example/tenant1") == [
        "https://as.example/.well-known/oauth-authorization-server/tenant1",
        "https://as.example/.well-known/openid-configuration/tenant1",
        "https://as.example/tenant1/.well-known/openid-configuration"]


@pytest.mark.parametrize(("resource", "server", "covers"), [
    ("https://h/mcp", "https://h/mcp", True),
    ("https://h", "https://h/mcp", True),
    ("https://h/", "https://h/mcp", True),
    ("https://H:443/mcp/", "https://h/mcp", True),
    ("https://h/mcp", "https://h/mcp/tenant", True),
    ("https://h/m", "https://h/mcp", False),
    ("https://h/mcp/x", "https://h/mcp", False),
    ("https://evil.example.com/mcp", "https://h/mcp", False),
    ("http://h/mcp", "https://h/mcp", False),
    ("https://h:8443/mcp", "https://h/mcp", False),
    ("https://h/mcp#frag", "https://h/mcp", False),
])
def test_resource_covers(resource: str, server: str, covers: bool) -> None:
    assert resource_covers(resource, server) is covers


@pytest.mark.parametrize(("url", "loopback"), [
    ("http://localhost:3000/cb", True), ("http://127.0.0.1/cb", True), ("http://127.8.9.1/", True),
    ("http://[::1]:5/", True), ("http://localhost.evil.com/", False), ("http://10.0.0.1/", False),
])
def test_loopback_urls(url: str, loopback: bool) -> None:
    assert is_loopback_url(url) is loopback
