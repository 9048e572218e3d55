"""MRTR rounds: what a request continues from its sealed `requestState`, and the `input_required`
result that ends a round whose handler asked for something."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from ..protocol import errors
from ..protocol.endpoint import Call
from ..protocol.envelope import Request
from ..protocol.errors import McpError
from ..protocol.mrtr import MRTR_METHODS, KeyRing, StateContext, check_input_responses, seal, unseal
from ..state import HandleStore
from .context import Context, InputRequired
from .lifespan import LifespanRunner

log = logging.getLogger("mcp_stateless")


class Rounds:
    """Opens and closes MRTR rounds with one key ring (generated on first use when none is configured)."""

    def __init__(self, key_ring: KeyRing | None, ttl_s: float, lifespan: LifespanRunner | None = None) -> None:
        self.key_ring = key_ring
        self.ttl_s = ttl_s
        self.lifespan = lifespan

    def keys(self) -> KeyRing:
        if self.key_ring is None:
            self.key_ring = KeyRing.generate()
            log.warning(
                "no MRTR key configured: requestState is sealed with a per-process key, so an MRTR retry "
                "must reach this same process (set MCP_STATELESS_KEYS for more than one instance)"
            )
        return self.key_ring

    def open(self, req: Request, call: Call, handles: HandleStore) -> tuple[Context, StateContext | None]:
        """The handler's context, with the answers and state this round continues from. The
        `StateContext` is None for a method that cannot ask the client (no MRTR)."""
        ctx = Context(req, call.principal, call.outbox, handles, loop=asyncio.get_running_loop())
        if self.lifespan is not None:
            ctx.lifespan = self.lifespan.value
        if req.method not in MRTR_METHODS:
            return ctx, None
        ctx.mrtr_allowed = True
        params = req.params
        responses = check_input_responses(params.get("inputResponses"))
        sctx = StateContext.of(call.principal.id, req.method, params)  # perf: digest computed only if needed
        state = params.get("requestState")
        if state is not None:
            payload = unseal(self.keys(), sctx, state)
            if not isinstance(payload, dict):
                raise McpError(errors.INVALID_PARAMS, "requestState is not valid")
            ctx.answers.update(payload.get("a") or {})
            ctx.state.update(payload.get("s") or {})
        ctx.answers.update(responses)
        return ctx, sctx

    def input_required(self, ctx: Context, sctx: StateContext | None, exc: InputRequired) -> dict[str, Any]:
        """End this round asking for `exc.requests`, sealing what the next round continues from."""
        assert sctx is not None, "only MRTR methods get a context that can ask"
        payload = {"a": ctx.used_answers(), "s": ctx.state}
        return {
            "resultType": "input_required",
            "inputRequests": {k: r.to_wire() for k, r in exc.requests.items()},
            "requestState": seal(self.keys(), sctx, payload, self.ttl_s),
        }
