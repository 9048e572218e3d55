"""Opaque cursors, Host/Origin policy, cache hints."""

from __future__ import annotations

import base64

import pytest

from mcp_stateless import CacheHint, OriginPolicy
from mcp_stateless.protocol.caching import CACHEABLE_METHODS
from mcp_stateless.protocol.errors import McpError
from mcp_stateless.protocol.paging import decode_cursor, encode_cursor, page

ITEMS: list[object] = list(range(5))


def test_pages_walk_the_list_once() -> None:
    seen: list[object] = []
    cursor = None
    pages = 0
    while True:
        items, cursor = page("tools", ITEMS, cursor, 2)
        seen += items
        pages += 1
        if cursor is None:
            break
        assert isinstance(cursor, str) and cursor
    assert seen == ITEMS and pages == 3


def test_exact_multiple_has_no_trailing_cursor() -> None:
    assert page("tools", ITEMS[:4], None, 2) == ([0, 1], encode_cursor("tools", 2))
    assert page("tools", ITEMS[:4], encode_cursor("tools", 2), 2) == ([2, 3], None)
    assert page("tools", [], None, 2) == ([], None)


@pytest.mark.parametrize(
    "cursor",
    [
        "",
        "!!!",
        "not-base64-at-all",
        encode_cursor("prompts", 2),
        base64.urlsafe_b64encode(b"tools:-1").decode(),
        base64.urlsafe_b64encode(b"tools:").decode(),
        base64.urlsafe_b64encode(b"tools").decode(),
        base64.urlsafe_b64encode(b"\xff\xfe").decode(),
        encode_cursor("tools", 99),
        7,
        None.__class__,
    ],
)
def test_invalid_cursor(cursor: object) -> None:
    with pytest.raises(McpError) as e:
        page("tools", ITEMS, cursor, 2)
    assert (e.value.code, e.value.message) == (-32602, "Invalid cursor")


def test_cursor_is_bound_to_its_list() -> None:
    c = encode_cursor("tools", 2)
    assert decode_cursor("tools", c) == 2
    with pytest.raises(McpError):
        decode_cursor("resources", c)


@pytest.mark.parametrize(
    ("host", "origin", "why"),
    [
        ("127.0.0.1:8000", None, None),
        ("localhost:1", "http://localhost:3000", None),
        ("[::1]:8080", "http://[::1]:8080", None),
        ("LOCALHOST", None, None),
        ("evil.example.com", "http://evil.example.com", "Host header is not allowed"),
        ("evil.example.com:8000", None, "Host header is not allowed"),
        (None, None, "Host header is not allowed"),
        ("127.0.0.1:8000", "http://evil.example.com", "Origin is not allowed"),
        ("127.0.0.1:8000", "null", "Origin is not allowed"),
        ("127.0.0.1:8000", "file://x", "Origin is not allowed"),
    ],
)
def test_loopback_policy(host: str | None, origin: str | None, why: str | None) -> None:
    assert OriginPolicy.loopback().check(host, origin) == why


def test_extra_hosts_and_origins() -> None:
    p = OriginPolicy.loopback(extra_hosts=["api.example.com:443"], extra_origins=["https://app.example.com"])
    assert p.check("api.example.com:443", "https://app.example.com") is None
    assert p.check("api.example.com:8443", None) == "Host header is not allowed"
    assert p.check("127.0.0.1", "https://other.example.com") == "Origin is not allowed"
    assert OriginPolicy.disabled().check("evil", "http://evil") is None
    assert OriginPolicy(frozenset({"*"})).check("anything", None) is None


def test_cache_hint() -> None:
    assert CacheHint() == CacheHint(0, "public")
    assert CacheHint(5, "public").private() == CacheHint(5, "private")
    for bad in ({"ttl_ms": -1}, {"ttl_ms": 1.5}, {"scope": "shared"}):
        with pytest.raises(ValueError):
            CacheHint(**bad)  # type: ignore[arg-type]
    assert (
        frozenset(
            {
                "server/discover",
                "tools/list",
                "prompts/list",
                "resources/list",
                "resources/templates/list",
                "resources/read",
            }
        )
        == CACHEABLE_METHODS
    )
