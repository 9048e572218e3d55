"""The 2025 branch's replies, built one way: each says what became of an exchange (`LegacyOutcome`),
never how a transport says it (HTTP statuses are chosen in `transports/http/legacy.py`)."""

from __future__ import annotations

from typing import Any

from ...protocol import errors
from ...protocol.endpoint import LegacyOutcome, LegacyReply, Reply
from ...protocol.envelope import Rejection
from ...protocol.errors import McpError, error_response
from ...protocol.jsonrpc import RequestId

OK = LegacyReply(LegacyOutcome.OK)  # answered with nothing (DELETE)
ACCEPTED = LegacyReply(LegacyOutcome.ACCEPTED)


def result(id_: RequestId, value: dict[str, Any]) -> LegacyReply:
    return LegacyReply(LegacyOutcome.OK, {"jsonrpc": "2.0", "id": id_, "result": value})


def error(id_: RequestId, err: McpError) -> LegacyReply:
    """A JSON-RPC error of a live session: answered as any response is (2025 clients take a refusal at
    the transport level for a transport failure)."""
    return LegacyReply(LegacyOutcome.OK, error_response(id_, err))


def answer(reply: Reply) -> LegacyReply:
    """A bridged call's response. Unlike every other error of a call, a refusal for missing scopes is
    its own outcome: the authorization spec asks for a step-up challenge, which 2025-11-25 clients act on."""
    if reply.scopes is not None:
        return LegacyReply(LegacyOutcome.INSUFFICIENT_SCOPE, reply.message, scopes=reply.scopes)
    return LegacyReply(LegacyOutcome.OK, reply.message)


def refused(kind: LegacyOutcome, id_: RequestId | None, err: McpError, *,
            retry_after_s: int | None = None) -> LegacyReply:
    return LegacyReply(kind, error_response(id_, err), retry_after_s=retry_after_s)


def bad_request(id_: RequestId | None, message: str) -> LegacyReply:
    return refused(LegacyOutcome.BAD_REQUEST, id_, McpError(errors.INVALID_REQUEST, message))


def failed(id_: RequestId | None, err: McpError) -> LegacyReply:
    """An exchange that raised `err` (e.g. the state store is unreachable): the server's failure when
    it is an internal error, else the request's."""
    kind = LegacyOutcome.FAILED if err.code == errors.INTERNAL_ERROR else LegacyOutcome.BAD_REQUEST
    return refused(kind, id_, err)


def malformed(rejection: Rejection) -> LegacyReply:
    """A message the 2025 ladder (`protocol.legacy.classify`) refused: it refuses only malformed ones."""
    return LegacyReply(LegacyOutcome.BAD_REQUEST, rejection.body())
