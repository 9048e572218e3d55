"""The per-request `Context` a handler receives, and MRTR input requests.

Input requests never wait: `ctx.elicit(...)` returns the answer when this request (or the sealed state of
an earlier round) carries it, and otherwise stops the handler with `InputRequired`; the framework turns
that into an `input_required` result and re-runs the handler on the retry, wherever it lands.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Generator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from ..protocol import errors
from ..protocol.endpoint import Outbox
from ..protocol.envelope import LOG_LEVEL_RANK, Request
from ..protocol.errors import McpError
from ..protocol.principal import Principal
from ..state import HandleStore
from ..tasks.runtime import malformed_answer

log = logging.getLogger("mcp_stateless")


class _Done:
    """Lets `await ctx.report_progress(...)` work although emitting never blocks."""

    __slots__ = ()

    def __await__(self) -> Generator[None, None, None]:
        yield from ()


DONE = _Done()


class InputRequired(BaseException):
    """Raised inside a handler to end this round with `input_required`. A BaseException so that a
    handler's broad `except Exception` does not swallow it."""

    def __init__(self, requests: dict[str, InputRequest]) -> None:
        super().__init__(sorted(requests))
        self.requests = requests


@dataclass(frozen=True, slots=True)
class InputRequest:
    """One entry of `inputRequests`: what to ask and which client capability that needs."""

    method: Literal["elicitation/create", "sampling/createMessage", "roots/list"]
    params: dict[str, Any] | None
    capability: dict[str, Any]

    def to_wire(self) -> dict[str, Any]:
        d: dict[str, Any] = {"method": self.method}
        if self.params is not None:
            d["params"] = self.params
        return d


def elicitation(message: str, schema: Mapping[str, Any]) -> InputRequest:
    """A form-mode elicitation; `schema` is the flat object schema of the form."""
    params = {"mode": "form", "message": message, "requestedSchema": dict(schema)}
    return InputRequest("elicitation/create", params, {"elicitation": {"form": {}}})


def url_elicitation(message: str, url: str) -> InputRequest:
    params = {"mode": "url", "message": message, "url": url}
    return InputRequest("elicitation/create", params, {"elicitation": {"url": {}}})


def sampling(
    messages: str | list[dict[str, Any]],
    max_tokens: int,
    *,
    system_prompt: str | None = None,
    temperature: float | None = None,
    model_preferences: dict[str, Any] | None = None,
    tools: list[dict[str, Any]] | None = None,
    **extra: Any,
) -> InputRequest:
    if isinstance(messages, str):
        messages = [{"role": "user", "content": {"type": "text", "text": messages}}]
    params: dict[str, Any] = {"messages": messages, "maxTokens": max_tokens}
    for k, v in (
        ("systemPrompt", system_prompt),
        ("temperature", temperature),
        ("modelPreferences", model_preferences),
        ("tools", tools),
    ):
        if v is not None:
            params[k] = v
    params.update(extra)
    cap: dict[str, Any] = {"sampling": {"tools": {}}} if tools else {"sampling": {}}
    return InputRequest("sampling/createMessage", params, cap)


def roots() -> InputRequest:
    return InputRequest("roots/list", None, {"roots": {}})


def has_capability(declared: Mapping[str, Any], needed: Mapping[str, Any]) -> bool:
    """Whether the capabilities declared on a request cover `needed` (elicitation `{}` means form)."""
    for name, sub in needed.items():
        have = declared.get(name)
        if not isinstance(have, dict):
            return False
        if name == "elicitation" and not have and set(sub) <= {"form"}:
            continue
        if isinstance(sub, dict) and not has_capability(have, sub):
            return False
    return True


@dataclass(slots=True)
class ElicitResult:
    action: Literal["accept", "decline", "cancel"]
    content: dict[str, Any] | None = None

    @property
    def accepted(self) -> bool:
        return self.action == "accept"

    def __await__(self) -> Generator[None, None, ElicitResult]:
        return self
        yield  # pragma: no cover


def _check_answer(key: str, req: InputRequest, answer: Any) -> Any:
    # One definition of a well-formed answer, shared with tasks/update (which refuses malformed ones).
    if malformed_answer(req.to_wire(), answer):
        raise McpError(errors.INVALID_PARAMS, f"inputResponses[{key!r}] is not a valid {req.method} result")
    if req.method == "elicitation/create":
        return ElicitResult(answer["action"], answer.get("content"))
    if req.method == "sampling/createMessage":
        return answer
    return answer["roots"]


