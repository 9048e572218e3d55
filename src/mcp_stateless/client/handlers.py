"""The host's answers to input requests (MRTR in the modern era, server→client requests in the legacy era).

The capabilities a client declares come from the handlers it was given, nothing else: an elicitation handler
declares `elicitation.form`, a URL handler `elicitation.url`, a sampling handler `sampling`, roots `roots`.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .errors import InvalidResult

# Answers one server->client request (elicitation, sampling): its params in, the result out.
Responder = Callable[[dict[str, Any]], Awaitable[Any] | Any]
Roots = Sequence[dict[str, Any]] | Responder


async def _call(fn: Responder, params: dict[str, Any]) -> Any:
    out = fn(params)
    if inspect.isawaitable(out):
        out = await out
    return out


@dataclass(frozen=True, slots=True)
class Handlers:
    elicitation: Responder | None = None
    url_elicitation: Responder | None = None
    sampling: Responder | None = None
    roots: Roots | None = None

    def capabilities(self) -> dict[str, Any]:
        """The ClientCapabilities for `_meta` (modern) and `initialize` (legacy; roots without listChanged:
        this client never sends it)."""
        caps: dict[str, Any] = {}
        if self.elicitation is not None or self.url_elicitation is not None:
            el: dict[str, Any] = {}
            if self.elicitation is not None:
                el["form"] = {}
            if self.url_elicitation is not None:
                el["url"] = {}
            caps["elicitation"] = el
        if self.sampling is not None:
            caps["sampling"] = {}
        if self.roots is not None:
            caps["roots"] = {}
        return caps

    async def answer(self, method: str, params: dict[str, Any] | None) -> dict[str, Any]:
        """The result for one input request (`elicitation/create`, `sampling/createMessage`, `roots/list`)."""
        params = params or {}
        if method == "elicitation/create":
            url_mode = params.get("mode") == "url"
            fn = self.url_elicitation if url_mode else self.elicitation
            if fn is None:
                raise InvalidResult(f"the server asked for {'URL' if url_mode else 'form'} elicitation, "
                                    "which this client did not declare")
            out = await _call(fn, params)
            if out is None:
                return {"action": "decline"}
            return dict(out)
        if method == "sampling/createMessage":
            if self.sampling is None:
                raise InvalidResult("the server asked for sampling, which this client did not declare")
            return dict(await _call(self.sampling, params))
        if method == "roots/list":
            if self.roots is None:
                raise InvalidResult("the server asked for roots, which this client did not declare")
            if callable(self.roots):
                out = await _call(self.roots, params)
                roots = out.get("roots", []) if isinstance(out, dict) else list(out)
            else:
                roots = list(self.roots)
            return {"roots": [dict(r) for r in roots]}
        raise InvalidResult(f"unknown input request method {method!r}")

    async def fulfil(self, requests: dict[str, Any]) -> dict[str, Any]:
        """`inputResponses` for an `inputRequests` object: every request answered, concurrently."""
        keys = list(requests)
        for k in keys:
            if not isinstance(requests[k], dict) or not isinstance(requests[k].get("method"), str):
                raise InvalidResult(f"input request {k!r} is malformed")
        answers = await asyncio.gather(
            *(self.answer(requests[k]["method"], requests[k].get("params")) for k in keys)
        )
        return dict(zip(keys, answers, strict=True))


__all__ = ["Handlers", "Responder", "Roots"]
