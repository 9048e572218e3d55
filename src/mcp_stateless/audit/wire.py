"""What the auditor puts on the wire and what it keeps as evidence: modern requests built on purpose (right
or deliberately wrong), and `Exchange`, one request with the response that came back, excerpted for a report."""

from __future__ import annotations

import itertools
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from ..protocol.headers import mirror_headers
from ..protocol.meta import META_CLIENT_CAPABILITIES, META_CLIENT_INFO, META_PROTOCOL_VERSION
from ..protocol.versions import LATEST

Message = dict[str, Any]

AUDITOR_INFO = {"name": "mcp-stateless-audit", "version": "1"}
FULL_CAPS: dict[str, Any] = {"elicitation": {"form": {}}, "sampling": {}, "roots": {}}
EXCERPT = 700  # characters of a response body kept as evidence

_ids = itertools.count(1)


def next_id() -> str:
    """Request ids unique over the whole audit, so a stray answer can never be taken for another's."""
    return f"audit-{next(_ids)}"


def modern(
    method: str,
    params: Mapping[str, Any] | None = None,
    *,
    caps: Mapping[str, Any] | None = None,
    version: str = LATEST,
    client_info: Mapping[str, Any] | None = AUDITOR_INFO,
    id_: str | None = None,
) -> Message:
    """A well-formed modern request: full `_meta` (version, capabilities, client info) on `params`."""
    p: dict[str, Any] = dict(params or {})
    meta: dict[str, Any] = dict(p.get("_meta") or {})
    meta[META_PROTOCOL_VERSION] = version
    meta[META_CLIENT_CAPABILITIES] = dict(caps or {})
    if client_info is not None:
        meta[META_CLIENT_INFO] = dict(client_info)
    p["_meta"] = meta
    return {"jsonrpc": "2.0", "id": id_ or next_id(), "method": method, "params": p}


def headers_for(message: Message) -> dict[str, str]:
    """The HTTP headers mirroring a request body, as a conforming client sends them."""
    params = message.get("params") if isinstance(message.get("params"), dict) else {}
    return mirror_headers(str(message.get("method", "")), params or {})


def excerpt(value: Any, limit: int = EXCERPT) -> str:
    text = value if isinstance(value, str) else orjson.dumps(value).decode()
    return text if len(text) <= limit else text[:limit] + f"… ({len(text)} chars)"


@dataclass
class Exchange:
    """One request and what came back. `messages` are the JSON-RPC messages of the response (SSE
    notifications first); `failure` says why there is no response (refused, timed out, stream broke)."""

    request: Message | None
    http_method: str = "POST"
    headers: dict[str, str] = field(default_factory=dict)
    instance: int = 0
    status: int | None = None
    response_headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    messages: list[Message] = field(default_factory=list)
    failure: str | None = None
    timed_out: bool = False  # no complete response within the request's timeout (slow, or never answering)

    @property
    def response(self) -> Message | None:
        """The JSON-RPC response to this request (by id), if one arrived. An error with `id: null` counts
        too: JSON-RPC 2.0 answers so when it could not read the id, as a 2025 server does in a 400 to a
        request without a session, and the era probe must see that it speaks JSON-RPC."""
        want = (self.request or {}).get("id")
        for m in self.messages:
            if "method" in m or not ("result" in m or "error" in m):
                continue
            if want is None or m.get("id") == want or ("error" in m and m.get("id") is None):
                return m
        return None

    @property
    def result(self) -> dict[str, Any] | None:
        r = self.response
        res = r.get("result") if r else None
        return res if isinstance(res, dict) else None

    @property
    def error(self) -> dict[str, Any] | None:
        r = self.response
        err = r.get("error") if r else None
        return err if isinstance(err, dict) else None

    @property
    def error_code(self) -> int | None:
        err = self.error
        code = err.get("code") if err else None
        return code if isinstance(code, int) else None

    def outcome(self) -> str:
        """One phrase for a finding: `result (complete)`, `error -32602 "…"`, `HTTP 404`, `no response: …`."""
        if self.failure:
            return f"no response: {self.failure}"
        if (res := self.result) is not None:
            return f"result ({res.get('resultType', 'no resultType')})"
        if (err := self.error) is not None:
            return f"error {err.get('code')} {excerpt(str(err.get('message', '')), 120)!r}"
        return f"HTTP {self.status} without a JSON-RPC response" if self.status else "nothing"

    def evidence(self) -> dict[str, Any]:
        req: dict[str, Any] = {"http": self.http_method, "instance": self.instance}
        if self.headers:
            req["headers"] = dict(self.headers)
        if self.request is not None:
            req["body"] = excerpt(self.request)
        resp: dict[str, Any] = {}
        if self.status is not None:
            resp["status"] = self.status
        kept = {k: v for k, v in self.response_headers.items()
                if k in ("content-type", "mcp-session-id", "allow", "www-authenticate")}
        if kept:
            resp["headers"] = kept
        if self.messages:
            resp["body"] = excerpt(self.messages[-1] if len(self.messages) == 1 else self.messages)
        elif self.body:
            resp["body"] = excerpt(self.body.decode("utf-8", "replace"))
        if self.failure:
            resp["failure"] = self.failure
        return {"request": req, "response": resp}


PAGES_MAX = 20  # pages of one list read by the auditor: a server whose cursor never ends is bounded too


async def all_pages(ask: Callable[[str | None], Awaitable[Exchange]], key: str) -> tuple[list[Any], Exchange]:
    """Every page of a list (`ask(cursor)` sends one request): the items, and the last page's exchange."""
    items: list[Any] = []
    cursor: str | None = None
    ex = Exchange(None)
    for _ in range(PAGES_MAX):
        ex = await ask(cursor)
        res = ex.result or {}
        items.extend(res.get(key) or [])
        cursor = res.get("nextCursor")
        if not cursor:
            break
    return items, ex


def comparable(result: Mapping[str, Any] | None) -> Any:
    """A result without `_meta` (serverInfo, instance names) and cache hints: what must not differ between
    instances or with a request's history."""
    if result is None:
        return None
    return {k: v for k, v in result.items() if k not in ("_meta", "ttlMs", "cacheScope")}


__all__ = [
    "AUDITOR_INFO",
    "FULL_CAPS",
    "PAGES_MAX",
    "Exchange",
    "Message",
    "all_pages",
    "comparable",
    "excerpt",
    "headers_for",
    "modern",
    "next_id",
]
