"""Calls the checks share: what an answer amounts to when two are compared, and MRTR rounds driven to the
end (the auditor plays the file system; as the user and the model it declines, unless an answer was
given for the question)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..engine import Context
from ..ledger import Ledger
from ..wire import FULL_CAPS, Exchange, Message, comparable, excerpt, modern

MAX_ROUNDS = 6


def answer(ex: Exchange) -> Any:
    """What must be equal when the same request is asked twice: the result without `_meta`, or the error code."""
    if (res := ex.result) is not None:
        return ("result", comparable(res))
    if (code := ex.error_code) is not None:
        return ("error", code)
    return ("nothing", ex.status)


def short(ex: Exchange) -> str:
    """An answer for a one-line finding: the structured result or first text, else the outcome."""
    res = ex.result
    if res is None:
        return ex.outcome()
    if "structuredContent" in res:
        return excerpt(res["structuredContent"], 160)
    for block in res.get("content") or []:
        if isinstance(block, dict) and block.get("type") == "text":
            return excerpt(str(block.get("text")), 160)
    return excerpt(comparable(res), 160)


DECLINED_SAMPLING = "sampling declined (left unanswered)"


def input_response(key: str, request: dict[str, Any], answers: Mapping[str, Any] | None = None) -> Any | None:
    """The auditor's answer to one server->client request, or None to leave it unanswered. An answer given
    for this key (`--answer KEY=JSON`) is sent as it is. Otherwise an elicitation is declined: it may be
    "Really delete everything?", and a probe must never consent on a user's behalf (a declined round still
    exercises requestState and the retry on another instance, which is what the checks need). A sampling
    request is declined too: a made-up model answer could be what the server acts on. MRTR has no
    refusal for sampling, so the answer is left out, and the server asks again or gives up (a spec SHOULD:
    re-ask when a required answer is missing). A roots request gets a scratch root, which exposes nothing."""
    if answers and key in answers:
        return answers[key]
    method = request.get("method")
    if method == "elicitation/create":
        return {"action": "decline"}
    if method == "sampling/createMessage":
        return None
    return {"roots": [{"uri": "file:///tmp/mcp-audit", "name": "audit"}]}


def input_responses(requests: Mapping[str, Any], answers: Mapping[str, Any] | None = None,
                    ledger: Ledger | None = None) -> dict[str, Any]:
    """Every answer the auditor gives to `requests` (an `inputRequests` map); a left-out one is noted."""
    out = {}
    for k, v in requests.items():
        if not isinstance(v, dict):
            continue
        got = input_response(k, v, answers)
        if got is not None:
            out[k] = got
        elif ledger is not None:
            ledger.answer(DECLINED_SAMPLING)
    return out


def call(tool: str, arguments: dict[str, Any] | None = None, caps: dict[str, Any] | None = None,
         **extra: Any) -> Message:
    return modern("tools/call", {"name": tool, "arguments": arguments or {}, **extra},
                  caps=FULL_CAPS if caps is None else caps)


def retry_of(first: Message, res: dict[str, Any], state: str | None = None, *,
             ctx: Context | None = None) -> Message:
    """The retry of an MRTR round: the original params, the answers, the state echoed unchanged."""
    params = {k: v for k, v in first["params"].items() if k not in ("_meta", "inputResponses", "requestState")}
    reqs = res.get("inputRequests") or {}
    answers, ledger = (ctx.options.answers, ctx.target.ledger) if ctx is not None else (None, None)
    params["inputResponses"] = input_responses(reqs if isinstance(reqs, dict) else {}, answers, ledger)
    if state is not None:
        params["requestState"] = state
    elif "requestState" in res:
        params["requestState"] = res["requestState"]
    if not params["inputResponses"]:
        del params["inputResponses"]
    meta = first["params"]["_meta"]
    return modern(first["method"], params, caps=meta.get("io.modelcontextprotocol/clientCapabilities"))


@dataclass
class Rounds:
    exchanges: list[Exchange] = field(default_factory=list)

    @property
    def last(self) -> Exchange:
        return self.exchanges[-1]

    @property
    def completed(self) -> bool:
        res = self.last.result
        return res is not None and res.get("resultType") == "complete" and not res.get("isError")


Between = Callable[[int], Awaitable[None]]


async def run_rounds(ctx: Context, first: Message, *, between: Between | None = None) -> Rounds:
    """Drive an MRTR request to its end, each round on the next instance; `between(n)` runs before retry n."""
    out = Rounds()
    msg = first
    for n in range(MAX_ROUNDS):
        ex = await ctx.target.send(msg, timeout=ctx.options.call_timeout)
        out.exchanges.append(ex)
        res = ex.result
        if res is None or res.get("resultType") != "input_required":
            break
        if between is not None:
            await between(n + 1)
        msg = retry_of(first, res, ctx=ctx)
    return out


async def completes_alone(ctx: Context, tool: str, args: dict[str, Any]) -> bool:
    """Whether `tool`'s rounds, every one on the first instance with nothing restarted, end in a complete
    result: a server may ask again when the auditor declines (it never consents), and then no round can
    end anywhere, which says nothing about its state. Tried once per audit."""
    if ctx.profile.mrtr_completes_alone is None:
        first = msg = call(tool, args)
        done = False
        for _ in range(MAX_ROUNDS):
            ex = await ctx.target.send(msg, instance=0, timeout=ctx.options.call_timeout)
            res = ex.result
            if res is None or res.get("resultType") != "input_required":
                done = res is not None and res.get("resultType") == "complete" and not res.get("isError")
                break
            msg = retry_of(first, res, ctx=ctx)
        ctx.profile.mrtr_completes_alone = done
    return ctx.profile.mrtr_completes_alone


async def find_mrtr_tool(ctx: Context) -> tuple[str, dict[str, Any]] | None:
    """A call that answers with `input_required`: the one `--mrtr-tool` names, else the first argument-free
    tool that does (preferring one carrying requestState); looked for once per audit."""
    if ctx.profile.mrtr_searched:
        return ctx.profile.mrtr
    candidates = [ctx.options.mrtr_tool] if ctx.options.mrtr_tool else [
        (t["name"], {}) for t in ctx.probe_tools(limit=30)]
    found: tuple[str, dict[str, Any]] | None = None
    for name, args in candidates:
        ex = await ctx.target.send(call(name, args), timeout=min(ctx.options.call_timeout, 5.0))
        res = ex.result or {}
        if res.get("resultType") == "input_required":
            if found is None:
                found = (name, args)
            if "requestState" in res:
                found = (name, args)
                break
    ctx.profile.mrtr, ctx.profile.mrtr_searched = found, True
    return found
