"""The one method table: every fact the code needs about an MCP method, in one place (h11's rule 1).

Each `Method` says who sends it, whether it is a request or a notification, which eras define it
(`modern` is 2026-07-28, `legacy` the 2025 revisions a dual-era server speaks), and the facts the rest
of the package asks about: the server capability that declares it, the `params` member mirrored in the
`Mcp-Name` header, whether it takes MRTR rounds, whether its result may carry cache hints, whether a
client may retry it safely, the key of its page in a list result, whether a 2025 session reaches it
through the app's own handler, and the change kind of a list-changed notification. Every other table
(`NAME_PARAM`, `MRTR_METHODS`, `CACHEABLE_METHODS`, the client's safe methods and list keys, the 2025
branch's bridged methods and list notifications, the app's method container) is derived from this one.

The names and their directions are the official schemas' (2026-07-28, 2025-11-25, the Tasks
extension draft). In the modern era the server->client requests are not JSON-RPC requests but the kinds
of MRTR input requests a result may carry; they are listed with `input` set.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

Direction = Literal["client", "server"]  # who sends the message
Kind = Literal["request", "notification"]
Era = Literal["modern", "legacy"]
Capability = Literal["tools", "prompts", "resources", "completions", "logging", "tasks"]

MODERN: frozenset[Era] = frozenset({"modern"})
LEGACY: frozenset[Era] = frozenset({"legacy"})
BOTH: frozenset[Era] = frozenset({"modern", "legacy"})


@dataclass(frozen=True, slots=True)
class Method:
    name: str
    sender: Direction
    kind: Kind
    eras: frozenset[Era]
    capability: Capability | None = None  # the server capability that declares it
    name_param: str | None = None  # the params member mirrored in `Mcp-Name` (modern HTTP)
    mrtr: bool = False  # a result may ask for input; a retry carries `inputResponses`/`requestState`
    cacheable: bool = False  # a complete result may carry `ttlMs`/`cacheScope`
    safe: bool = False  # reads only: a client may retry it (after a lost connection) as is
    list_key: str | None = None  # the member of a list result that holds the page
    bridged: bool = False  # a 2025 session reaches it through the app's own (modern) handler
    change_kind: str | None = None  # a list-changed notification: the catalog part that changed
    input: bool = False  # modern era: a kind of MRTR input request, not a JSON-RPC request


# pragma: no mutate start
# (These builders run once, at import, before a mutation tool can switch a mutant on: what they build is
# held to the official schema by tests/protocol/test_methods.py instead.)
def _client(name: str, eras: frozenset[Era] = BOTH, **facts: Any) -> Method:
    return Method(name, "client", "request", eras, **facts)


def _server_note(name: str, eras: frozenset[Era] = BOTH, **facts: Any) -> Method:
    return Method(name, "server", "notification", eras, **facts)
# pragma: no mutate end


_ALL = (
    # client -> server requests
    _client("server/discover", MODERN, cacheable=True, safe=True),
    _client("initialize", LEGACY),
    _client("ping", LEGACY),
    _client("tools/list", capability="tools", cacheable=True, safe=True, list_key="tools", bridged=True),
    _client("tools/call", capability="tools", name_param="name", mrtr=True, bridged=True),
    _client("prompts/list", capability="prompts", cacheable=True, safe=True, list_key="prompts", bridged=True),
    _client("prompts/get", capability="prompts", name_param="name", mrtr=True, safe=True, bridged=True),
    _client("resources/list", capability="resources", cacheable=True, safe=True, list_key="resources",
            bridged=True),
    _client("resources/templates/list", capability="resources", cacheable=True, safe=True,
            list_key="resourceTemplates", bridged=True),
    _client("resources/read", capability="resources", name_param="uri", mrtr=True, cacheable=True, safe=True,
            bridged=True),
    _client("resources/subscribe", LEGACY, capability="resources"),
    _client("resources/unsubscribe", LEGACY, capability="resources"),
    _client("completion/complete", capability="completions", safe=True, bridged=True),
    _client("logging/setLevel", LEGACY, capability="logging"),
    _client("subscriptions/listen", MODERN),
    _client("tasks/get", MODERN, capability="tasks", name_param="taskId"),
    _client("tasks/update", MODERN, capability="tasks", name_param="taskId"),
    _client("tasks/cancel", MODERN, capability="tasks", name_param="taskId"),
    # client -> server notifications
    Method("notifications/cancelled", "client", "notification", BOTH),
    Method("notifications/initialized", "client", "notification", LEGACY),
    Method("notifications/roots/list_changed", "client", "notification", LEGACY),
    # server -> client requests (2025: JSON-RPC requests in a session; 2026: MRTR input request kinds)
    Method("sampling/createMessage", "server", "request", BOTH, input=True),
    Method("elicitation/create", "server", "request", BOTH, input=True),
    Method("roots/list", "server", "request", BOTH, input=True),
    Method("ping", "server", "request", LEGACY),
    # server -> client notifications
    _server_note("notifications/progress"),
    _server_note("notifications/cancelled", MODERN),  # on stdio, only to end a subscriptions/listen stream
    _server_note("notifications/message", capability="logging"),
    _server_note("notifications/tools/list_changed", capability="tools", change_kind="tools"),
    _server_note("notifications/prompts/list_changed", capability="prompts", change_kind="prompts"),
    _server_note("notifications/resources/list_changed", capability="resources", change_kind="resources"),
    _server_note("notifications/resources/updated", capability="resources"),
    _server_note("notifications/subscriptions/acknowledged", MODERN),
    _server_note("notifications/tasks", MODERN, capability="tasks"),
)

# What a client sends, by name (`ping` is the one name both sides send: the client's entry is here).
CLIENT: dict[str, Method] = {m.name: m for m in _ALL if m.sender == "client"}
# What a server sends, by name.
SERVER: dict[str, Method] = {m.name: m for m in _ALL if m.sender == "server"}


def _names(methods: Iterable[Method]) -> frozenset[str]:  # pragma: no mutate (import time, as above)
    return frozenset(m.name for m in methods)  # pragma: no mutate


# --- the derived tables the rest of the package reads --------------------------------------------
MRTR_METHODS = _names(m for m in CLIENT.values() if m.mrtr)
CACHEABLE_METHODS = _names(m for m in CLIENT.values() if m.cacheable)
SAFE_METHODS = _names(m for m in CLIENT.values() if m.safe)
NAME_PARAM: dict[str, str] = {m.name: m.name_param for m in CLIENT.values() if m.name_param is not None}
LIST_KEYS: dict[str, str] = {m.name: m.list_key for m in CLIENT.values() if m.list_key is not None}
BRIDGED_METHODS = _names(m for m in CLIENT.values() if m.bridged)
# change kind ("tools", "prompts", "resources") -> its list-changed notification
LIST_CHANGED: dict[str, str] = {m.change_kind: m.name for m in SERVER.values() if m.change_kind is not None}
# what a 2025 client is told of outside any request: list changes and resource updates
SESSION_NOTIFICATIONS = frozenset({*LIST_CHANGED.values(), "notifications/resources/updated"})
# the modern requests `App` answers itself when their capability is declared (extension methods aside)
APP_METHODS = _names(m for m in CLIENT.values() if m.kind == "request" and "modern" in m.eras
                     and m.capability not in ("tasks",))


__all__ = [
    "APP_METHODS",
    "BRIDGED_METHODS",
    "CACHEABLE_METHODS",
    "CLIENT",
    "LIST_CHANGED",
    "LIST_KEYS",
    "MRTR_METHODS",
    "NAME_PARAM",
    "SAFE_METHODS",
    "SERVER",
    "SESSION_NOTIFICATIONS",
    "Method",
]
