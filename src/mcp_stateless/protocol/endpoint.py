"""The seam between transports and whatever answers requests.

A transport (HTTP, stdio, the client's in-memory channel) runs the envelope ladder, authenticates the
caller, and hands each validated `Request` to an `Endpoint` together with a `Call`: everything the
endpoint may know about *this* call and nothing about earlier ones. The endpoint answers with a `Reply`
(the JSON-RPC response plus its error code, so no transport re-reads the message), or, for
`subscriptions/listen`, with a stream of typed `ListenItem`s. `App` is one endpoint; the 2025 branch and
a bridge in front of legacy servers are others.
"""

from __future__ import annotations

import enum
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

from .envelope import MethodTable, Request, RequestId
from .errors import InsufficientScope, McpError, error_response
from .principal import ANONYMOUS, AnonymousAuthenticator, Authenticator, Principal, TransportKind


class Outbox(Protocol):
    """Where request-scoped notifications go (the request's SSE stream, stdout, a memory queue).
    Never blocks."""

    def emit(self, message: dict[str, Any]) -> None: ...


class Call(NamedTuple):
    """Per-call context a transport passes with each request. (perf: a named tuple, immutable like a
    frozen dataclass but made in a third of the time; one is made per request.)"""

    principal: Principal = ANONYMOUS
    transport: TransportKind = "memory"
    outbox: Outbox | None = None
    headers: Mapping[str, str] | None = None  # HTTP request headers (lower-cased); None off HTTP
    can_send_request: bool = False  # server->client requests possible on this call (legacy sessions only)


class Reply(NamedTuple):
    """One JSON-RPC response message. `error_code` is None for a result; `scopes` is set when the
    refusal is `InsufficientScope` (HTTP answers 403 with a step-up challenge). (perf: a named tuple,
    like `Call`.)"""

    message: dict[str, Any]
    error_code: int | None = None
    scopes: frozenset[str] | None = None

    @classmethod
    def result(cls, id_: RequestId, result: dict[str, Any]) -> Reply:
        return cls({"jsonrpc": "2.0", "id": id_, "result": result})

    @classmethod
    def error(cls, id_: RequestId | None, err: McpError) -> Reply:
        return cls(error_response(id_, err), err.code,
                   err.scopes if isinstance(err, InsufficientScope) else None)


@dataclass(frozen=True, slots=True)
class ListenEvent:
    """A notification on a listen stream (the acknowledgement included)."""

    message: dict[str, Any]


@dataclass(frozen=True, slots=True)
class KeepAlive:
    """Nothing happened for a while (HTTP writes an SSE comment; stdio writes nothing)."""


@dataclass(frozen=True, slots=True)
class ListenEnd:
    """The listen request's final response; the stream ends after it."""

    message: dict[str, Any]


KEEPALIVE = KeepAlive()

ListenItem = ListenEvent | KeepAlive | ListenEnd


class Endpoint(Protocol):
    """What a transport needs from the thing that answers requests."""

    @property
    def table(self) -> MethodTable: ...

    @property
    def supported_versions(self) -> tuple[str, ...]: ...

    async def startup(self) -> None:
        """Before the first request; paired with one `aclose()` by each transport or client."""
        ...

    async def drain(self) -> None:
        """Shutdown begins: end listen streams with their final result; requests in flight go on."""
        ...

    async def aclose(self) -> None:
        """After the last request of the pairing `startup()` (a transport drains first)."""
        ...

    async def handle(self, req: Request, call: Call) -> Reply: ...

    # A generator, not any iterator: a transport whose client went away must `aclose()` it to release
    # the subscription behind it at once.
    def listen(self, req: Request, call: Call) -> AsyncGenerator[ListenItem, None]: ...


Handler = Callable[[Request, Call], Awaitable[Reply]]
Lister = Callable[[Request, Call], AsyncGenerator[ListenItem, None]]


class RequestMiddleware(Protocol):
    """Wraps what an endpoint answers, for every transport at once: `handle` gets each request with
    the rest of the chain as `call_next`, `listen` each listen stream. Metrics and tracing are
    middleware (`mcp_stateless.observability`); so is anything an application wants around every call.
    A middleware that has nothing to do for listen streams returns ``call_next(req, call)``."""

    async def handle(self, req: Request, call: Call, call_next: Handler) -> Reply: ...

    def listen(self, req: Request, call: Call, call_next: Lister) -> AsyncGenerator[ListenItem, None]: ...


@dataclass(frozen=True, slots=True)
class SseEvent:
    """One message on a legacy SSE stream; `id` is its event id (resumption), None for none. A `message`
    of None is a priming event (an id and empty data, so that the client can resume from it); `retry`
    tells the client how many milliseconds to wait before reconnecting."""

    message: dict[str, Any] | None
    id: str | None = None
    retry: int | None = None


LegacyItem = SseEvent | KeepAlive


