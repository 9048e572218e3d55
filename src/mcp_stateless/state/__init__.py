"""Explicit, shared state: the record store and topic bus behind handles, tasks and change events.

One setting selects the engine, ``open_state(url)``:

``memory://``                          in-process only: tests and single-process use
``sqlite:///relative/state.db``        the embedded default: one machine, survives restarts (a relative
``sqlite:////abs/path/state.db``       path is resolved against the working directory when opened;
                                       ``?events=local`` keeps bus messages in the process)
``redis://host:6379/0``                shared by every instance on every machine (``rediss://`` for TLS;
                                       ``?timeout=2`` seconds, ``?prefix=mcp-stateless:`` key prefix)
``redis-cluster://h1:7000,h2:7001``    a Redis Cluster or Valkey cluster (seed nodes; ``?timeout``,
                                       ``?prefix``, ``?buckets=16`` due-set groups per namespace,
                                       ``?wait=N`` replicas to confirm each write, ``?wait_timeout=`` ms)
``postgresql://user@host:5432/db``     Postgres (the postgres extra; ``?schema=mcp_stateless``,
                                       ``?pool_min=1&pool_max=10`` connections, ``?timeout=5``,
                                       ``?sslmode=`` and other libpq parameters pass through)
"""

from __future__ import annotations

from urllib import parse as _url

from .base import (
    DEFAULT_RETENTION_S,
    Bus,
    RecordStore,
    StateBundle,
    StateUnavailable,
    TopicSubscription,
    Versioned,
    redact,
)
from .handles import HandleRecord, HandleStore
from .memory import MemoryRecords

STATE_ENV = "MCP_STATELESS_STATE"

_OWN_PARAMS = {
    "sqlite": frozenset({"timeout", "events", "poll"}),
    "redis": frozenset({"timeout", "prefix"}),
    "rediss": frozenset({"timeout", "prefix"}),
    "redis-cluster": frozenset({"timeout", "prefix", "buckets", "wait", "wait_timeout"}),
    "postgresql": frozenset({"timeout", "schema", "pool_min", "pool_max"}),
    "postgres": frozenset({"timeout", "schema", "pool_min", "pool_max"}),
}
_ACCEPTED = ("use memory://, sqlite:///path.db, redis://host:port/db, redis-cluster://host:port[,host:port…] "
             "or postgresql://user@host:port/db")


def open_state(url: str) -> StateBundle:
    """The `StateBundle` a state URL names. Nothing connects until first use."""
    parts = _url.urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme == "memory":
        from . import memory

        return memory.open_bundle(url)
    if scheme not in _OWN_PARAMS:
        raise ValueError(f"unsupported state URL {redact(url)!r}: {_ACCEPTED}")
    own = _OWN_PARAMS[scheme]
    pairs = _url.parse_qsl(parts.query, keep_blank_values=True)
    mine = {k: v for k, v in pairs if k in own}
    rest = [(k, v) for k, v in pairs if k not in own]
    for k in ("timeout", "poll"):
        if k in mine:
            try:
                if float(mine[k]) <= 0:
                    raise ValueError
            except ValueError:
                raise ValueError(f"invalid {k}={mine[k]!r} in state URL: a positive number of seconds") from None
    if scheme == "sqlite":
        from . import sqlite

        return sqlite.open_bundle(url, mine)
    clean = _url.urlunsplit((parts.scheme, parts.netloc, parts.path, _url.urlencode(rest), ""))
    if scheme in ("postgresql", "postgres"):
        try:
            from . import postgres
        except ImportError:  # pragma: no cover - depends on the installed extras
            raise ValueError(f"{scheme}:// state needs the postgres extra: "
                             "pip install 'mcp-stateless[postgres]'") from None
        return postgres.open_bundle(clean, mine)
    if scheme == "redis-cluster":
        try:
            from . import rediscluster
        except ImportError:  # pragma: no cover - depends on the installed extras
            raise ValueError("redis-cluster:// state needs the redis extra: "
                             "pip install 'mcp-stateless[redis]'") from None
        return rediscluster.open_bundle(clean, mine)
    try:
        from . import redisdb
    except ImportError:  # pragma: no cover - depends on the installed extras
        raise ValueError("redis:// state needs the redis extra: pip install 'mcp-stateless[redis]'") from None
    return redisdb.open_bundle(clean, mine)


__all__ = [
    "DEFAULT_RETENTION_S",
    "STATE_ENV",
    "Bus",
    "HandleRecord",
    "HandleStore",
    "MemoryRecords",
    "RecordStore",
    "StateBundle",
    "StateUnavailable",
    "TopicSubscription",
    "Versioned",
    "open_state",
    "redact",
]
