"""Raw HTTP/1.1 requests for the benchmark: a 2026-07-28 tools/call with its mirrored headers."""

from __future__ import annotations

import json
from typing import Any

VERSION = "2026-07-28"


def body(tool: str, arguments: dict[str, Any], *, rid: int = 1, client: str = "bench",
         progress_token: str | None = None, method: str = "tools/call") -> bytes:
    meta: dict[str, Any] = {
        "io.modelcontextprotocol/protocolVersion": VERSION,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": client, "version": "1.0.0"},
    }
    if progress_token is not None:
        meta["progressToken"] = progress_token
    params: dict[str, Any] = {"_meta": meta}
    if method == "tools/call":
        params.update(name=tool, arguments=arguments)
    elif method == "subscriptions/listen":
        params["notifications"] = arguments
    return json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params},
                      separators=(",", ":")).encode()


def http_request(port: int, payload: bytes, *, method: str = "tools/call", name: str | None = "echo",
                 authorization: str | None = None, path: str = "/mcp") -> bytes:
    lines = [
        f"POST {path} HTTP/1.1",
        f"Host: 127.0.0.1:{port}",
        "Content-Type: application/json",
        "Accept: application/json, text/event-stream",
        f"MCP-Protocol-Version: {VERSION}",
        f"Mcp-Method: {method}",
    ]
    if name is not None:
        lines.append(f"Mcp-Name: {name}")
    if authorization is not None:
        lines.append(f"Authorization: {authorization}")
    lines.append(f"Content-Length: {len(payload)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + payload


def echo_requests(port: int, *, distinct: int = 1, progress: bool = False,
                  authorization: str | None = None) -> list[bytes]:
    """`distinct` > 1: every request a different client info and principal (Authorization); else
    every request carries `authorization` (if given)."""
    tool = "progress_echo" if progress else "echo"
    out = []
    for i in range(distinct):
        client = "bench" if distinct == 1 else f"bench-client-{i}"
        auth = authorization if distinct == 1 else f"Bearer principal-{i}"
        b = body(tool, {"text": "hi"}, rid=i + 1, client=client, progress_token=f"p{i}" if progress else None)
        out.append(http_request(port, b, name=tool, authorization=auth))
    return out


def wrk_lua(port: int, progress: bool = False) -> str:
    """A wrk script that POSTs the same call with the same headers."""
    tool = "progress_echo" if progress else "echo"
    b = body(tool, {"text": "hi"}, progress_token="p1" if progress else None).decode()
    return "\n".join([
        'wrk.method = "POST"',
        f"wrk.body = {json.dumps(b)}",
        'wrk.headers["Content-Type"] = "application/json"',
        'wrk.headers["Accept"] = "application/json, text/event-stream"',
        f'wrk.headers["MCP-Protocol-Version"] = "{VERSION}"',
        'wrk.headers["Mcp-Method"] = "tools/call"',
        f'wrk.headers["Mcp-Name"] = "{tool}"',
        "",
    ])
