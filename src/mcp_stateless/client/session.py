"""What `Client` needs from a session, whichever era it speaks: `ModernSession` (2026-07-28, stateless:
every request self-contained) or `LegacySession` (2024-11-05 … 2025-11-25: initialize, then a session)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any, Literal, Protocol

from .events import ServerEvent

Era = Literal["modern", "legacy"]
Progress = Callable[[dict[str, Any]], Any]


class Session(Protocol):
    @property
    def era(self) -> Era: ...

    @property
    def version(self) -> str: ...

    @property
    def server_capabilities(self) -> dict[str, Any] | None: ...

    @property
    def server_info(self) -> dict[str, Any] | None: ...

    @property
    def instructions(self) -> str | None: ...

    @property
    def mirrors_tool_headers(self) -> bool:
        """True when tools' `x-mcp-header` annotations shape the requests (modern era over HTTP): the client
        then lists tools before the first tools/call and re-lists them after a header mismatch."""
        ...

    async def request(
        self,
        method: str,
        params: dict[str, Any],
        *,
        progress: Progress | None,
        timeout: float | None,
        meta: Mapping[str, Any] | None,
    ) -> dict[str, Any]:
        """One request to its complete result (MRTR rounds answered), or a task result for tools/call when
        the tasks extension is on. Raises `McpError` for an error response."""
        ...

    async def discover(self) -> dict[str, Any]:
        """A DiscoverResult: asked for (modern) or derived from the InitializeResult (legacy)."""
        ...

    def listen(self, flt: dict[str, Any]) -> AsyncIterator[ServerEvent]:
        """The acknowledgement, then the subscribed notifications as typed events."""
        ...

    async def aclose(self) -> None: ...


__all__ = ["Era", "Progress", "Session"]
