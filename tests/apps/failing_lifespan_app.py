"""An app whose lifespan cannot open what it needs: `serve` must say why and not start."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from mcp_stateless import App


@asynccontextmanager
async def lifespan(app: App) -> AsyncIterator[None]:
    raise ConnectionRefusedError("database at 127.0.0.1:5432 refused")
    yield


app = App("failing-lifespan", lifespan=lifespan)
