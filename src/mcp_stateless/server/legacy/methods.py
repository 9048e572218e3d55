"""One request of a live 2025 session: the era's own methods (`ping`, `logging/setLevel`,
`resources/subscribe` and `unsubscribe`, kept in the session's shared record) answered here, the
host's bridged methods handed to the call registry, anything else refused as not found."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from ...protocol import errors
from ...protocol.endpoint import LegacyOutcome, LegacyReply, Outbox, Reply
from ...protocol.envelope import LOG_LEVEL_RANK, LOG_LEVELS
from ...protocol.errors import InsufficientScope, McpError
from ...protocol.legacy import LegacyRequest
from ...protocol.principal import Principal
from . import bridge, replies
from .calls import CallRegistry
from .host import LegacyHost
from .parts import Parts
from .sessions import SealedSession, SessionGone, SessionState

MAX_SUBSCRIPTIONS = 1000  # per session: the shared record stays small
MAX_URI = 4096  # characters of a subscribed URI
# the URIs of one session's subscriptions together: each subscribe rewrites the whole record (and every GET
# stream event reads it), so its size, not only its count, is bounded
MAX_SUBSCRIBED_CHARS = 64 * 1024
_SUBSCRIPTION_METHODS = ("resources/subscribe", "resources/unsubscribe")


class Methods:
    def __init__(self, host: LegacyHost, parts: Parts, calls: CallRegistry) -> None:
        self.host = host
        self.parts = parts
        self.calls = calls

    async def request(self, req: LegacyRequest, session: SealedSession, state: SessionState, principal: Principal,
                      *, headers: Mapping[str, str] | None = None, can_sse: bool = False,
                      outbox: Outbox | None = None) -> LegacyReply:
        """`headers`: the HTTP request's (None off HTTP); `can_sse`: the client takes an SSE stream as the
        answer; `outbox`: where a call's notifications and server->client requests go when the transport
        has a channel of its own (stdio, a 2024-11-05 stream)."""
        method = req.method
        if method == "ping":
            return replies.result(req.id, {})
        if method == "logging/setLevel":
            return await self._set_level(req, session)
        if method in _SUBSCRIPTION_METHODS:
            return await self._subscription(req, session, principal)
        if method not in bridge.BRIDGED_METHODS or method not in self.host.table.methods:
            return replies.error(req.id, errors.method_not_found(method))
        return await self.calls.call(req, session, state, principal, headers, can_sse, outbox)

    async def _set_level(self, req: LegacyRequest, session: SealedSession) -> LegacyReply:
        level = req.params.get("level")
        if level not in LOG_LEVEL_RANK:
            return replies.error(req.id, errors.invalid_params(f"level must be one of {', '.join(LOG_LEVELS)}"))
        try:
            await self.parts.sessions().update(session, lambda s: setattr(s, "log_level", level))
        except SessionGone as e:
            return replies.refused(LegacyOutcome.UNKNOWN_SESSION, req.id, e)
        return replies.result(req.id, {})

    async def _subscription(self, req: LegacyRequest, session: SealedSession, principal: Principal) -> LegacyReply:
        method = req.method
        uri = req.params.get("uri")
        if not isinstance(uri, str):
            return replies.error(req.id, errors.invalid_params(f"{method} needs params.uri"))
        if len(uri) > MAX_URI:  # before any lookup: every update rewrites the session's record
            return replies.error(req.id, errors.invalid_params(f"params.uri is longer than {MAX_URI} characters"))
        subscribing = method == "resources/subscribe"
        found = self.host.catalog.find_resource(uri) if subscribing else None
        if found is not None and found[0].scopes and not principal.has_scopes(found[0].scopes):
            # the session's update notifications would time the changes of a resource it may not read
            return replies.answer(Reply.error(req.id, InsufficientScope(f"resource {uri}", found[0].scopes)))
        change = _subscribe(uri) if subscribing else _unsubscribe(uri)
        try:
            await self.parts.sessions().update(session, change)
        except SessionGone as e:
            return replies.refused(LegacyOutcome.UNKNOWN_SESSION, req.id, e)
        except McpError as e:
            return replies.error(req.id, e)
        return replies.result(req.id, {})


def _subscribe(uri: str) -> Callable[[SessionState], None]:
    def change(state: SessionState) -> None:
        if uri not in state.subscriptions:
            if len(state.subscriptions) >= MAX_SUBSCRIPTIONS:
                raise errors.invalid_params(f"a session may subscribe to at most {MAX_SUBSCRIPTIONS} resources")
            if sum(map(len, state.subscriptions)) + len(uri) > MAX_SUBSCRIBED_CHARS:
                raise errors.invalid_params(
                    f"a session's subscribed URIs may total at most {MAX_SUBSCRIBED_CHARS} characters")
            state.subscriptions.append(uri)

    return change


def _unsubscribe(uri: str) -> Callable[[SessionState], None]:
    def change(state: SessionState) -> None:
        if uri in state.subscriptions:
            state.subscriptions.remove(uri)

    return change
