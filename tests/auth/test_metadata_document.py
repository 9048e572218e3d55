"""The Protected Resource Metadata document (RFC 9728) and the 401 challenge that points at it, exactly:
in process, so a slip in a field name, a path or the scope list fails here, not only through a server."""

from __future__ import annotations

import orjson
import pytest

from mcp_stateless.auth import BearerAuthenticator, protected_resource_metadata, well_known_paths
from mcp_stateless.auth.metadata import metadata_url
from mcp_stateless.protocol.principal import Challenge, Credentials


def test_the_document_names_the_resource_its_servers_and_header_bearer_only() -> None:
    assert protected_resource_metadata("https://h.example/mcp", ("https://a.example", "https://b.example"),
                                       ["read", "write"]) == {
        "resource": "https://h.example/mcp",
        "authorization_servers": ["https://a.example", "https://b.example"],
        "bearer_methods_supported": ["header"],
        "scopes_supported": ["read", "write"],
    }


def test_no_scopes_means_no_scopes_supported_member() -> None:
    assert "scopes_supported" not in protected_resource_metadata("https://h.example/", ["https://a.example"], [])


@pytest.mark.parametrize(("resource", "paths"), [
    ("https://h.example/mcp", ("/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource")),
    ("https://h.example/a/b/", ("/.well-known/oauth-protected-resource/a/b", "/.well-known/oauth-protected-resource")),
    ("https://h.example/", ("/.well-known/oauth-protected-resource",)),
    ("https://h.example", ("/.well-known/oauth-protected-resource",)),
])
def test_well_known_paths_put_the_path_suffixed_form_first(resource: str, paths: tuple[str, ...]) -> None:
    assert well_known_paths(resource) == paths


def test_the_challenge_points_at_the_most_specific_metadata_url() -> None:
    assert metadata_url("https://h.example:8443/mcp") == (
        "https://h.example:8443/.well-known/oauth-protected-resource/mcp")


async def test_the_authenticator_serves_the_document_at_both_paths_and_challenges_with_its_scopes() -> None:
    auth = BearerAuthenticator(issuers=["https://a.example"], resource="https://h.example/mcp",
                               required_scopes=["read", "write", "read"])
    doc = {"resource": "https://h.example/mcp", "authorization_servers": ["https://a.example"],
           "bearer_methods_supported": ["header"], "scopes_supported": ["read", "write"]}
    assert {p: orjson.loads(body) for p, body in auth.metadata_routes.items()} == {
        "/.well-known/oauth-protected-resource/mcp": doc, "/.well-known/oauth-protected-resource": doc}
    challenge = await auth.authenticate(Credentials(transport="http", headers={}))
    assert isinstance(challenge, Challenge)
    assert (challenge.status, challenge.www_authenticate) == (
        401, 'Bearer resource_metadata="https://h.example/.well-known/oauth-protected-resource/mcp", '
        'scope="read write"')


def test_scopes_supported_may_differ_from_the_required_ones() -> None:
    auth = BearerAuthenticator(issuers=["https://a.example"], resource="https://h.example/",
                               scopes_supported=["read", "admin"])
    (body,) = auth.metadata_routes.values()
    assert orjson.loads(body)["scopes_supported"] == ["read", "admin"]
