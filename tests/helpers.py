"""Shared test helpers: request builders, an in-process ASGI driver, SSE parsing and wire-schema checks.

Every message the driver receives is validated against the official 2026-07-28 JSON schema
(`mcp_stateless.conformance.schema`), by the response type of the method that was called.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import httpx
import orjson

from mcp_stateless import App, HttpTransport
from mcp_stateless.conformance import schema
from mcp_stateless.protocol.headers import mirror_headers

PV = "2026-07-28"
BASE_URL = "http://127.0.0.1:8000"
ACCEPT_BOTH = "application/json, text/event-stream"


def validate_as(message: Any, definition: str) -> None:
    try:
        schema.validate_as(message, definition)
    except schema.SchemaViolation as e:
        raise AssertionError(str(e)) from None


def validate_message(message: Any, method: str | None = None) -> None:
    """Validate one server-emitted message by kind (error / result of `method` / notification)."""
    try:
        schema.validate_server_message(message, method)
    except schema.SchemaViolation as e:
        raise AssertionError(str(e)) from None


# --------------------------------------------------------------------------- builders
def meta(caps: Mapping[str, Any] | None = None, version: str = PV, **extra: Any) -> dict[str, Any]:
    m: dict[str, Any] = {
        "io.modelcontextprotocol/protocolVersion": version,
        "io.modelcontextprotocol/clientCapabilities": dict(caps or {}),
    }
    m.update(extra)
    return m


def rpc(
    method: str,
    params: Mapping[str, Any] | None = None,
    *,
    id: Any = 1,
    caps: Mapping[str, Any] | None = None,
    version: str = PV,
    **meta_extra: Any,
) -> dict[str, Any]:
    p = dict(params or {})
    p["_meta"] = meta(caps, version, **meta_extra)
    return {"jsonrpc": "2.0", "id": id, "method": method, "params": p}


def headers_for(message: Mapping[str, Any], **overrides: str | None) -> dict[str, str]:
    """The HTTP headers a conforming client sends for `message`; overrides replace or (None) drop one."""
    h = {"content-type": "application/json", "accept": ACCEPT_BOTH}
    method = message.get("method")
    if isinstance(method, str):
        h.update((k.lower(), v) for k, v in mirror_headers(method, message.get("params") or {}).items())
    for k, v in overrides.items():
        name = k.replace("_", "-").lower()
        if v is None:
            h.pop(name, None)
        else:
            h[name] = v
    return h


def open_legacy_session(url: str, capabilities: Mapping[str, Any] | None = None, *, version: str = "2025-11-25",
                        initialized: bool = False) -> dict[str, str]:
    """Initialize a 2025-era session over Streamable HTTP (and, `initialized`, send notifications/initialized):
    the headers its later requests carry."""
    r = httpx.post(url, headers={"accept": ACCEPT_BOTH}, json={
        "jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": version, "capabilities": dict(capabilities or {}),
                   "clientInfo": {"name": "t", "version": "0"}}})
    assert r.status_code == 200, r.text
    headers = {"accept": ACCEPT_BOTH, "mcp-session-id": r.headers["mcp-session-id"], "mcp-protocol-version": version}
    if initialized:
        assert httpx.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"},
                          headers=headers).status_code == 202
    return headers


# --------------------------------------------------------------------------- SSE
def parse_sse(text: str) -> tuple[list[dict[str, Any]], list[str]]:
    """(JSON messages from `data:` fields, comment lines) of an SSE body."""
    messages: list[dict[str, Any]] = []
    comments: list[str] = []
    data: list[str] = []
    for line in text.split("\n"):
        if line == "":
            if data:
                messages.append(json.loads("\n".join(data)))
                data = []
        elif line.startswith(":"):
            comments.append(line)
        elif line.startswith("data:"):
            data.append(line[5:].lstrip(" "))
        else:
            field = line.split(":", 1)[0]
            assert field in ("event",), f"unexpected SSE field {line!r} (no ids, no retry)"
    assert not data, "SSE body ended inside an event"
    return messages, comments


# --------------------------------------------------------------------------- in-process driver
class Reply:
    """One HTTP exchange: status, headers, and the decoded JSON-RPC messages (validated)."""

    def __init__(self, response: httpx.Response, method: str | None) -> None:
        self.response = response
        self.status = response.status_code
        self.headers = response.headers
        self.messages: list[dict[str, Any]] = []
        self.comments: list[str] = []
        ctype = response.headers.get("content-type", "")
        self.sse = ctype.startswith("text/event-stream")
        if self.sse:
            self.messages, self.comments = parse_sse(response.text)
        elif ctype.startswith("application/json") and response.content:
            self.messages = [orjson.loads(response.content)]
        for m in self.messages:
            validate_message(m, method)

    @property
    def body(self) -> dict[str, Any]:
        """The final JSON-RPC response (the last message)."""
        assert self.messages, (
            f"no JSON-RPC message in the reply (status {self.status}): {self.response.text!r}"
        )
        return self.messages[-1]

    @property
    def result(self) -> dict[str, Any]:
        assert "result" in self.body, self.body
        r: dict[str, Any] = self.body["result"]
        return r

    @property
    def error(self) -> dict[str, Any]:
        assert "error" in self.body, self.body
        e: dict[str, Any] = self.body["error"]
        return e

    @property
    def notifications(self) -> list[dict[str, Any]]:
        return [m for m in self.messages if "id" not in m]


class Driver:
    """Drives an `App` (or an ASGI transport) in-process through httpx's ASGI transport."""

    def __init__(self, app: App | HttpTransport, base_url: str = BASE_URL) -> None:
        self.transport = app if isinstance(app, HttpTransport) else HttpTransport(app)
        self.client = httpx.AsyncClient(transport=httpx.ASGITransport(self.transport), base_url=base_url)

    async def aclose(self) -> None:
        await self.client.aclose()

    async def __aenter__(self) -> Driver:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def send(
        self,
        message: Any,
        headers: Mapping[str, str] | None = None,
        *,
        raw: bytes | None = None,
        http_method: str = "POST",
        path: str = "/mcp",
    ) -> Reply:
        hdrs = (
            dict(headers)
            if headers is not None
            else headers_for(message if isinstance(message, dict) else {})
        )
        content = raw if raw is not None else orjson.dumps(message)
        r = await self.client.request(http_method, path, content=content, headers=hdrs)
        method = message.get("method") if isinstance(message, dict) else None
        return Reply(r, method if isinstance(method, str) else None)

    async def call(
        self,
        method: str,
        params: Mapping[str, Any] | None = None,
        *,
        id: Any = 1,
        caps: Mapping[str, Any] | None = None,
        headers: Mapping[str, str | None] | None = None,
        **meta_extra: Any,
    ) -> Reply:
        msg = rpc(method, params, id=id, caps=caps, **meta_extra)
        return await self.send(msg, headers_for(msg, **(headers or {})))


def text_of(result: Mapping[str, Any]) -> str:
    """The text of a single-text-block CallToolResult."""
    blocks = result["content"]
    assert len(blocks) == 1 and blocks[0]["type"] == "text", blocks
    t: str = blocks[0]["text"]
    return t


SERVER_INFO_KEY = "io.modelcontextprotocol/serverInfo"
SUB_ID_KEY = "io.modelcontextprotocol/subscriptionId"
