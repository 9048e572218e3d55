"""DNS-rebinding defence: `Host` and `Origin` checks, as a pure policy object."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from urllib.parse import urlsplit

LOOPBACK_HOSTS = frozenset({"localhost", "127.0.0.1", "[::1]", "::1"})


def _split_host(value: str) -> tuple[str, str | None]:
    """'host:port' -> ('host', 'port'); IPv6 literals keep their brackets."""
    value = value.strip().lower()
    if value.startswith("["):
        end = value.find("]")
        if end == -1:
            return value, None
        host, rest = value[: end + 1], value[end + 1 :]
        return host, rest[1:] if rest.startswith(":") else None
    host, sep, port = value.rpartition(":")
    if sep and port.isdigit() and host:
        return host, port
    return value, None


@dataclass(frozen=True, slots=True)
class OriginPolicy:
    """Allowed `Host` values (host or host:port; a bare host allows any port; '*' any Host) and `Origin`
    values ('*' any Origin).

    An absent Origin is allowed (non-browser clients). A present one is allowed when it is listed, or
    when its host is one of the *named* allowed hosts (same-host); '*' hosts never open Origins, so a
    rebinding browser (its Origin is the attacker's name) is refused on every bind unless Origins are
    opened explicitly. `enabled=False` turns both checks off (a proxy enforces them)."""

    allowed_hosts: frozenset[str] = field(default_factory=frozenset)
    allowed_origins: frozenset[str] = field(default_factory=frozenset)
    enabled: bool = True

    @classmethod
    def loopback(cls, extra_hosts: Iterable[str] = (), extra_origins: Iterable[str] = ()) -> OriginPolicy:
        return cls(LOOPBACK_HOSTS | {h.lower() for h in extra_hosts}, frozenset(o.lower() for o in extra_origins))

    @classmethod
    def public(cls, extra_origins: Iterable[str] = ()) -> OriginPolicy:
        """Any Host (a public bind cannot know its names); only the listed Origins."""
        return cls(frozenset({"*"}), frozenset(o.lower() for o in extra_origins))

    @classmethod
    def disabled(cls) -> OriginPolicy:
        return cls(enabled=False)

    def host_allowed(self, host: str | None) -> bool:
        if not self.enabled or "*" in self.allowed_hosts:
            return True
        if host is None:
            return False
        return self._named(host)

    def _named(self, host: str) -> bool:
        name, port = _split_host(host)
        return name in self.allowed_hosts or (port is not None and f"{name}:{port}" in self.allowed_hosts)

    def origin_allowed(self, origin: str | None) -> bool:
        if not self.enabled or origin is None:
            return True
        o = origin.strip().lower()
        if o in self.allowed_origins or "*" in self.allowed_origins:
            return True
        parts = urlsplit(o)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            return False
        return self._named(parts.netloc)

    def check(self, host: str | None, origin: str | None) -> str | None:
        """None when allowed, else the reason for a 403."""
        if not self.host_allowed(host):
            return "Host header is not allowed"
        if not self.origin_allowed(origin):
            return "Origin is not allowed"
        return None
