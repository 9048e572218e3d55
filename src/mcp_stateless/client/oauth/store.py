"""Where the OAuth client keeps what outlives one request: tokens per (issuer, resource), the client's
identity per issuer (a registration is only valid at the server that issued it), and which issuer and
resource a server URL was last found to use (so a new process sends its stored token at once).

A store is three async methods over JSON documents; `MemoryTokenStore` keeps them in the process,
`FileTokenStore` in one file readable by its owner only (the command line's store).
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

from ..errors import OAuthError
from .rules import ClientIdentity, Tokens


class TokenStore(Protocol):
    """Key → JSON document. Keys are short strings made by `Keys`; values are what `to_json` returns."""

    async def get(self, key: str) -> dict[str, Any] | None: ...

    async def set(self, key: str, value: dict[str, Any]) -> None: ...

    async def delete(self, key: str) -> None: ...


class Keys:
    """The key of each kind of record, in one place."""

    @staticmethod
    def tokens(issuer: str, resource: str) -> str:
        return f"tokens {issuer} {resource}"

    @staticmethod
    def client(issuer: str) -> str:
        return f"client {issuer}"

    @staticmethod
    def binding(server_url: str) -> str:
        return f"server {server_url}"


class Records:
    """Typed access to a `TokenStore`."""

    def __init__(self, store: TokenStore) -> None:
        self.store = store

    async def tokens(self, issuer: str, resource: str) -> Tokens | None:
        doc = await self.store.get(Keys.tokens(issuer, resource))
        return Tokens.from_json(doc) if doc else None

    async def save_tokens(self, issuer: str, resource: str, tokens: Tokens) -> None:
        await self.store.set(Keys.tokens(issuer, resource), tokens.to_json())

    async def forget_tokens(self, issuer: str, resource: str) -> None:
        await self.store.delete(Keys.tokens(issuer, resource))

    async def client(self, issuer: str) -> ClientIdentity | None:
        doc = await self.store.get(Keys.client(issuer))
        return ClientIdentity.from_json(doc) if doc else None

    async def save_client(self, issuer: str, identity: ClientIdentity) -> None:
        await self.store.set(Keys.client(issuer), identity.to_json())

    async def binding(self, server_url: str) -> tuple[str, str] | None:
        doc = await self.store.get(Keys.binding(server_url))
        if not doc or not isinstance(doc.get("issuer"), str) or not isinstance(doc.get("resource"), str):
            return None
        return doc["issuer"], doc["resource"]

    async def save_binding(self, server_url: str, issuer: str, resource: str) -> None:
        await self.store.set(Keys.binding(server_url), {"issuer": issuer, "resource": resource})


class MemoryTokenStore:
    """Records in this process only (the default)."""

    def __init__(self) -> None:
        self._data: dict[str, dict[str, Any]] = {}

    async def get(self, key: str) -> dict[str, Any] | None:
        doc = self._data.get(key)
        return dict(doc) if doc is not None else None

    async def set(self, key: str, value: dict[str, Any]) -> None:
        self._data[key] = dict(value)

    async def delete(self, key: str) -> None:
        self._data.pop(key, None)


def default_token_file() -> Path:
    """`$MCP_STATELESS_TOKEN_STORE`, else `$XDG_CONFIG_HOME/mcp-stateless/tokens.json` (~/.config/…)."""
    explicit = os.environ.get("MCP_STATELESS_TOKEN_STORE")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "mcp-stateless" / "tokens.json"


class FileTokenStore:
    """All records in one JSON file, mode 0600 in a 0700 directory, replaced atomically on every write (a
    crash leaves the old file or the new one, never half of one). Another process's writes are seen on the
    next read; writers (in any process) take turns on a lock file beside it, so two `login`s at once both
    keep their record."""

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self.path = Path(path) if path is not None else default_token_file()
        self._lock = asyncio.Lock()

    def _read(self) -> dict[str, dict[str, Any]]:
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return {}
        except OSError as e:
            raise OAuthError(f"cannot read the token store {self.path}: {e.strerror or e}") from None
        try:
            doc = json.loads(raw)
        except ValueError:
            raise OAuthError(f"the token store {self.path} is not JSON; remove it to start over") from None
        return doc if isinstance(doc, dict) else {}

    def _write(self, data: dict[str, dict[str, Any]]) -> None:
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".tokens-", dir=self.path.parent)
        try:
            os.fchmod(fd, 0o600)
            with os.fdopen(fd, "w") as f:
                json.dump(data, f, indent=1, sort_keys=True)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise

    async def get(self, key: str) -> dict[str, Any] | None:
        doc = self._read().get(key)
        return dict(doc) if isinstance(doc, dict) else None

    @contextlib.contextmanager
    def _exclusive(self) -> Iterator[None]:
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(self.path.with_name(self.path.name + ".lock"), os.O_CREAT | os.O_RDWR, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)  # held for one read-modify-write: milliseconds
            yield
        finally:
            os.close(fd)

    async def set(self, key: str, value: dict[str, Any]) -> None:
        async with self._lock:
            with self._exclusive():
                data = self._read()
                data[key] = dict(value)
                self._write(data)

    async def delete(self, key: str) -> None:
        async with self._lock:
            with self._exclusive():
                data = self._read()
                if data.pop(key, None) is not None:
                    self._write(data)


__all__ = ["FileTokenStore", "Keys", "MemoryTokenStore", "Records", "TokenStore", "default_token_file"]
