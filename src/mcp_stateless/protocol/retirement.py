"""When a dual-era server stops serving the 2025 revisions, as a pure function of the current time.

Before the retirement date every legacy response carries `Deprecation` (RFC 9745: a structured-field
date, `@<epoch seconds>`) and `Sunset` (RFC 8594: an HTTP-date), so 2025 clients and the proxies in front
of them can see the end coming. From that date on, legacy exchanges are refused with HTTP 410 (Gone) and
the JSON-RPC error a modern server gives for a version it does not serve (`-32022`, `data.supported` naming
the modern versions), which a dual-era client recognises as "speak 2026-07-28 instead". Modern traffic is
never touched by this policy.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime
from email.utils import format_datetime
from typing import Any

from . import errors
from .envelope import Rejection, RequestId
from .errors import McpError

# The day the 2026-07-28 revision superseded the 2025 ones: the legacy era has been deprecated since.
MODERN_REVISION_DATE = datetime(2026, 7, 28, tzinfo=UTC)
RETIRED_STATUS = 410
ENV = "MCP_STATELESS_LEGACY_UNTIL"


@dataclass(frozen=True, slots=True)
class Retirement:
    """The legacy era ends at `sunset` (an aware datetime). `deprecated`: when it was deprecated (the
    `Deprecation` header); by default the modern revision's date, or `sunset` if that comes earlier, so
    the deprecation never postdates the sunset (RFC 9745 section 3)."""

    sunset: datetime
    deprecated: datetime | None = None

    def __post_init__(self) -> None:
        if self.sunset.tzinfo is None:
            raise ValueError("the retirement date needs a time zone (UTC is assumed only when parsing)")

    @property
    def deprecated_at(self) -> datetime:
        return self.deprecated if self.deprecated is not None else min(MODERN_REVISION_DATE, self.sunset)

    def retired(self, now: float) -> bool:
        """Whether legacy exchanges are refused at `now` (seconds since the epoch)."""
        return now >= self.sunset.timestamp()

    def headers(self) -> tuple[tuple[str, str], ...]:
        """`Deprecation` and `Sunset`, for every legacy response before the date."""
        return (("deprecation", f"@{int(self.deprecated_at.timestamp())}"),
                ("sunset", format_datetime(self.sunset.astimezone(UTC), usegmt=True)))

    def refusal(self, id_: RequestId | None, supported: tuple[str, ...], requested: str | None) -> Rejection:
        """The answer to a legacy exchange after the date."""
        data: dict[str, Any] = {"supported": list(supported), "requested": requested or "",
                                "retiredAt": self.sunset.astimezone(UTC).isoformat().replace("+00:00", "Z")}
        when = self.sunset.astimezone(UTC).strftime("%Y-%m-%d")
        return Rejection(RETIRED_STATUS, id_, McpError(
            errors.UNSUPPORTED_PROTOCOL_VERSION,
            f"Unsupported protocol version: this server stopped serving the 2025 revisions on {when}; "
            f"use {', '.join(supported)}", data))

    def text(self) -> str:
        """The date as configured, for the server card and `--help` output (ISO 8601, UTC)."""
        return self.sunset.astimezone(UTC).isoformat().replace("+00:00", "Z")


def parse(text: str) -> Retirement:
    """`2027-01-31` (midnight UTC) or an ISO 8601 date-time (`2027-01-31T12:00:00Z`; no zone means UTC).
    Raises ValueError with a message fit for a command line."""
    value = text.strip()
    try:
        if len(value) == 10:
            day = date.fromisoformat(value)
            return Retirement(datetime(day.year, day.month, day.day, tzinfo=UTC))
        moment = datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise ValueError(f"expected a date (2027-01-31) or an ISO 8601 date-time, got {text!r}") from None
    return Retirement(moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC))
