"""A 2025 session's life: `initialize` (the version negotiated, the session id sealed, its record made
within the principal's bound) and its end (DELETE, or its 2024-11-05 stream closing)."""

from __future__ import annotations

from typing import Any

from ...protocol import errors
from ...protocol.endpoint import LegacyOutcome, LegacyReply
from ...protocol.errors import McpError
from ...protocol.legacy import LegacyRequest, negotiate
from ...protocol.principal import ANONYMOUS, Principal
from . import replies
from .host import LegacyHost
from .parts import Parts
from .sessions import SealedSession

MAX_SESSION_ID = 4096  # characters


def legacy_capabilities(modern: dict[str, Any]) -> dict[str, Any]:
    """The server capabilities a 2025 client understands (modern extensions stay on the modern path)."""
    return {k: v for k, v in modern.items() if k != "extensions"}


class Lifecycle:
    """`versions`: what Streamable HTTP negotiates, newest first; `max_sessions_per_principal` as
    `LegacyServer` documents it."""

    def __init__(self, host: LegacyHost, parts: Parts, *, versions: tuple[str, ...],
                 max_sessions_per_principal: int | None) -> None:
        self.host = host
        self.parts = parts
        self.versions = versions
        self.max_sessions_per_principal = max_sessions_per_principal

    async def open(self, req: LegacyRequest, principal: Principal) -> LegacyReply:
        """`initialize` on Streamable HTTP: the answer, with the session made (or refused when its
        principal has too many open)."""
        reply, session = self.initialize(req, principal)
        refused = None if session is None else await self.start(session)
        if refused is not None:
            return replies.refused(LegacyOutcome.TOO_MANY, req.id, refused, retry_after_s=60)
        return reply

    def initialize(self, req: LegacyRequest, principal: Principal,
                   versions: tuple[str, ...] | None = None) -> tuple[LegacyReply, SealedSession | None]:
        """The answer to `initialize`, and the session it opened (None when refused); the caller makes the
        session's record (`start`, or `Sessions.create`) before the client may use it. `versions`: what
        this transport may negotiate (default: Streamable HTTP's)."""
        params = req.params
        requested = params.get("protocolVersion")
        caps = params.get("capabilities", {})
        info = params.get("clientInfo")
        if not isinstance(requested, str):
            why = "initialize needs params.protocolVersion (a string)"
            return replies.error(req.id, errors.invalid_params(why)), None
        if not isinstance(caps, dict):
            return replies.error(req.id, errors.invalid_params("params.capabilities must be an object")), None
        if info is not None and not isinstance(info, dict):
            return replies.error(req.id, errors.invalid_params("params.clientInfo must be an object")), None
        version = negotiate(requested, self.versions if versions is None else versions)
        sid, session = self.parts.sessions().issue(principal.id, version, caps, info)
        if len(sid) > MAX_SESSION_ID:  # the id travels on every request: keep headers within proxies' limits
            why = f"the declared capabilities are too large for a session id ({len(sid)} > {MAX_SESSION_ID})"
            return replies.error(req.id, errors.invalid_params(why)), None
        host = self.host
        result: dict[str, Any] = {
            "protocolVersion": version,
            "capabilities": legacy_capabilities(host.capabilities()),
            "serverInfo": dict(host.server_info),
        }
        if host.instructions:
            result["instructions"] = host.instructions
        reply = LegacyReply(LegacyOutcome.OK, {"jsonrpc": "2.0", "id": req.id, "result": result}, session_id=sid)
        return reply, session

    def _bounded(self, session: SealedSession) -> bool:
        # Anonymous callers share one principal: bounding it would bound every anonymous client together.
        return self.max_sessions_per_principal is not None and session.principal != ANONYMOUS.id

    async def start(self, session: SealedSession) -> McpError | None:
        """Make the record of a session just issued; or why not (its principal has too many open)."""
        limit = self.max_sessions_per_principal
        sessions = self.parts.sessions()
        if limit is not None and self._bounded(session) and not await sessions.admit(session, limit):
            return McpError(errors.INVALID_REQUEST, f"Too many sessions: this principal has {limit} open; end one "
                            "(DELETE) or wait for one to expire", {"limit": limit, "scope": "sessions"})
        await sessions.create(session)
        return None

    async def end(self, session: SealedSession) -> None:
        sessions = self.parts.sessions()
        await sessions.end(session)
        if self._bounded(session):
            await sessions.forget(session)
