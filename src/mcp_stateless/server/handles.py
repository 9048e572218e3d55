"""Application handles: explicit, scoped references to state that any instance can resolve.

Declare a kind of handle by subclassing `Handle`, then use the class as a tool parameter's type::

    class Import(Handle, prefix="imp", ttl=900, sliding=True, noun="import", issued_by="begin_import"):
        \"\"\"An import in progress.\"\"\"

    @app.tool()
    async def begin_import(ctx: Context) -> dict[str, str]:
        imp = await Import.mint(ctx, {"files": []})
        return {"importHandle": imp.id}

    @app.tool()
    async def add_file(importHandle: Import, uri: str) -> dict[str, int]:
        data = await importHandle.update(lambda d: d["files"].append(uri))
        return {"files": len(data["files"])}

The parameter stays a string in the tool's input schema (with the handle's pattern and lifetime in its
description); the framework resolves it before the handler runs, on every call: the record must exist,
belong to the calling principal and to this kind, not be ended and not be expired. Otherwise the call
ends with an `isError` result the model can act on (another principal's handle reads exactly like a
handle that does not exist). A handle is a reference, never proof of identity: the principal always
comes from the request. Handles carry 192 bits of randomness; stores only keep their SHA-256 digest.

`update` and `end` are compare-and-set loops on the record's version, so concurrent calls on any
instances never lose an update, and only one `end` (e.g. a commit) ever succeeds.
"""

from __future__ import annotations

import asyncio
import copy
import datetime
import hashlib
import random
import re
import secrets
import time
from collections.abc import Callable
from typing import Annotated, Any, ClassVar, Self

import pydantic

from ..state import DEFAULT_RETENTION_S, HandleRecord, HandleStore
from .context import Context
from .results import ToolError

_PREFIX = re.compile(r"^[a-z][a-z0-9]{0,15}$")
_TOKEN_BYTES = 24  # 192 bits
_TOKEN_CHARS = 32  # base64url length of 24 bytes


class HandleError(ToolError):
    """A handle cannot be used: becomes an `isError` result whose text says what to do."""


class HandleUnknown(HandleError):
    """No such handle for this principal (also: another principal's handle, a forged one)."""


class HandleExpired(HandleError):
    pass


class HandleEnded(HandleError):
    """The handle was ended (committed, revoked) and cannot be used again."""


