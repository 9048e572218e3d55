"""Client for the official conformance suite's client mode.

    conformance client --command ".venv/bin/python examples/conformance_client.py" --requirements 2026-07-28

The harness appends the mock server's URL as the last argument and names the scenario in
MCP_CONFORMANCE_SCENARIO (MCP_CONFORMANCE_PROTOCOL_VERSION, MCP_CONFORMANCE_CONTEXT alongside).

`auth/*` scenarios put an OAuth authorization server in front of the mock: the client authorizes with
`OAuth`, and the "browser" is headless (the suite's authorization endpoint redirects at once, so the code
is read from that redirect). Its Client ID Metadata Document URL is the one the suite expects; a
pre-registered client_id/client_secret comes in MCP_CONFORMANCE_CONTEXT.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
from collections.abc import Awaitable, Callable
from typing import Any

from mcp_stateless.client import Client
from mcp_stateless.client.oauth import HeadlessAuthorizer, OAuth, PreRegistered

log = logging.getLogger("conformance-client")


async def _elicit(params: dict[str, Any]) -> dict[str, Any]:
    schema = params.get("requestedSchema") or {}
    content: dict[str, Any] = {}
    for name, prop in (schema.get("properties") or {}).items():
        typ = prop.get("type")
        if "default" in prop:
            content[name] = prop["default"]
        elif typ == "boolean":
            content[name] = True
        elif typ in ("number", "integer"):
            content[name] = prop.get("minimum", 1)
        elif "enum" in prop:
            content[name] = prop["enum"][0]
        else:
            content[name] = "conformance"
    return {"action": "accept", "content": content}


async def _sample(params: dict[str, Any]) -> dict[str, Any]:
    return {"role": "assistant", "content": {"type": "text", "text": "conformance sample"},
            "model": "conformance-model", "stopReason": "endTurn"}


CIMD_URL = "https://conformance-test.local/client-metadata.json"


def _oauth(scenario: str, ctx: dict[str, Any]) -> OAuth | None:
    if not scenario.startswith("auth/"):
        return None
    pre = [PreRegistered(ctx["client_id"], ctx.get("client_secret"))] if ctx.get("client_id") else []
    return OAuth(authorizer=HeadlessAuthorizer(), pre_registered=pre, client_metadata_url=CIMD_URL,
                 client_name="mcp-stateless-conformance-client")


def _client(url: str, auth: OAuth | None = None) -> Client:
    version = os.environ.get("MCP_CONFORMANCE_PROTOCOL_VERSION") or "auto"
    return Client(
        url,
        version=version if version else "auto",
        client_info={"name": "mcp-stateless-conformance-client", "version": "0.1.0"},
        elicitation=_elicit,
        url_elicitation=lambda p: {"action": "accept"},
        sampling=_sample,
        roots=[{"uri": "file:///tmp/conformance", "name": "conformance"}],
        timeout=30.0,
        auth=auth,
    )


async def tools_call(c: Client, ctx: dict[str, Any]) -> None:
    tools = await c.list_tools()
    if any(t["name"] == "add_numbers" for t in tools):
        await c.call_tool("add_numbers", {"a": 5, "b": 3})


async def request_metadata(c: Client, ctx: dict[str, Any]) -> None:
    await c.discover()
    tools = await c.list_tools()
    for t in tools:
        if t["name"] == "add_numbers":
            await c.call_tool("add_numbers", {"a": 5, "b": 3})


async def request_state(c: Client, ctx: dict[str, Any]) -> None:
    await c.list_tools()
    for name in ("test_mrtr_echo_state", "test_mrtr_no_state", "test_mrtr_unrelated", "test_mrtr_no_result_type"):
        await c.call_tool(name, {})


async def standard_headers(c: Client, ctx: dict[str, Any]) -> None:
    tools = await c.list_tools()
    for t in tools:
        await c.call_tool(t["name"], {})
    for r in await c.list_resources():
        await c.read_resource(r["uri"], use_cache=False)
    for p in await c.list_prompts():
        await c.get_prompt(p["name"], {})


async def custom_headers(c: Client, ctx: dict[str, Any]) -> None:
    await c.list_tools()
    for call in ctx.get("toolCalls") or []:
        await c.call_tool(call["name"], call.get("arguments") or {})


async def invalid_tool_headers(c: Client, ctx: dict[str, Any]) -> None:
    for t in await c.list_tools():  # invalid ones are already dropped by list_tools
        await c.call_tool(t["name"], {})


async def ref_no_deref(c: Client, ctx: dict[str, Any]) -> None:
    await c.list_tools()  # schemas are kept as data; no $ref is ever fetched


async def schema_preservation(c: Client, ctx: dict[str, Any]) -> None:
    tools = {t["name"]: t for t in await c.list_tools()}
    focal = tools.get("json_schema_2020_12_tool")
    if focal is not None and "json_schema_echo" in tools:
        await c.call_tool("json_schema_echo", {"schema": focal["inputSchema"]})


async def generic(c: Client, ctx: dict[str, Any]) -> None:
    tools = await c.list_tools()
    for t in tools[:1]:
        await c.call_tool(t["name"], {})


SCENARIOS: dict[str, Callable[[Client, dict[str, Any]], Awaitable[None]]] = {
    "tools_call": tools_call,
    "request-metadata": request_metadata,
    "sep-2322-client-request-state": request_state,
    "http-standard-headers": standard_headers,
    "http-custom-headers": custom_headers,
    "http-invalid-tool-headers": invalid_tool_headers,
    "json-schema-ref-no-deref": ref_no_deref,
    "json-schema-2020-12-preservation": schema_preservation,
}


async def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print("usage: conformance_client.py [..] SERVER_URL", file=sys.stderr)
        return 2
    url = argv[-1]
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    ctx = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    run = SCENARIOS.get(scenario, generic)
    try:
        async with _client(url, _oauth(scenario, ctx)) as c:
            await run(c, ctx)
    except Exception as e:
        log.error("scenario %s: %s: %s", scenario, type(e).__name__, e)
        return 1
    return 0


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")
    sys.exit(asyncio.run(main(sys.argv)))
