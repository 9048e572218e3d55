"""What every channel is: `Channel` (one per server) and `Exchange` (one request's messages)."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any, Protocol

log = logging.getLogger("mcp_stateless.client")

Message = dict[str, Any]
Unsolicited = Callable[[Message], None]
Restarted = Callable[[], None]


class Exchange(Protocol):
    """Messages of one request; iterate, then (or instead) `aclose()`. `status`, `headers` and `session_id`
    describe the HTTP response (200 / empty / None off HTTP)."""

    @property
    def status(self) -> int: ...

    @property
    def session_id(self) -> str | None: ...

    def __aiter__(self) -> AsyncIterator[Message]: ...

    async def aclose(self) -> None: ...


class Channel(Protocol):
    """How a session reaches its server: Streamable HTTP, a stdio subprocess, an in-memory endpoint.

    `headers` given to `exchange`/`send` are the HTTP headers mirroring the body; channels without HTTP
    ignore them, and say so with `mirrors_headers = False` (then nothing depends on `x-mcp-header`).
    """

    @property
    def kind(self) -> str: ...

    @property
    def key(self) -> str:
        """What identifies the server (e.g. for an era cache): endpoint URL, command line, object."""
        ...

    @property
    def mirrors_headers(self) -> bool: ...

    async def start(self) -> None:
        """Make the server reachable (spawn / restart a process); idempotent."""
        ...

    def watch(self, on_unsolicited: Unsolicited | None, on_restart: Restarted | None) -> None:
        """Where messages that belong to no exchange go, and whom to tell when the server was restarted."""
        ...

    async def exchange(
        self, message: Message, headers: Mapping[str, str] | None = None, *, timeout: float | None = -1.0
    ) -> Exchange: ...

    async def send(self, message: Message, headers: Mapping[str, str] | None = None) -> int:
        """Deliver a notification or a response; the HTTP status (202 off HTTP)."""
        ...

    async def aclose(self) -> None: ...


# ----------------------------------------------------------------------------------------------- HTTP
