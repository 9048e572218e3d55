"""Write once, serve both eras: a legacy request answered by the same host handlers (`App`'s) as a modern one.

The session supplies what the modern `_meta` envelope would carry (version, client capabilities and
info, log level); the request's own `_meta.progressToken` becomes the progress token. A handler that
asks the client for input (`ctx.elicit`, `ctx.sample`, `ctx.list_roots`) ends its MRTR round with
`input_required` exactly as on the modern path; here each of its `inputRequests` goes out as a real
server->client request, and the handler is replayed with the answers and the sealed `requestState`,
as a modern client's retry would. The legacy client sees only its own era's messages.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ...protocol import errors, methods
from ...protocol.endpoint import Call, Outbox, Reply
from ...protocol.envelope import META_SERVER_INFO, Request
from ...protocol.errors import McpError
from ...protocol.legacy import LegacyRequest
from ...protocol.principal import Principal
from .host import LegacyHost
from .peer import Peer, ask_all
from .sessions import SealedSession, SessionState

# The App methods a legacy session reaches (discovery, listen and extension methods are modern only):
# the method table's `bridged` (protocol/methods.py).
BRIDGED_METHODS = methods.BRIDGED_METHODS
MAX_ROUNDS = 16  # a handler asking more often than this is looping
_MODERN_ONLY_FIELDS = ("resultType", "ttlMs", "cacheScope")
# A 2025 session that never sent `logging/setLevel` gets every level, as the official SDKs' servers send it
# (the 2025 spec makes setLevel a client's way to *narrow* logs). On the modern path no level means no logs;
# that per-request opt-in lives in `_meta`, which a 2025 request's level never comes from (see `run`).
UNSET_LOG_LEVEL = "debug"


def legacy_result(result: dict[str, Any]) -> dict[str, Any]:
    """A modern result as its 2025 equivalent: no result type, cache hints or per-result server info."""
    for name in _MODERN_ONLY_FIELDS:
        result.pop(name, None)
    meta = result.get("_meta")
    if isinstance(meta, dict):
        meta.pop(META_SERVER_INFO, None)
        if not meta:
            del result["_meta"]
    return result


async def run(host: LegacyHost, peer: Peer, session: SealedSession, state: SessionState, req: LegacyRequest,
              principal: Principal, outbox: Outbox | None, headers: Mapping[str, str] | None) -> Reply:
    """The complete JSON-RPC response to one bridged request (its `scopes` set when the caller lacks some:
    HTTP answers that with the step-up challenge, as on the modern path)."""
    params = dict(req.params)
    meta = params.pop("_meta", None)
    token = meta.get("progressToken") if isinstance(meta, dict) else None
    if token is not None and (not isinstance(token, str | int) or isinstance(token, bool)):
        return Reply.error(req.id, errors.invalid_params("progressToken must be a string or an integer"))
    call = Call(principal, "http" if headers is not None else "stdio", outbox, headers, can_send_request=True)
    emit: Callable[[dict[str, Any]], None] = outbox.emit if outbox is not None else _cannot_ask
    round_params = params
    # The session's level only: a 2026 `_meta` logLevel on a 2025 request was dropped with `_meta` above.
    level = state.log_level if state.log_level is not None else UNSET_LOG_LEVEL
    for _ in range(MAX_ROUNDS):
        modern = Request(req.id, req.method, round_params, session.version, session.capabilities,
                         session.client_info, level, token)
        reply = await host.handle(modern, call)
        result = reply.message.get("result")
        if not isinstance(result, dict) or result.get("resultType") != "input_required":
            if isinstance(result, dict):
                legacy_result(result)
            elif reply.error_code == errors.MISSING_CLIENT_CAPABILITY:
                return missing_capability(req, reply)
            return reply
        try:
            answers = await ask_all(peer, session, result.get("inputRequests") or {}, emit)
        except McpError as e:
            return Reply.error(req.id, e)
        round_params = {**params, "inputResponses": answers}
        if "requestState" in result:
            round_params["requestState"] = result["requestState"]
    return Reply.error(req.id, McpError(errors.INTERNAL_ERROR, f"{req.method} asked for input too often"))


def missing_capability(req: LegacyRequest, reply: Reply) -> Reply:
    """A -32021 refusal in 2025 terms: that code exists only from 2026-07-28 on, and agent frameworks abort
    a run on a JSON-RPC error where a tool error (`isError`) lets the model go on. So a tool call is answered
    with a tool error result naming the capability; any other request gets -32600 with the same message
    and data (the 2025 revisions have no closer code)."""
    error = reply.message.get("error")
    error = error if isinstance(error, dict) else {}
    message = str(error.get("message") or "This request needs a client capability")
    why = f"{message} (the client did not declare it at initialize)"
    if req.method == "tools/call":
        return Reply.result(req.id, {"content": [{"type": "text", "text": why}], "isError": True})
    data = error.get("data")
    return Reply.error(req.id, McpError(errors.INVALID_REQUEST, why, data if isinstance(data, dict) else None))


def _cannot_ask(message: dict[str, Any]) -> None:
    raise McpError(errors.INTERNAL_ERROR, "this call has no stream to send a request to the client on")
