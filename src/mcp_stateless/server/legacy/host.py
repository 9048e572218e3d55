"""`LegacyHost`: what the 2025 branch needs of the application it serves, and nothing more.

`LegacyServer` takes any object with these members (`App` has them all), so the branch imports no
part of the framework behind them and can serve 2025 clients in front of another host too.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

from ...protocol.endpoint import Call, Reply
from ...protocol.envelope import MethodTable, Request
from ...protocol.mrtr import KeyRing
from ...state import StateBundle
from ...state.events import EventBus


class Scoped(Protocol):
    """A registered resource, as far as a subscription cares: the scopes a caller needs to read it."""

    @property
    def scopes(self) -> frozenset[str]: ...


class ResourceLookup(Protocol):
    def find_resource(self, uri: str) -> tuple[Scoped, Any] | None:
        """The resource (or template) serving `uri`, with what matched; None when there is none."""
        ...


class LegacyHost(Protocol):
    """The application a `LegacyServer` serves."""

    @property
    def state(self) -> StateBundle | None:
        """The stores instances share; None: the branch keeps its own in this process's memory."""
        ...

    @property
    def catalog(self) -> ResourceLookup: ...

    @property
    def table(self) -> MethodTable:
        """The methods the host answers (a 2025 session reaches the bridged ones among them)."""
        ...

    @property
    def events(self) -> EventBus:
        """Change events (list changes, resource updates): what the GET streams carry."""
        ...

    @property
    def server_info(self) -> Mapping[str, Any]: ...

    @property
    def instructions(self) -> str | None: ...

    @property
    def listen_keepalive_s(self) -> float:
        """How long a quiet stream waits before a keep-alive (unless the branch was given its own)."""
        ...

    def capabilities(self) -> dict[str, Any]:
        """The modern server capabilities (`initialize` answers the 2025 part of them)."""
        ...

    def ensure_key_ring(self) -> KeyRing:
        """The key ring that seals session ids and 2024-11-05 channel references."""
        ...

    def tap_events(self, name: str, wrap: Callable[[EventBus], EventBus]) -> None:
        """Publish every change event through `wrap(bus)` (the branch logs them for resumable GET streams)."""
        ...

    async def handle(self, req: Request, call: Call) -> Reply:
        """Answer one bridged request, as a modern one."""
        ...
