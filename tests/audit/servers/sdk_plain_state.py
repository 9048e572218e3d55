"""Broken on purpose, on the official Python SDK (mcp 2.3.0): requestState readable and forgeable.

The team wanted MRTR state that works on every instance and survives restarts without managing a key, so it
gave `MCPServer` a codec that only base64url-encodes the SDK's state envelope. Every instance accepts every
state, including one a client edited. Expected finding: mrtr.tampered-state (step 5), nothing else fails.

    <mcp venv python> sdk_plain_state.py PORT
"""

import base64
import binascii
import json
import sys

import mcp_types as t
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.request_state import InvalidRequestState, RequestStateSecurity


class Base64Codec:
    """No key, so nothing to share between instances: the state is only encoded."""

    def seal(self, payload: bytes) -> str:
        return base64.urlsafe_b64encode(payload).decode().rstrip("=")

    def unseal(self, token: str) -> bytes:
        try:
            return base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        except (binascii.Error, ValueError):
            raise InvalidRequestState("malformed") from None


app = MCPServer("sdk-plain-state", request_state_security=RequestStateSecurity(codec=Base64Codec()))


@app.tool()
def approve_refund(ctx: Context) -> t.CallToolResult | t.InputRequiredResult:
    """Asks the operator to confirm a refund, carrying the amount in requestState."""
    got = (ctx.input_responses or {}).get("confirm")
    if got is not None:
        amount = json.loads(ctx.request_state or "{}").get("amount")
        return t.CallToolResult(content=[t.TextContent(type="text", text=f"refunded {amount}")])
    schema = {"type": "object", "properties": {"confirm": {"type": "boolean"}}, "required": ["confirm"]}
    return t.InputRequiredResult(
        input_requests={"confirm": t.ElicitRequest(method="elicitation/create", params=t.ElicitRequestFormParams(
            message="Refund 10.00 EUR?", requested_schema=schema))},
        request_state=json.dumps({"amount": "10.00"}))


@app.tool()
def status() -> str:
    """Always fine."""
    return "ok"


if __name__ == "__main__":
    app.run("streamable-http", host="127.0.0.1", port=int(sys.argv[1]))
