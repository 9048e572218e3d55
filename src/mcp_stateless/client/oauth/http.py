"""The OAuth client's own HTTP: small JSON and form exchanges with authorization servers and resource
metadata endpoints, over the client's `http11` (no second HTTP stack to install, configure or audit).

No redirects are followed (a metadata document or token answer comes from the URL asked, or not at all),
bodies are bounded while read, each exchange has one timeout for the whole of it, and no connection is kept
between two exchanges: they happen a few times an hour, so an idle pool would only hold sockets nobody
closes.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import orjson

from ..errors import OAuthError
from ..http11 import BodyTooLarge, HttpError, HttpUrl, Pool, bounded

MAX_BODY = 1 << 20  # metadata, registrations and token answers are a few KB


@dataclass(frozen=True, slots=True)
class Answer:
    status: int
    headers: Mapping[str, str]
    body: bytes

    def json(self) -> Any:
        """The body as JSON, or None when it is not JSON."""
        try:
            return orjson.loads(self.body)
        except orjson.JSONDecodeError:
            return None


class OAuthHttp:
    def __init__(self, *, timeout: float = 10.0, ssl_context: ssl.SSLContext | None = None) -> None:
        self.timeout = timeout
        self._pool = Pool(max_idle=0, connect_timeout=timeout, ssl_context=ssl_context)

    async def request(self, method: str, url: str, headers: Mapping[str, str], body: bytes = b"") -> Answer:
        """One exchange, whole (connect, head and body) within `timeout` however slowly its bytes trickle, and
        its body refused past MAX_BODY while it is read (a declared or streamed 200 MiB document is never
        buffered)."""
        try:
            ep = HttpUrl.parse(url)
        except ValueError as e:
            raise OAuthError(str(e)) from None
        too_large = f"{url} answered with more than {MAX_BODY} bytes"
        try:
            async with asyncio.timeout(self.timeout):
                resp = await self._pool.request(method, ep, headers, body, timeout=None)
                try:
                    declared = resp.headers.get("content-length", "")
                    if declared.isdigit() and int(declared) > MAX_BODY:
                        raise OAuthError(too_large)
                    data = b"".join([chunk async for chunk in bounded(resp.iter_bytes(), MAX_BODY, too_large)])
                finally:
                    await resp.aclose()
        except TimeoutError:
            raise OAuthError(f"{url}: no complete answer within {self.timeout:g} s") from None
        except BodyTooLarge as e:
            raise OAuthError(str(e)) from None
        except HttpError as e:
            raise OAuthError(f"cannot reach {ep.scheme}://{ep.host_header}: {e}") from None
        return Answer(resp.status, resp.headers, data)

    async def get(self, url: str, headers: Mapping[str, str] | None = None) -> Answer:
        return await self.request("GET", url, {"Accept": "application/json", **(headers or {})})

    async def post_form(self, url: str, form: Mapping[str, str], headers: Mapping[str, str] | None = None) -> Answer:
        return await self.request("POST", url, {"Content-Type": "application/x-www-form-urlencoded",
                                                "Accept": "application/json", **(headers or {})},
                                  urlencode(form).encode("ascii"))

    async def post_json(self, url: str, doc: Any) -> Answer:
        return await self.request("POST", url, {"Content-Type": "application/json", "Accept": "application/json"},
                                  orjson.dumps(doc))

    async def aclose(self) -> None:
        await self._pool.aclose()


__all__ = ["MAX_BODY", "Answer", "OAuthHttp"]
