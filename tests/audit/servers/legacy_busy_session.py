"""A 2025-only Streamable HTTP server (raw ASGI under uvicorn, no SDK) that serves one request at a time per
session, marking the session busy while a response streams. In `leaky` mode the mark is cleared only when the
response was sent: a client that drops the stream first leaves the session busy for good, and every later
request in it is refused (409, JSON-RPC -32000 "session busy") — broken on purpose. In `tidy` mode the mark
is cleared however the request ends: the clean counterpart.

Expected: legacy.broken-stream fails in `leaky` mode and passes in `tidy` mode.

    <python with uvicorn> legacy_busy_session.py leaky|tidy PORT
"""

import asyncio
import json
import sys
import uuid
from typing import Any

import uvicorn

MODE, PORT = sys.argv[1], int(sys.argv[2])
BUSY: dict[str, bool] = {}
TOOLS = [{"name": "status", "description": "Always fine.", "inputSchema": {"type": "object"},
          "annotations": {"readOnlyHint": True}}]


Headers = tuple[tuple[bytes, bytes], ...]


async def _send_json(send: Any, status: int, body: dict[str, Any], headers: Headers = ()) -> None:
    raw = json.dumps(body).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), *headers]})
    await send({"type": "http.response.body", "body": raw})


async def _disconnected(receive: Any) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


def _answer(msg: dict[str, Any]) -> dict[str, Any]:
    method = msg.get("method")
    if method == "tools/list":
        result: dict[str, Any] = {"tools": TOOLS}
    elif method == "tools/call":
        result = {"content": [{"type": "text", "text": "fine"}]}
    elif method == "ping":
        result = {}
    else:
        return {"jsonrpc": "2.0", "id": msg.get("id"), "error": {"code": -32601, "message": f"no {method}"}}
    return {"jsonrpc": "2.0", "id": msg.get("id"), "result": result}


async def app(scope: Any, receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return
    headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
    sid = headers.get("mcp-session-id", "")
    if scope["method"] == "GET":
        await _send_json(send, 405, {"error": "no standalone stream"})
        return
    if scope["method"] == "DELETE":
        BUSY.pop(sid, None)
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b""})
        return
    body = b""
    while True:
        m = await receive()
        body += m.get("body", b"")
        if not m.get("more_body"):
            break
    msg = json.loads(body)
    if msg.get("method") == "initialize":
        sid = uuid.uuid4().hex
        BUSY[sid] = False
        result = {"protocolVersion": msg["params"].get("protocolVersion", "2025-11-25"),
                  "capabilities": {"tools": {}}, "serverInfo": {"name": f"legacy-busy-session-{MODE}", "version": "1"}}
        await _send_json(send, 200, {"jsonrpc": "2.0", "id": msg["id"], "result": result},
                         ((b"mcp-session-id", sid.encode()),))
        return
    if sid not in BUSY:
        await _send_json(send, 404, {"jsonrpc": "2.0", "id": None, "error": {"code": -32001, "message": "no session"}})
        return
    if "id" not in msg:  # a notification
        await send({"type": "http.response.start", "status": 202, "headers": []})
        await send({"type": "http.response.body", "body": b""})
        return
    if BUSY[sid]:
        await _send_json(send, 409, {"jsonrpc": "2.0", "id": msg["id"],
                                     "error": {"code": -32000, "message": "session busy"}})
        return
    BUSY[sid] = True
    try:
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
        watch = asyncio.ensure_future(_disconnected(receive))
        done, _ = await asyncio.wait({watch}, timeout=0.2)  # the work takes a while
        if done:
            if MODE == "leaky":
                return  # the client left: nothing to send (and, the bug, the session stays busy)
            BUSY[sid] = False
            return
        watch.cancel()
        data = json.dumps(_answer(msg))
        await send({"type": "http.response.body", "body": f"event: message\ndata: {data}\n\n".encode()})
        BUSY[sid] = False
    finally:
        if MODE == "tidy":
            BUSY[sid] = False


uvicorn.run(app, host="127.0.0.1", port=PORT, log_level="warning")
