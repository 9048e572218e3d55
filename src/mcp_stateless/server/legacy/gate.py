"""The session gate: which live 2025 session an exchange belongs to, or the reply refusing it.

Every exchange but `initialize` passes here: the `Mcp-Session-Id` must unseal for this principal, the
session's record must still exist (a DELETE, a closed 2024-11-05 stream or a lost record end it for
good) and an `MCP-Protocol-Version` header, when sent, must name the session's version.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

from ...protocol.endpoint import LegacyOutcome, LegacyReply
from ...protocol.jsonrpc import RequestId
from ...protocol.legacy import SESSION_HEADER, VERSION_HEADER, session_not_found, session_required
from ...protocol.principal import Principal
from . import replies
from .parts import Parts
from .sessions import SealedSession, SessionState


class Live(NamedTuple):
    """A session let through, with its state as read at the gate."""

    session: SealedSession
    state: SessionState


class SessionGate:
    def __init__(self, parts: Parts) -> None:
        self.parts = parts

    async def enter(self, headers: Mapping[str, str], principal: Principal,
                    request_id: RequestId | None) -> Live | LegacyReply:
        """The live session the headers name for `principal`; or the refusal (carrying `request_id`)."""
        sid = headers.get(SESSION_HEADER)
        if sid is None:
            return replies.refused(LegacyOutcome.BAD_REQUEST, request_id, session_required())
        sessions = self.parts.sessions()
        session = sessions.open(sid.strip(), principal.id)
        if session is None:
            return replies.refused(LegacyOutcome.UNKNOWN_SESSION, request_id, session_not_found())
        state = await sessions.state(session)
        if state is None:  # deleted, or its record lost: either way it cannot come back
            return replies.refused(LegacyOutcome.UNKNOWN_SESSION, request_id,
                                   session_not_found("Session not found: it was terminated"))
        hv = headers.get(VERSION_HEADER)
        if hv is not None and hv.strip() != session.version:
            return replies.bad_request(request_id, f"Bad Request: MCP-Protocol-Version {hv.strip()!r} is not "
                                       f"this session's {session.version!r}")
        return Live(session, state)
