"""Nothing in the modern path reads state left by an earlier request: unrelated requests with different versions,
capabilities, principals, log levels and progress tokens, interleaved on ONE keep-alive TCP connection."""

from __future__ import annotations

import socket
from collections.abc import Callable, Mapping
from typing import Any

import h11
import orjson

from helpers import PV, headers_for, parse_sse, rpc, validate_message
from mcp_stateless import App, Context, KeyRing


def app_under_test() -> App:
    def principal(headers: Mapping[str, str] | None) -> str:
        return (headers or {}).get("x-user", "anonymous")

    app = App("keepalive", key_ring=KeyRing({"k": b"k" * 32}), principal=principal)

    @app.tool()
    def whoami(ctx: Context) -> str:
        caps = ",".join(sorted(ctx.client_capabilities)) or "-"
        return f"{ctx.principal.id} v={ctx.protocol_version} caps={caps} level={ctx.request.log_level}"

    @app.tool()
    async def noisy(ctx: Context) -> str:
        await ctx.report_progress(1)
        await ctx.log("warning", "careful")
        return "noisy done"

    @app.tool()
    def confirm(ctx: Context) -> str:
        ok = ctx.elicit("Sure?", {"type": "object", "properties": {"ok": {"type": "boolean"}}}, key="c")
        return f"{ctx.principal.id} confirmed {(ok.content or {}).get('ok')}"

    return app


class OneConnection:
    """An HTTP/1.1 client over a single socket; fails if the server closes the connection."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.local = self.sock.getsockname()
        self.conn = h11.Connection(our_role=h11.CLIENT)
        self.count = 0

    def post(self, msg: Any, headers: Mapping[str, str]) -> tuple[int, dict[str, str], bytes]:
        assert self.sock.getsockname() == self.local
        body = orjson.dumps(msg)
        hdrs = [("host", f"127.0.0.1:{self.port}"), ("content-length", str(len(body))), *headers.items()]
        self.sock.sendall(self.conn.send(h11.Request(method="POST", target="/mcp", headers=hdrs)) or b"")
        self.sock.sendall(self.conn.send(h11.Data(data=body)) or b"")
        self.sock.sendall(self.conn.send(h11.EndOfMessage()) or b"")
        status = 0
        resp_headers: dict[str, str] = {}
        chunks: list[bytes] = []
        while True:
            event = self.conn.next_event()
            if event is h11.NEED_DATA:
                data = self.sock.recv(65536)
                assert data, "the server closed the keep-alive connection"
                self.conn.receive_data(data)
                continue
            if isinstance(event, h11.Response):
                status = event.status_code
                resp_headers = {k.decode(): v.decode() for k, v in event.headers}
            elif isinstance(event, h11.Data):
                chunks.append(bytes(event.data))
            elif isinstance(event, h11.EndOfMessage):
                break
        assert self.conn.our_state is h11.DONE and self.conn.their_state is h11.DONE
        self.conn.start_next_cycle()
        self.count += 1
        return status, resp_headers, b"".join(chunks)

    def close(self) -> None:
        self.sock.close()


def test_interleaved_requests_on_one_connection(served: Callable[..., Any]) -> None:
    s = served(app_under_test())
    c = OneConnection(s.port)
    try:

        def call(msg: dict[str, Any], **hdr: str | None) -> tuple[int, dict[str, str], list[dict[str, Any]]]:
            status, headers, body = c.post(msg, headers_for(msg, **hdr))
            if headers.get("content-type") == "text/event-stream":
                messages, _ = parse_sse(body.decode())
            elif body:
                messages = [orjson.loads(body)]
            else:
                messages = []
            for m in messages:
                validate_message(m, msg.get("method"))
            assert "mcp-session-id" not in headers
            return status, headers, messages

        def text(messages: list[dict[str, Any]]) -> str:
            t: str = messages[-1]["result"]["content"][0]["text"]
            return t

        who = {"name": "whoami"}
        # 1. alice, sampling capability, log level debug
        st, _, m = call(
            rpc("tools/call", who, id=1, caps={"sampling": {}}, **{"io.modelcontextprotocol/logLevel": "debug"}),
            x_user="alice",
        )
        assert (st, text(m)) == (200, f"alice v={PV} caps=sampling level=debug")
        # 2. nobody, no capabilities, no log level: nothing carried over from 1
        st, _, m = call(rpc("tools/call", who, id=2))
        assert (st, text(m)) == (200, f"anonymous v={PV} caps=- level=None")
        # 3. an unsupported version on the same connection
        st, _, m = call(rpc("tools/call", who, id=3, version="2099-01-01"))
        assert (st, m[0]["id"], m[0]["error"]["code"]) == (400, 3, -32022)
        # 4. a legacy initialize in between
        init = {
            "jsonrpc": "2.0",
            "id": 4,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "old", "version": "1"},
            },
        }
        st, _, m = call(init, mcp_protocol_version="2025-11-25")
        assert st in (400, 404) and m[0]["id"] == 4 and "error" in m[0]
        # 5. the modern request right after still works, no session appeared
        st, _, m = call(rpc("tools/call", who, id="five", caps={"elicitation": {}}), x_user="bob")
        assert (st, m[-1]["id"], text(m)) == (200, "five", f"bob v={PV} caps=elicitation level=None")
        # 6. progress + log on one request (SSE) ...
        st, h, m = call(
            rpc(
                "tools/call",
                {"name": "noisy"},
                id=6,
                progressToken="p6",
                **{"io.modelcontextprotocol/logLevel": "info"},
            )
        )
        assert st == 200 and h["content-type"] == "text/event-stream"
        assert [x.get("method") for x in m[:-1]] == ["notifications/progress", "notifications/message"]
        # 7. ... and none on the next one, which is plain JSON
        st, h, m = call(rpc("tools/call", {"name": "noisy"}, id=7))
        assert st == 200 and h["content-type"] == "application/json" and len(m) == 1 and text(m) == "noisy done"
        # 8. MRTR as alice; 9. a capability-less request; 10. bob replays alice's state; 11. alice finishes
        st, _, m = call(rpc("tools/call", {"name": "confirm"}, id=8, caps={"elicitation": {}}), x_user="alice")
        state = m[0]["result"]["requestState"]
        st, _, m = call(rpc("tools/call", {"name": "confirm"}, id=9))
        assert (st, m[0]["error"]["code"]) == (400, -32021)
        retry = {
            "name": "confirm",
            "requestState": state,
            "inputResponses": {"c": {"action": "accept", "content": {"ok": True}}},
        }
        st, _, m = call(rpc("tools/call", retry, id=10, caps={"elicitation": {}}), x_user="bob")
        assert (st, m[0]["error"]["code"], m[0]["error"]["message"]) == (
            400,
            -32602,
            "requestState is not valid",
        )
        st, _, m = call(rpc("tools/call", retry, id=11, caps={"elicitation": {}}), x_user="alice")
        assert (st, text(m)) == (200, "alice confirmed True")
        # 12. a header mismatch, then 13. a clean request
        st, _, m = call(rpc("tools/list", id=12), mcp_method="tools/call")
        assert (st, m[0]["error"]["code"]) == (400, -32020)
        st, _, m = call(rpc("tools/list", id=13))
        assert st == 200 and [t["name"] for t in m[0]["result"]["tools"]] == ["whoami", "noisy", "confirm"]
        # 14. a notification (202), 15. then discover
        st, _, m = call({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 99}})
        assert (st, m) == (202, [])
        st, _, m = call(rpc("server/discover", id=15))
        assert st == 200 and m[0]["result"]["supportedVersions"] == [PV]
        assert c.count == 15
    finally:
        c.close()
