"""How the user agent part of the authorization code flow happens: something takes the authorization URL
to the authorization server and brings back the URL it redirected to (`code`, `state`, `iss`).

- `LoopbackAuthorizer`: a real user in a browser; a one-shot listener on 127.0.0.1 receives the redirect
  (RFC 8252 §7.3), as `mcp-stateless login` uses it.
- `HeadlessAuthorizer`: fetches the authorization URL itself and reads the redirect from its answer, for
  authorization servers that grant without a login page (the conformance suite's, test servers).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import sys
from collections.abc import Callable
from typing import Protocol
from urllib.parse import parse_qs, urlsplit

from ..errors import OAuthError
from .http import OAuthHttp


class Authorizer(Protocol):
    @property
    def redirect_uri(self) -> str: ...

    async def authorize(self, url: str) -> str:
        """Send the user agent to `url`; the URL the authorization server redirected it to."""
        ...


class HeadlessAuthorizer:
    """GETs the authorization URL and takes the `Location` of its redirect as the callback, without
    following it (nothing listens at `redirect_uri`)."""

    def __init__(self, redirect_uri: str = "http://localhost:3000/callback", *, timeout: float = 10.0) -> None:
        self.redirect_uri = redirect_uri
        self._http = OAuthHttp(timeout=timeout)

    async def authorize(self, url: str) -> str:
        answer = await self._http.request("GET", url, {"Accept": "text/html"})
        location = answer.headers.get("location")
        if answer.status not in (301, 302, 303, 307, 308) or not location:
            raise OAuthError(f"the authorization endpoint answered HTTP {answer.status} instead of a redirect")
        return location


def system_browser(url: str) -> bool:
    """Open `url` in the system's browser (imported only when a login asks for it)."""
    import webbrowser

    return webbrowser.open(url)


_PAGE = (b"HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\nConnection: close\r\n"
         b"Cache-Control: no-store\r\nContent-Length: %d\r\n\r\n%s")
_DONE = b"<!doctype html><title>mcp-stateless</title><p>Authorization received. You may close this window.</p>"


class LoopbackAuthorizer:
    """Listens on 127.0.0.1 (port 0: any free one) for the one redirect back from the authorization
    server, and sends the user there: `open_browser` (e.g. `system_browser`; None: nothing opens) and a
    line on stderr with the URL (`announce`). Gives up after `timeout` seconds."""

    def __init__(
        self,
        port: int = 0,
        *,
        path: str = "/callback",
        timeout: float = 300.0,
        open_browser: Callable[[str], object] | None = None,
        announce: Callable[[str], None] | None = None,
    ) -> None:
        self._sock = socket.create_server(("127.0.0.1", port))
        self._sock.setblocking(False)
        self.port: int = self._sock.getsockname()[1]
        self.path = path
        self.timeout = timeout
        self.open_browser = open_browser
        self.announce = announce or (lambda url: print(f"Open this URL to authorize:\n  {url}", file=sys.stderr))

    @property
    def redirect_uri(self) -> str:
        return f"http://127.0.0.1:{self.port}{self.path}"

    async def authorize(self, url: str) -> str:
        got: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        # Any local process can reach the loopback port: a redirect that does not carry this authorization's
        # `state` is not the one awaited, so it is refused and the listener keeps waiting for the real one.
        state = parse_qs(urlsplit(url).query).get("state")

        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            try:
                async with asyncio.timeout(10):
                    head = await reader.readuntil(b"\r\n\r\n")
                target = head.split(b" ", 2)[1].decode("latin-1") if head.count(b" ") >= 2 else ""
                parts = urlsplit(target)
                if parts.path != self.path:
                    writer.write(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                elif state is not None and parse_qs(parts.query).get("state") != state:
                    writer.write(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                else:
                    writer.write(_PAGE % (len(_DONE), _DONE))
                    if not got.done():
                        got.set_result(f"http://127.0.0.1:{self.port}{target}")
                await writer.drain()
            except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError):
                pass
            finally:
                writer.close()

        if self._sock.fileno() == -1:  # an earlier authorize() closed it: listen on the same port again
            self._sock = socket.create_server(("127.0.0.1", self.port))
            self._sock.setblocking(False)
        server = await asyncio.start_server(handle, sock=self._sock)
        try:
            self.announce(url)
            if self.open_browser is not None:
                with contextlib.suppress(Exception):
                    self.open_browser(url)
            try:
                async with asyncio.timeout(self.timeout):
                    return await got
            except TimeoutError:
                raise OAuthError(f"no authorization arrived at {self.redirect_uri} "
                                 f"within {self.timeout:.0f} s") from None
        finally:
            server.close()
            with contextlib.suppress(Exception):
                await server.wait_closed()

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._sock.close()


__all__ = ["Authorizer", "HeadlessAuthorizer", "LoopbackAuthorizer", "system_browser"]
