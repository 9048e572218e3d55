"""The public namespace: exactly these names, each resolving to an object (httpx-style)."""

from __future__ import annotations

import mcp_stateless

PUBLIC = [
    "LATEST_PROTOCOL_VERSION",
    "App",
    "CacheHint",
    "ChangeEvent",
    "Client",
    "ClientError",
    "Context",
    "ElicitResult",
    "EventBus",
    "Handle",
    "HandleEnded",
    "HandleError",
    "HandleExpired",
    "HandleUnknown",
    "HttpTransport",
    "InputRequest",
    "KeyRing",
    "McpError",
    "MemoryEventBus",
    "OriginPolicy",
    "PromptArgument",
    "StateBundle",
    "StateUnavailable",
    "SyncClient",
    "TaskRuntime",
    "ToolError",
    "ToolResult",
    "__version__",
    "assistant",
    "content",
    "elicitation",
    "open_state",
    "roots",
    "sampling",
    "url_elicitation",
    "user",
]


def test_all_is_exactly_the_public_list() -> None:
    assert mcp_stateless.__all__ == PUBLIC
    # isort-style order (ruff RUF022): CONSTANTS first, then plain code-point order
    assert sorted(PUBLIC, key=lambda n: (not n.isupper(), n)) == PUBLIC


def test_every_public_name_resolves() -> None:
    for name in mcp_stateless.__all__:
        assert getattr(mcp_stateless, name) is not None, name


def test_public_classes_live_in_the_package() -> None:
    for name in mcp_stateless.__all__:
        obj = getattr(mcp_stateless, name)
        module = getattr(obj, "__module__", None) or getattr(obj, "__name__", "")
        if isinstance(obj, type) or callable(obj):
            assert module.startswith("mcp_stateless"), (name, module)


def test_version_values() -> None:
    assert mcp_stateless.LATEST_PROTOCOL_VERSION == "2026-07-28"
    assert isinstance(mcp_stateless.__version__, str) and mcp_stateless.__version__.count(".") == 2
