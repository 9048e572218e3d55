"""The Server Card (SEP-2127) at `<endpoint>/server-card` and from `mcp-stateless contract`, validated against
the SEP's JSON schema: remotes and their versions follow `--legacy`/`--legacy-sse`/`--legacy-until`, the
extensions come from the app, and the headers are the ones the SEP asks for (media type, CORS, caching, ETag)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest

from mcp_stateless.conformance import card_violations
from mcp_stateless.protocol import card
from services import CLI, http_server

ROOT = Path(__file__).resolve().parents[2]
APP = "tests/legacy/legacy_app.py:app"
CONFORMANCE_APP = "examples/conformance_server.py:app"
LEGACY = ["2025-11-25", "2025-06-18", "2025-03-26"]
META = "dev.mcp-stateless/compatibility"


def served(app: str, *extra: str) -> tuple[str, httpx.Response]:
    argv = [CLI, "serve", app, "--http", "127.0.0.1:{port}", "--log-level", "warning", "--state", "memory://",
            *extra]
    with http_server(argv, "mcp-stateless serve", cwd=ROOT) as url:
        return url, httpx.get(url + "/server-card", headers={"accept": card.MEDIA_TYPE})


def contract(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([CLI, "contract", *argv], capture_output=True, text=True, timeout=60, cwd=ROOT)


def remotes(document: dict[str, Any]) -> dict[str, list[str]]:
    return {r["type"]: r["supportedProtocolVersions"] for r in document["remotes"]}


@pytest.mark.slow
def test_the_served_card_is_valid_and_says_what_is_served() -> None:
    url, r = served(CONFORMANCE_APP, "--legacy-sse", "--legacy-until", "2099-01-31")
    assert r.status_code == 200
    assert r.headers["content-type"] == "application/mcp-server-card+json"
    assert r.headers["access-control-allow-origin"] == "*"
    assert r.headers["access-control-allow-methods"] == "GET"
    assert r.headers["access-control-allow-headers"] == "Content-Type, If-None-Match"
    assert r.headers["access-control-expose-headers"] == "ETag"
    assert r.headers["cache-control"] == "public, max-age=3600"
    document = r.json()
    assert card_violations(document) == []
    assert document["$schema"] == "https://static.modelcontextprotocol.io/schemas/v1/server-card.schema.json"
    assert document["name"] == "dev.mcp-stateless.local/mcp-stateless-conformance"
    assert [(x["type"], x["url"]) for x in document["remotes"]] == [("streamable-http", url), ("sse", url)]
    assert remotes(document) == {"streamable-http": ["2026-07-28", *LEGACY], "sse": [*LEGACY, "2024-11-05"]}
    assert document["_meta"][META] == {
        "extensions": ["io.modelcontextprotocol/tasks"],
        "modernVersions": ["2026-07-28"],
        "legacy": {"served": True, "versions": LEGACY, "sse": True, "until": "2099-01-31T00:00:00Z"},
    }


@pytest.mark.slow
@pytest.mark.parametrize(("extra", "expected", "legacy"), [
    ((), {"streamable-http": ["2026-07-28", *LEGACY]},
     {"served": True, "versions": LEGACY, "sse": False, "until": None}),
    (("--legacy", "reject"), {"streamable-http": ["2026-07-28"]},
     {"served": False, "versions": [], "sse": False, "until": None}),
    (("--legacy-sse", "--legacy-until", "2020-01-01"), {"streamable-http": ["2026-07-28"]},
     {"served": False, "versions": [], "sse": False, "until": "2020-01-01T00:00:00Z"}),
])
def test_remotes_follow_the_legacy_options(extra: tuple[str, ...], expected: dict[str, list[str]],
                                           legacy: dict[str, Any]) -> None:
    _, r = served(APP, *extra)
    document = r.json()
    assert card_violations(document) == []
    assert remotes(document) == expected
    assert document["_meta"][META]["legacy"] == legacy
    # `contract` prints the same card for the same options (its URL a template unless given).
    printed = contract(APP, *extra, "--url", document["remotes"][0]["url"])
    assert printed.returncode == 0, printed.stderr
    assert json.loads(printed.stdout) == document


@pytest.mark.slow
def test_etag_revalidation_and_preflight() -> None:
    argv = [CLI, "serve", APP, "--http", "127.0.0.1:{port}", "--log-level", "warning", "--state", "memory://"]
    with http_server(argv, "mcp-stateless serve", cwd=ROOT) as url:
        first = httpx.get(url + "/server-card")
        tag = first.headers["etag"]
        assert tag.startswith('"') and tag.endswith('"')
        again = httpx.get(url + "/server-card", headers={"if-none-match": tag})
        assert again.status_code == 304 and again.content == b"" and again.headers["etag"] == tag
        assert httpx.get(url + "/server-card", headers={"if-none-match": '"other"'}).status_code == 200
        assert httpx.get(url + "/server-card", headers={"if-none-match": f'W/{tag}, "x"'}).status_code == 304
        preflight = httpx.options(url + "/server-card", headers={
            "origin": "https://elsewhere.example", "access-control-request-method": "GET"})
        assert preflight.status_code == 204 and preflight.headers["access-control-allow-origin"] == "*"
        post = httpx.post(url + "/server-card", json={})
        assert post.status_code == 405 and post.headers["allow"] == "GET"
        # Another path under the endpoint is still not found; the endpoint itself is untouched.
        assert httpx.get(url + "/server-cards").status_code == 404
        assert httpx.get(url.replace("/mcp", "/other/server-card")).status_code == 404
        assert httpx.get(url + "x/server-card").status_code == 404
        # The URL follows the Host the client used (a loopback name the origin policy admits).
        local = httpx.get(url.replace("127.0.0.1", "localhost") + "/server-card").json()
        assert local["remotes"][0]["url"] == url.replace("127.0.0.1", "localhost")


@pytest.mark.slow
def test_contract_template_and_markdown() -> None:
    printed = contract(CONFORMANCE_APP, "--path", "/api/mcp", "--legacy-sse")
    assert printed.returncode == 0, printed.stderr
    document = json.loads(printed.stdout)
    assert card_violations(document) == []
    assert {r["url"] for r in document["remotes"]} == {"{origin}/api/mcp"}
    assert document["remotes"][0]["variables"]["origin"]["isRequired"] is True
    md = contract(CONFORMANCE_APP, "--markdown", "--url", "https://mcp.example.com/mcp", "--legacy-until",
                  "2027-01-31")
    assert md.returncode == 0, md.stderr
    assert "| streamable-http | `https://mcp.example.com/mcp` | 2026-07-28, 2025-11-25, 2025-06-18, 2025-03-26 |" \
        in md.stdout
    assert "served until 2027-01-31T00:00:00Z" in md.stdout
    assert "Extensions: `io.modelcontextprotocol/tasks`." in md.stdout
    bad = contract(APP, "--url", "ftp://x")
    assert bad.returncode == 2 and "--url must be an http:// or https:// URL" in bad.stderr


def test_names_and_descriptions_fit_the_card() -> None:
    assert card.card_name("com.example/weather") == "com.example/weather"
    assert card.card_name("my server!") == "dev.mcp-stateless.local/my-server"
    assert card.describe("x", None, None) == "x: an MCP server"
    assert card.describe("x", "Title", "  first line\nsecond") == "first line"
    long = card.describe("x", None, "a" * 300)
    assert len(long) == 100 and long.endswith("\u2026")
    identity = card.CardIdentity(card.card_name("my server!"), "1", long, "t" * 150)
    document = card.server_card(identity, card.Compatibility(("2026-07-28",)), "https://h/mcp")
    assert card_violations(document) == []
    assert card_violations({**document, "name": "no-slash"}) == [
        "name: 'no-slash' does not match '^[a-zA-Z0-9.-]+/[a-zA-Z0-9._-]+$'"]