def _duration(seconds: float) -> str:
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds >= size and seconds % size == 0:
            n = int(seconds // size)
            return f"{n} {unit}{'s' if n != 1 else ''}"
    n_s = f"{seconds:g}"
    return f"{n_s} second{'s' if n_s != '1' else ''}"


def _iso(t: float) -> str:
    return datetime.datetime.fromtimestamp(t, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _a(noun: str) -> str:
    return f"{'an' if noun[:1].lower() in 'aeiou' else 'a'} {noun}"


def digest(handle_id: str) -> str:
    """The storage key of a handle: stores never hold the handle itself."""
    return hashlib.sha256(handle_id.encode("utf-8")).hexdigest()


def _store(ctx: Context) -> HandleStore:
    if ctx.handles is None:
        raise RuntimeError("this context has no handle store (handles need a Context built by an App)")
    return ctx.handles


class Handle:
    """Base class of application handles; subclass it with ``prefix=``, ``ttl=`` (seconds, required),
    ``sliding=`` (expiry moves with each use; default fixed from creation), ``noun=`` (how errors
    name it) and ``issued_by=`` (the tool that mints one, named in errors and the schema)."""

    prefix: ClassVar[str] = ""
    ttl: ClassVar[float] = 0.0
    sliding: ClassVar[bool] = False
    noun: ClassVar[str] = "handle"
    issued_by: ClassVar[str | None] = None
    retention: ClassVar[float] = DEFAULT_RETENTION_S
    max_attempts: ClassVar[int] = 100

    __slots__ = ("_store", "created_at", "data", "expires_at", "id", "key", "principal", "version")

    def __init_subclass__(
        cls,
        *,
        prefix: str | None = None,
        ttl: float | None = None,
        sliding: bool | None = None,
        noun: str | None = None,
        issued_by: str | None = None,
        retention: float | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init_subclass__(**kwargs)
        if prefix is not None:
            if not _PREFIX.match(prefix):
                raise ValueError(f"handle prefix {prefix!r} must be 1-16 of [a-z0-9], starting with a letter")
            cls.prefix = prefix
        if ttl is not None:
            if ttl <= 0:
                raise ValueError("a handle's ttl must be a positive number of seconds")
            cls.ttl = float(ttl)
        if sliding is not None:
            cls.sliding = sliding
        if noun is not None:
            cls.noun = noun
        elif "noun" not in cls.__dict__ and prefix is not None:
            cls.noun = cls.__name__.lower()
        if issued_by is not None:
            cls.issued_by = issued_by
        if retention is not None:
            cls.retention = float(retention)
        if not cls.prefix or cls.ttl <= 0:
            raise TypeError(f"{cls.__name__}: a handle type needs prefix= and ttl= (seconds)")

    def __init__(self, record: HandleRecord, handle_id: str, store: HandleStore) -> None:
        self.id = handle_id
        self.key = record.key
        self.principal = record.principal
        self.data = record.data
        self.version = record.version
        self.created_at = record.created_at
        self.expires_at = record.expires_at
        self._store = store

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.id[: len(self.prefix) + 5]}…, v{self.version})"

    # ------------------------------------------------------------------ describing
    @classmethod
    def lifetime(cls) -> str:
        """The expiry rule in words, for tool descriptions."""
        if cls.sliding:
            return f"expires {_duration(cls.ttl)} after its last use"
        return f"expires {_duration(cls.ttl)} after it is created"

    @classmethod
    def pattern(cls) -> str:
        return f"^{cls.prefix}_[A-Za-z0-9_-]{{{_TOKEN_CHARS}}}$"

    @classmethod
    def _hint(cls) -> str:
        if cls.issued_by:
            return f" Call {cls.issued_by} to get a new one."
        return ""

    @classmethod
    def __mcp_argument__(cls) -> Any:
        """How the framework declares this parameter in the input schema: a string argument."""
        where = f", as returned by {cls.issued_by}" if cls.issued_by else ""
        doc = f"{_a(cls.noun).capitalize()} handle ({cls.prefix}_…){where}; it {cls.lifetime()}."
        return Annotated[str, pydantic.Field(pattern=cls.pattern(), description=doc)]

    # ------------------------------------------------------------------ lifecycle
    @classmethod
    async def mint(cls, ctx: Context, data: dict[str, Any] | None = None) -> Self:
        """Create a new handle owned by the request's principal, with `data` (JSON) behind it."""
        store = _store(ctx)
        now = time.time()
        body = dict(data or {})
        for _ in range(3):
            handle_id = f"{cls.prefix}_{secrets.token_urlsafe(_TOKEN_BYTES)}"
            exp = now + cls.ttl
            rec = HandleRecord(digest(handle_id), ctx.principal.id, cls.prefix, body, 1, now, exp, exp + cls.retention)
            if await store.create(rec):
                return cls(rec, handle_id, store)
        raise RuntimeError("could not mint a unique handle")  # pragma: no cover - 192 random bits

    @classmethod
    async def resolve(cls, handle_id: str, ctx: Context) -> Self:
        """The live handle `handle_id` of this request's principal, or a `HandleError`."""
        store = _store(ctx)
        rec = await cls._load(store, handle_id, ctx.principal.id)
        inst = cls(rec, handle_id, store)
        if cls.sliding:
            now = time.time()
            if rec.expires_at - now < cls.ttl * 0.9:
                inst.expires_at = now + cls.ttl
                await store.touch(rec.key, inst.expires_at, inst.expires_at + cls.retention)
        return inst

    @classmethod
    async def _load(cls, store: HandleStore, handle_id: str, principal: str) -> HandleRecord:
        if not isinstance(handle_id, str) or not re.match(cls.pattern(), handle_id):
            raise HandleUnknown(
                f"Unknown {cls.noun} handle {str(handle_id)[:80]!r}: it is not a {cls.prefix}_… handle "
                f"issued by this server.{cls._hint()}")
        rec = await store.get(digest(handle_id))
        if rec is None or rec.principal != principal or rec.kind != cls.prefix:
            raise HandleUnknown(f"Unknown {cls.noun} handle {handle_id!r}: no such {cls.noun} exists "
                                f"(or it was removed).{cls._hint()}")
        if rec.ended:
            raise HandleEnded(f"The {cls.noun} handle {handle_id!r} was already ended (committed or revoked) "
                              f"and cannot be used again.{cls._hint()}")
        if rec.expires_at <= time.time():
            raise HandleExpired(f"The {cls.noun} handle {handle_id!r} expired at {_iso(rec.expires_at)} "
                                f"({_a(cls.noun)} handle {cls.lifetime()}).{cls._hint()}")
        return rec

    async def refresh(self) -> dict[str, Any]:
        """Re-read the record (raises `HandleError` if it ended or expired meanwhile)."""
        rec = await self._load(self._store, self.id, self.principal)
        self.data, self.version, self.expires_at = rec.data, rec.version, rec.expires_at
        return self.data

    def _next_expiry(self, now: float) -> float:
        return max(self.expires_at, now + self.ttl) if self.sliding else self.expires_at

    async def _cas(self, fn: Callable[[dict[str, Any]], dict[str, Any] | None] | None, end: bool) -> dict[str, Any]:
        for attempt in range(self.max_attempts):
            new = copy.deepcopy(self.data)
            if fn is not None:
                out = fn(new)
                if out is not None:
                    new = out
            now = time.time()
            exp = self._next_expiry(now)
            purge = now + self.retention if end else exp + self.retention
            if await self._store.swap(self.key, self.version, new, exp, purge, end):
                self.data, self.version, self.expires_at = new, self.version + 1, exp
                return new
            await self.refresh()  # someone else changed it: start again from their version
            await asyncio.sleep(random.uniform(0, 0.002 * min(attempt + 1, 10)))
        raise HandleError(f"The {self.noun} handle {self.id!r} is being changed by too many calls at once; "
                          "retry this call.")

    async def update(self, fn: Callable[[dict[str, Any]], dict[str, Any] | None]) -> dict[str, Any]:
        """Apply `fn` to (a copy of) the data atomically and return the stored result. `fn` may mutate
        its argument or return a new dict; it runs again on the latest data if another call won the
        race, so it must have no side effects of its own. Raise `ToolError` in it to refuse."""
        return await self._cas(fn, end=False)

    async def end(self, fn: Callable[[dict[str, Any]], dict[str, Any] | None] | None = None) -> dict[str, Any]:
        """End the handle atomically (e.g. commit) and return its final data. Exactly one concurrent
        `end` succeeds; every later use gets an "already ended" error."""
        return await self._cas(fn, end=True)

    async def revoke(self) -> None:
        """End the handle without changing its data."""
        await self._cas(None, end=True)


async def resolve_arguments(injected: dict[str, type], ctx: Context, kwargs: dict[str, Any]) -> None:
    """Turn the string value of every handle-typed parameter into its resolved handle."""
    for name, typ in injected.items():
        if issubclass(typ, Handle) and kwargs.get(name) is not None:
            kwargs[name] = await typ.resolve(kwargs[name], ctx)
