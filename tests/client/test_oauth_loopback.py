"""`LoopbackAuthorizer`: a one-shot listener on 127.0.0.1 that takes the authorization server's redirect,
answers the browser, ignores other paths, and gives up after its timeout (real sockets)."""

from __future__ import annotations

import asyncio
import threading

import httpx
import pytest

from mcp_stateless.client import OAuthError
from mcp_stateless.client.oauth import LoopbackAuthorizer


async def test_the_redirect_arrives_and_other_paths_are_not_it() -> None:
    seen: dict[str, int] = {}

    def browser(url: str) -> None:
        def visit() -> None:
            seen["wrong"] = httpx.get(f"http://127.0.0.1:{authorizer.port}/favicon.ico", timeout=5).status_code
            seen["right"] = httpx.get(f"{authorizer.redirect_uri}?code=c1&state=s1&iss=x", timeout=5).status_code
        threading.Thread(target=visit, daemon=True).start()

    announced: list[str] = []
    authorizer = LoopbackAuthorizer(open_browser=browser, announce=announced.append, timeout=20)
    try:
        assert authorizer.redirect_uri == f"http://127.0.0.1:{authorizer.port}/callback"
        got = await authorizer.authorize("https://as.example/authorize?x=1")
        assert got == f"{authorizer.redirect_uri}?code=c1&state=s1&iss=x"
        assert announced == ["https://as.example/authorize?x=1"]
        for _ in range(100):
            if "right" in seen:
                break
            await asyncio.sleep(0.05)
        assert seen == {"wrong": 404, "right": 200}
        # a second authorization (a step-up) listens on the same port again
        authorizer.open_browser = None
        again = asyncio.create_task(authorizer.authorize("https://as.example/authorize?x=2"))
        await asyncio.sleep(0.2)
        await asyncio.to_thread(httpx.get, f"{authorizer.redirect_uri}?code=c2", timeout=5)
        assert (await asyncio.wait_for(again, 10)).endswith("?code=c2")
    finally:
        authorizer.close()


async def test_no_redirect_within_the_timeout_is_an_oauth_error() -> None:
    authorizer = LoopbackAuthorizer(open_browser=None, announce=lambda url: None, timeout=0.3)
    try:
        with pytest.raises(OAuthError, match="no authorization arrived"):
            await authorizer.authorize("https://as.example/authorize")
    finally:
        authorizer.close()


async def test_a_redirect_without_this_authorizations_state_is_refused_and_the_real_one_still_arrives() -> None:
    """Any local process can reach the loopback port: a stray or forged callback (wrong or no `state`) gets a
    400 and does not end the login; the redirect with the authorization's own state does."""
    authorizer = LoopbackAuthorizer(open_browser=None, announce=lambda url: None, timeout=20)
    try:
        waiting = asyncio.create_task(authorizer.authorize("https://as.example/authorize?state=s-42&x=1"))
        await asyncio.sleep(0.2)
        forged = await asyncio.to_thread(httpx.get, f"{authorizer.redirect_uri}?code=evil&state=other", timeout=5)
        bare = await asyncio.to_thread(httpx.get, f"{authorizer.redirect_uri}?code=evil", timeout=5)
        assert (forged.status_code, bare.status_code) == (400, 400)
        assert not waiting.done()
        real = await asyncio.to_thread(httpx.get, f"{authorizer.redirect_uri}?code=c1&state=s-42", timeout=5)
        assert real.status_code == 200
        assert await asyncio.wait_for(waiting, 10) == f"{authorizer.redirect_uri}?code=c1&state=s-42"
    finally:
        authorizer.close()
