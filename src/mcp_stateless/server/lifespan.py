"""`App(lifespan=...)`: what an app opens once per process (a database pool, a model) and closes on shutdown.

The lifespan is an async context manager factory called with the app. Transports and the in-memory client
start the app (`App.startup`) and close it (`App.aclose`) in pairs; the lifespan is entered by the first
start and exited by the last close, so a process serving HTTP, stdio, or several `Client(app)` at once
enters it exactly once. What it yields is `ctx.lifespan` in every handler.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any, TypeAlias

if TYPE_CHECKING:
    from .app import App

Lifespan: TypeAlias = "Callable[[App], AbstractAsyncContextManager[Any]]"


class LifespanRunner:
    """Enters `factory(app)` on the first `start()` and exits it on the `stop()` that ends the last user."""

    __slots__ = ("_entered", "_factory", "_lock", "users", "value")

    def __init__(self, factory: Lifespan | None) -> None:
        self._factory = factory
        self._entered: AbstractAsyncContextManager[Any] | None = None
        # Made on first use and dropped on exit: a lock binds to the loop it is first awaited on, and an
        # app may be started again on another loop (one test after another).
        self._lock: asyncio.Lock | None = None
        self.users = 0
        self.value: Any = None

    @property
    def running(self) -> bool:
        return self._entered is not None

    async def start(self, app: App) -> None:
        """Count one more user; the first enters the lifespan (others wait until it has, so no request
        sees `ctx.lifespan` before it exists). If entering fails, the failure propagates and nobody counts."""
        self.users += 1
        if self._factory is None or self._entered is not None:
            return
        if self._lock is None:
            self._lock = asyncio.Lock()
        try:
            async with self._lock:
                if self._entered is None:
                    manager = self._factory(app)
                    self.value = await manager.__aenter__()
                    self._entered = manager
        except BaseException:
            self.users -= 1
            raise

    def release(self) -> bool:
        """Count one user less; True when that was the last one (the caller then closes everything)."""
        self.users = max(0, self.users - 1)
        return self.users == 0

    async def exit(self) -> None:
        """Exit the lifespan if it was entered (idempotent)."""
        manager, self._entered = self._entered, None
        self._lock = None
        if manager is not None:
            try:
                await manager.__aexit__(None, None, None)
            finally:
                self.value = None