@dataclass(slots=True)
class Context:
    """Everything a handler may know about its request. Built fresh for every request."""

    request: Request
    principal: Principal  # handles, tasks and requestState bind to `principal.id`
    outbox: Outbox | None = None
    handles: HandleStore | None = None  # where `Handle.mint/resolve` keep handles (any handler may)
    answers: dict[str, Any] = field(default_factory=dict)
    state: dict[str, Any] = field(default_factory=dict)
    mrtr_allowed: bool = False
    loop: asyncio.AbstractEventLoop | None = None
    task_id: str | None = None  # set while the handler runs as a task (Tasks extension)
    cancelled: bool = False  # set when the request or task is cancelled: sync handlers poll it
    lifespan: Any = None  # what `App(lifespan=...)` yielded (annotate it where used: `db: Db = ctx.lifespan`)
    _last_progress: float | None = None
    _used: set[str] = field(default_factory=set)
    _detach: Callable[[], Awaitable[None]] | None = None

    # -- what the request says ---------------------------------------------------------------
    @property
    def protocol_version(self) -> str:
        return self.request.version

    @property
    def client_capabilities(self) -> dict[str, Any]:
        return self.request.capabilities

    @property
    def client_info(self) -> dict[str, Any] | None:
        return self.request.client_info

    @property
    def request_id(self) -> str | int:
        return self.request.id

    def has_capability(self, needed: Mapping[str, Any]) -> bool:
        return has_capability(self.request.capabilities, needed)

    def require_capability(self, needed: Mapping[str, Any]) -> None:
        """Fail the request with -32021 unless the client declared `needed` on this request."""
        if not self.has_capability(needed):
            raise errors.missing_capability(dict(needed))

    # -- request-scoped notifications --------------------------------------------------------
    def _emit(self, message: dict[str, Any]) -> None:
        if self.outbox is None:
            return
        loop = self.loop
        if loop is None or _on_loop(loop):
            self.outbox.emit(message)
        else:  # a sync handler running in a worker thread
            loop.call_soon_threadsafe(self.outbox.emit, message)

    def report_progress(self, progress: float, total: float | None = None, message: str | None = None) -> _Done:
        """Send `notifications/progress` if the request asked for it; values must strictly increase."""
        token = self.request.progress_token
        if token is None:
            return DONE
        if self._last_progress is not None and progress <= self._last_progress:
            log.warning("progress %s not above %s for request %r: dropped", progress, self._last_progress, token)
            return DONE
        self._last_progress = progress
        params: dict[str, Any] = {"progressToken": token, "progress": progress}
        if total is not None:
            params["total"] = total
        if message is not None:
            params["message"] = message
        self._emit({"jsonrpc": "2.0", "method": "notifications/progress", "params": params})
        return DONE

    def log(self, level: str, data: Any, logger: str | None = None) -> _Done:
        """Send `notifications/message` only if this request set a logLevel at or below `level`."""
        asked = self.request.log_level
        if asked is None:
            return DONE
        rank = LOG_LEVEL_RANK.get(level)
        if rank is None:
            raise ValueError(f"unknown log level {level!r}")
        if rank < LOG_LEVEL_RANK[asked]:
            return DONE
        params: dict[str, Any] = {"level": level, "data": data}
        if logger is not None:
            params["logger"] = logger
        self._emit({"jsonrpc": "2.0", "method": "notifications/message", "params": params})
        return DONE

    def debug(self, data: Any) -> _Done:
        return self.log("debug", data)

    def info(self, data: Any) -> _Done:
        return self.log("info", data)

    def warning(self, data: Any) -> _Done:
        return self.log("warning", data)

    def error(self, data: Any) -> _Done:
        return self.log("error", data)

    # -- Tasks ----------------------------------------------------------------------------
    async def detach(self) -> None:
        """Continue as a durable task: the client gets a CreateTaskResult now, the rest of the handler runs
        in the background. A no-op when the request cannot (or already does) run as a task. Everything
        before this point runs synchronously, so MRTR questions asked there are answered before the task
        exists."""
        hook, self._detach = self._detach, None
        if hook is not None:
            await hook()

    # -- MRTR -----------------------------------------------------------------------------
    def ask(self, requests: Mapping[str, InputRequest]) -> dict[str, Any]:
        """All answers for `requests`, or stop this round asking for the ones still missing."""
        if not self.mrtr_allowed:
            raise McpError(errors.INTERNAL_ERROR, f"{self.request.method} cannot ask the client for input")
        missing: dict[str, InputRequest] = {}
        got: dict[str, Any] = {}
        for key, req in requests.items():
            if key in self.answers:
                got[key] = _check_answer(key, req, self.answers[key])
                self._used.add(key)
            else:
                if not has_capability(self.request.capabilities, req.capability):
                    raise errors.missing_capability(req.capability)
                missing[key] = req
        if missing:
            raise InputRequired(missing)
        return got

    def elicit(self, message: str, schema: Mapping[str, Any], *, key: str = "elicitation") -> ElicitResult:
        result: ElicitResult = self.ask({key: elicitation(message, schema)})[key]
        return result

    def elicit_url(self, message: str, url: str, *, key: str = "url_elicitation") -> ElicitResult:
        result: ElicitResult = self.ask({key: url_elicitation(message, url)})[key]
        return result

    def sample(self, messages: str | list[dict[str, Any]], max_tokens: int, *, key: str = "sampling",
               **options: Any) -> dict[str, Any]:
        result: dict[str, Any] = self.ask({key: sampling(messages, max_tokens, **options)})[key]
        return result

    def list_roots(self, *, key: str = "roots") -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = self.ask({key: roots()})[key]
        return result

    def used_answers(self) -> dict[str, Any]:
        """Answers this round consumed: carried forward (sealed) to the next round."""
        return {k: self.answers[k] for k in self._used}


def _on_loop(loop: asyncio.AbstractEventLoop) -> bool:
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False