class LegacyOutcome(enum.Enum):
    """What became of one 2025-era exchange, in the era's own terms. The legacy branch says which; each
    transport says it its own way: HTTP with a status (`transports/http/legacy.py`), stdio and the
    2024-11-05 stream by writing the reply's `message` alone."""

    OK = "ok"  # answered: a JSON-RPC response (a result, or a live session's error), a stream, or nothing (DELETE)
    ACCEPTED = "accepted"  # a notification or a client's response was taken; there is nothing to answer
    BAD_REQUEST = "bad_request"  # malformed, or not fit for this session (no session id, another version, ...)
    INSUFFICIENT_SCOPE = "insufficient_scope"  # the caller lacks `scopes` (answered with a step-up challenge)
    UNKNOWN_SESSION = "unknown_session"  # forged, expired, another principal's or ended: initialize again
    NOT_ACCEPTABLE = "not_acceptable"  # a stream was asked for by a client that cannot take one
    TOO_MANY = "too_many"  # a bound was reached (calls running, sessions open): retry after `retry_after_s`
    FAILED = "failed"  # the server failed (e.g. its state store is unreachable)


@dataclass(frozen=True, slots=True)
class LegacyReply:
    """The legacy branch's reply to one 2025-era exchange: its `kind`, and a JSON-RPC `message` (or none,
    e.g. for a notification taken), or a `stream` of items instead. A transport writes it and `aclose()`s
    the stream when the client goes away. `session_id`: the session `initialize` opened; `scopes`: what
    an `INSUFFICIENT_SCOPE` caller lacks; `retry_after_s`: when a `TOO_MANY` caller may try again."""

    kind: LegacyOutcome
    message: dict[str, Any] | None = None
    stream: AsyncGenerator[LegacyItem, None] | None = None
    session_id: str | None = None
    scopes: frozenset[str] | None = None
    retry_after_s: int | None = None


@dataclass(frozen=True, slots=True)
class LegacyCounters:
    """The 2025 era's HTTP exchanges so far, as `(kind, HTTP status, count)` sorted by kind and status,
    counted by the transport that answered them (`LegacyEndpoint.count`). Kinds: `initialize`, `request`,
    `notification`, `response`, `get`, `delete`, `sse` (2024-11-05 streams opened), `invalid`. A stdio
    session's exchanges are not counted (one process is one session)."""

    exchanges: tuple[tuple[str, int, int], ...] = ()

    def total(self, kind: str | None = None) -> int:
        """How many exchanges (of `kind`, when given)."""
        return sum(n for k, _status, n in self.exchanges if kind is None or k == kind)


class LegacyEndpoint(Protocol):
    """The second seam: what a transport hands a 2025-era exchange to (`protocol.legacy.era_of` picks
    the era). Kept apart from `Endpoint` so that the modern path never reaches legacy code."""

    versions: tuple[str, ...]  # the 2025 revisions it negotiates on Streamable HTTP, newest first

    async def exchange(self, http_method: str, message: Any, headers: Mapping[str, str],
                       principal: Principal, can_sse: bool) -> LegacyReply: ...

    async def sse_open(self, principal: Principal) -> tuple[str, AsyncGenerator[LegacyItem, None]]:
        """A 2024-11-05 HTTP+SSE stream: the sealed channel reference its `endpoint` event names, and
        its messages (subscribed already)."""
        ...

    async def sse_post(self, channel: str, message: Any, headers: Mapping[str, str],
                       principal: Principal) -> LegacyReply:
        """A message POSTed to a 2024-11-05 channel (on any instance): accepted, its answer on the stream."""
        ...

    def count(self, kind: str, status: int) -> None:
        """Count one exchange of `kind` that a transport answered with `status` (the transport picks
        statuses, so it counts; the branch keeps the counters, so the exporter reads one place)."""
        ...

    def counter_snapshot(self) -> LegacyCounters: ...

    def stdio_session(self, principal: Principal, write: Callable[[dict[str, Any]], None]) -> StdioSession: ...


class StdioSession(Protocol):
    """One legacy session over stdio (the process's first message picked the era): every message read
    goes to `receive`; what the server sends goes through the `write` it was made with."""

    def receive(self, message: Any) -> None:
        """Take one decoded message; never blocks (requests run concurrently, answered as they finish)."""
        ...

    async def aclose(self) -> None: ...


def authenticator_for(endpoint: Endpoint, given: Authenticator | None = None) -> Authenticator:
    """The authenticator a transport applies: the one it was given, else the one the endpoint's owner
    configured on it as an ``authenticator`` attribute (`App(principal=…)` / `App(authenticator=…)` do),
    else everyone is anonymous. The attribute is optional so that an endpoint without an identity model
    (a bridge, a test double) needs nothing, and so that serving an app anywhere never silently drops
    the identity rules its author wrote."""
    if given is not None:
        return given
    own: Authenticator | None = getattr(endpoint, "authenticator", None)
    return own if own is not None else AnonymousAuthenticator()
