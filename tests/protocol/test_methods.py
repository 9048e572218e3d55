"""The one method table (protocol/methods.py) against the official schemas, and the tables derived from it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from mcp_stateless import App
from mcp_stateless.protocol import caching, headers, methods, mrtr
from mcp_stateless.server.dispatch import Dispatcher
from mcp_stateless.server.legacy import bridge

SCHEMAS = Path(__file__).resolve().parents[2] / "src" / "mcp_stateless" / "conformance" / "schemas"


def consts(union: str) -> set[str]:
    doc: dict[str, Any] = json.loads((SCHEMAS / "2026-07-28.json").read_text())["$defs"]
    return {doc[ref["$ref"].split("/")[-1]]["properties"]["method"]["const"] for ref in doc[union]["anyOf"]}


def modern(table: dict[str, methods.Method], kind: str) -> set[str]:
    return {m.name for m in table.values() if "modern" in m.eras and m.kind == kind and not m.input}


def test_modern_entries_are_the_schemas() -> None:
    tasks_extension = {"tasks/get", "tasks/update", "tasks/cancel"}
    assert modern(methods.CLIENT, "request") == consts("ClientRequest") | tasks_extension
    assert modern(methods.SERVER, "notification") == consts("ServerNotification") | {"notifications/tasks"}
    assert {m.name for m in methods.SERVER.values() if m.input} == {
        "sampling/createMessage", "elicitation/create", "roots/list"}


def test_derived_tables() -> None:
    # the exact sets the eight scattered tables held before they were derived
    assert set(mrtr.MRTR_METHODS) == {"tools/call", "prompts/get", "resources/read"}
    assert set(caching.CACHEABLE_METHODS) == {"server/discover", "tools/list", "prompts/list", "resources/list",
                                         "resources/templates/list", "resources/read"}
    assert headers.NAME_PARAM == {"tools/call": "name", "prompts/get": "name", "resources/read": "uri",
                                  "tasks/get": "taskId", "tasks/update": "taskId", "tasks/cancel": "taskId"}
    assert set(bridge.BRIDGED_METHODS) == {"tools/list", "tools/call", "prompts/list", "prompts/get", "resources/list",
                                      "resources/templates/list", "resources/read", "completion/complete"}
    assert set(methods.SAFE_METHODS) == {"server/discover", "tools/list", "prompts/list", "resources/list",
                                    "resources/templates/list", "resources/read", "prompts/get",
                                    "completion/complete"}
    assert methods.LIST_KEYS == {"tools/list": "tools", "prompts/list": "prompts", "resources/list": "resources",
                                 "resources/templates/list": "resourceTemplates"}
    assert methods.LIST_CHANGED == {"tools": "notifications/tools/list_changed",
                                    "prompts": "notifications/prompts/list_changed",
                                    "resources": "notifications/resources/list_changed"}
    assert set(methods.SESSION_NOTIFICATIONS) == {*methods.LIST_CHANGED.values(), "notifications/resources/updated"}


def test_the_dispatcher_answers_what_the_table_says_the_app_serves() -> None:
    handlers = set(Dispatcher(App("t")).handlers)
    assert handlers | {"subscriptions/listen"} == methods.APP_METHODS  # listen is App.listen, not handle


def test_the_app_container_follows_declared_capabilities() -> None:
    app = App("t")
    contains = app.table.methods
    assert "server/discover" in contains
    assert not any(m in contains for m in ("tools/list", "tools/call", "prompts/get", "resources/read",
                                           "completion/complete", "subscriptions/listen"))

    @app.tool()
    def hi() -> str:
        """hi"""
        return "hi"

    assert {"tools/list", "tools/call", "subscriptions/listen"} <= {m for m in methods.APP_METHODS if m in contains}
    assert "prompts/get" not in contains and "initialize" not in contains and "tasks/get" not in contains
