"""The authorization options of `mcp-stateless serve`: command line, environment, refusals, workers."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from mcp_stateless.auth import BearerAuthenticator, Introspection
from mcp_stateless.auth.metadata import well_known_paths
from mcp_stateless.cli import build_parser
from mcp_stateless.cli.base import CliError
from mcp_stateless.cli.config import ServeConfig
from mcp_stateless.cli.serve import config_from_args, open_app
from services import CLI

ROOT = Path(__file__).resolve().parents[2]
APP = "tests/auth/protected_app.py:app"


def parse(*argv: str, **environ: str) -> ServeConfig:
    return config_from_args(build_parser().parse_args(["serve", APP, "--http", "127.0.0.1:8000", *argv]), environ)


def test_options_become_config_and_an_authenticator() -> None:
    config = parse("--auth-issuer", "https://a.example", "--auth-issuer", "https://b.example",
                   "--resource-url", "https://mcp.example/mcp", "--auth-required-scopes", "s1", "s2",
                   "--auth-jwks-refresh", "5", "--state", "memory://")
    assert (config.auth_issuers, config.resource_url, config.auth_required_scopes, config.auth_refresh_seconds) \
        == (("https://a.example", "https://b.example"), "https://mcp.example/mcp", ("s1", "s2"), 5)
    assert ServeConfig.from_json(config.to_json()) == config  # reaches --workers processes whole
    auth = open_app(config).authenticator
    assert isinstance(auth, BearerAuthenticator)
    assert auth.resource == "https://mcp.example/mcp" and auth.required_scopes == {"s1", "s2"}
    assert set(auth.metadata_routes) == {"/.well-known/oauth-protected-resource/mcp",
                                         "/.well-known/oauth-protected-resource"}


def test_environment_equivalents_and_the_command_line_wins() -> None:
    env = {"MCP_STATELESS_AUTH_ISSUERS": "https://a.example https://b.example",
           "MCP_STATELESS_RESOURCE_URL": "https://mcp.example/mcp", "MCP_STATELESS_AUTH_SCOPES": "s1 s2"}
    config = parse(**env)
    assert config.auth_issuers == ("https://a.example", "https://b.example")
    assert config.resource_url == "https://mcp.example/mcp" and config.auth_required_scopes == ("s1", "s2")
    config = parse("--auth-issuer", "https://c.example", "--resource-url", "https://x.example/mcp", **env)
    assert config.auth_issuers == ("https://c.example",) and config.resource_url == "https://x.example/mcp"


def test_no_auth_options_means_no_authenticator_change() -> None:
    config = parse("--state", "memory://")
    assert config.auth_issuers == () and config.resource_url is None
    assert not isinstance(open_app(config).authenticator, BearerAuthenticator)


@pytest.mark.parametrize(("argv", "message"), [
    (["--auth-issuer", "https://a.example"], "--auth-issuer needs --resource-url"),
    (["--resource-url", "https://mcp.example/mcp"], "need at least one --auth-issuer"),
    (["--auth-required-scopes", "s"], "need at least one --auth-issuer"),
    (["--auth-issuer", "https://a", "--resource-url", "https://m/mcp", "--auth-jwks-refresh", "-1"], ">= 0"),
])
def test_incomplete_options_are_refused(argv: list[str], message: str) -> None:
    with pytest.raises(CliError, match=message):
        parse(*argv)


@pytest.mark.slow
def test_relative_resource_url_is_one_clear_line() -> None:
    r = subprocess.run([CLI, "serve", APP, "--stdio", "--auth-issuer", "https://a.example", "--resource-url",
                        "/mcp", "--state", "memory://"], cwd=ROOT, capture_output=True, text=True, timeout=20,
                       stdin=subprocess.DEVNULL)
    assert r.returncode == 2
    assert r.stderr.strip().splitlines()[-1].endswith("resource must be the server's absolute canonical URI")


def test_well_known_paths_and_no_secret_in_repr() -> None:
    assert well_known_paths("https://h.example") == ("/.well-known/oauth-protected-resource",)
    assert well_known_paths("https://h.example/a/mcp/") == ("/.well-known/oauth-protected-resource/a/mcp",
                                                            "/.well-known/oauth-protected-resource")
    assert "s3cret" not in repr(Introspection("rs", "s3cret"))
    with pytest.raises(ValueError, match="at least one trusted issuer"):
        BearerAuthenticator("https://h.example/mcp", [])


def test_scopes_must_be_a_list_of_tokens() -> None:
    from mcp_stateless import App

    app = App("x", "1")
    for bad in ("tools:read", ["two words"], [""]):
        with pytest.raises(ValueError, match="scopes must be a list of scope tokens"):
            app.tool("t", scopes=bad)(lambda: "x")
