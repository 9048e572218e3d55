"""`subscriptions/listen`: the filter a stream honours, and the stream of typed items it yields."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncGenerator, Callable, Iterable, Iterator, Mapping
from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol

from ..protocol import errors, methods
from ..protocol.endpoint import KEEPALIVE, Call, ListenEnd, ListenEvent, ListenItem
from ..protocol.envelope import META_SUBSCRIPTION_ID, Request
from ..protocol.errors import McpError
from ..protocol.principal import Principal
from ..state.events import ChangeEvent, ChangeSubscription, EventBus, MemoryEventBus
from ..tasks.model import EXTENSION_ID as TASKS_EXTENSION
from ..tasks.runtime import REQUIRED_CAPABILITY as TASKS_REQUIRED
from ..tasks.runtime import TaskRuntime, declares_tasks

log = logging.getLogger("mcp_stateless")

# change kind -> (the listen filter's flag, its notification); the kinds are the method table's
_LIST_EVENTS = {kind: (f"{kind}ListChanged", method) for kind, method in methods.LIST_CHANGED.items()}


DEFAULT_MAX_SUBSCRIPTIONS = 1000


class ListenSource(Protocol):
    """What listen streams need to know of whatever serves them: which kinds of change it announces (a
    flag for any other kind is not honoured) and which scopes a resource's updates need. An app's
    `Catalog` is one; the bridge's view of its upstream (bridge/events.py) is another, so neither needs the
    other's registry (and this module loads no schema code)."""

    @property
    def declares_tools(self) -> bool: ...

    @property
    def declares_prompts(self) -> bool: ...

    @property
    def declares_resources(self) -> bool: ...

    @property
    def declares_subscriptions(self) -> bool:
        """Whether `resourceSubscriptions` are honoured."""
        ...

    def resource_scopes(self, uri: str) -> frozenset[str]:
        """The scopes a caller needs to hear of changes to `uri` (empty: none, or no such resource)."""
        ...


# Held from a stream's acknowledgement to its end with the filter it honoured (the bridge subscribes
# upstream for the stream's URIs with it); raising McpError refuses the stream before acknowledging.
Watch = Callable[[dict[str, Any], Call], AbstractAsyncContextManager[None]]


class UriFilter:
    """The `resourceSubscriptions` of one stream, matched in time independent of how many there are: a
    URI matches a subscribed URI exactly or lies under one (`file:///dir/` or `file:///dir` covers
    `file:///dir/a/b`). An event costs one set lookup per `/` in its URI, never a scan of the list."""

    __slots__ = ("_exact", "_prefixes")

    def __init__(self, uris: Iterable[str]) -> None:
        self._exact = frozenset(uris)
        self._prefixes = frozenset(u.rstrip("/") for u in self._exact)

    def __bool__(self) -> bool:
        return bool(self._exact)

    def matches(self, uri: str) -> bool:
        if not self._exact:
            return False
        if uri in self._exact:
            return True
        prefixes = self._prefixes
        i = uri.find("/")
        while i != -1:
            if uri[:i] in prefixes:
                return True
            i = uri.find("/", i + 1)
        return False


class Listeners:
    """The open listen streams of one endpoint (an app, the bridge), fed from its event bus."""

    def __init__(self, catalog: ListenSource, keepalive_s: float, events: EventBus | None,
                 max_subscriptions: int = DEFAULT_MAX_SUBSCRIPTIONS, *, watch: Watch | None = None) -> None:
        self.catalog = catalog
        self.watch = watch
        self.keepalive_s = keepalive_s
        self.max_subscriptions = max_subscriptions
        self.events: EventBus = events if events is not None else MemoryEventBus()
        self.tasks: TaskRuntime | None = None
        self.closing = False
        self._open: set[ChangeSubscription] = set()

    def end_all(self) -> None:
        """Every open stream ends gracefully with its final result."""
        self.closing = True
        for sub in tuple(self._open):
            sub.end()

    def honoured_filter(self, requested: Any, capabilities: Mapping[str, Any] | None = None) -> dict[str, Any]:
        if not isinstance(requested, dict):
            raise errors.invalid_params("subscriptions/listen needs params.notifications (an object)")
        c = self.catalog
        out: dict[str, Any] = {}
        for key, ok in (
            ("toolsListChanged", c.declares_tools),
            ("promptsListChanged", c.declares_prompts),
            ("resourcesListChanged", c.declares_resources),
        ):
            v = requested.get(key)
            if v is not None and not isinstance(v, bool):
                raise errors.invalid_params(f"notifications.{key} must be a boolean")
            if v and ok:
                out[key] = True
        subs = requested.get("resourceSubscriptions")
        if subs is not None:
            if not isinstance(subs, list) or not all(isinstance(u, str) for u in subs):
                raise errors.invalid_params("notifications.resourceSubscriptions must be a list of URIs")
            self._check_count("resourceSubscriptions", subs)
            if c.declares_subscriptions and subs:
                out["resourceSubscriptions"] = list(dict.fromkeys(subs))
        task_ids = requested.get("taskIds")
        if task_ids is not None:
            if not isinstance(task_ids, list) or not all(isinstance(t, str) for t in task_ids):
                raise errors.invalid_params("notifications.taskIds must be a list of task ids")
            self._check_count("taskIds", task_ids)
            if not declares_tasks(dict(capabilities or {})):
                raise errors.missing_capability(
                    TASKS_REQUIRED, f"taskIds subscriptions need the {TASKS_EXTENSION} extension")
            if self.tasks is not None and task_ids:
                out["taskIds"] = list(dict.fromkeys(task_ids))
        return out

    def _check_count(self, key: str, items: list[str]) -> None:
        # A stream's filter lives as long as the stream: its size is bounded like any other buffer.
        if len(items) > self.max_subscriptions:
            raise McpError(errors.INVALID_PARAMS, f"notifications.{key} has {len(items)} entries; at most "
                           f"{self.max_subscriptions} per listen stream", {"limit": self.max_subscriptions})

    @contextlib.contextmanager
    def _subscription(self) -> Iterator[ChangeSubscription]:
        sub = self.events.subscribe()
        self._open.add(sub)
        try:
            yield sub
        finally:
            self._open.discard(sub)
            sub.close()

    async def stream(self, req: Request, call: Call) -> AsyncGenerator[ListenItem, None]:
        """The acknowledgement, then events, a keep-alive after `keepalive_s` idle, and on shutdown
        the final result (`ListenEnd`)."""
        honoured = self.honoured_filter(req.params.get("notifications"), req.capabilities)
        sid = req.id
        tag = {META_SUBSCRIPTION_ID: sid}
        async with contextlib.AsyncExitStack() as held:
            if self.watch is not None:
                await held.enter_async_context(self.watch(honoured, call))
            with self._subscription() as sub:
                await sub.ready()  # on a shared bus, acknowledge only once events from other instances arrive
                yield ListenEvent({
                    "jsonrpc": "2.0",
                    "method": "notifications/subscriptions/acknowledged",
                    "params": {"notifications": honoured, "_meta": tag},
                })
                if self.closing:
                    yield _end(sid)
                    return
                uris = UriFilter(honoured.get("resourceSubscriptions", ()))
                task_ids = frozenset(honoured.get("taskIds", ()))
                while True:
                    ev = await sub.get(self.keepalive_s)
                    if ev is None:
                        yield KEEPALIVE
                        continue
                    if ev.kind == "end":
                        yield _end(sid)
                        return
                    if ev.audience is not None and ev.audience != call.principal.id:
                        continue  # another caller's change (state.events.ChangeEvent.audience)
                    if ev.kind == "task":
                        task_msg = await self._task_message(ev.uri, task_ids, call.principal.id, tag)
                        if task_msg is not None:
                            yield ListenEvent(task_msg)
                        continue
                    msg = _event_message(ev, honoured, uris, tag)
                    if msg is not None and (ev.kind != "resource_updated" or self.may_read(ev.uri, call.principal)):
                        yield ListenEvent(msg)

    def may_read(self, uri: str | None, principal: Principal) -> bool:
        """Whether `principal` may hear of updates to `uri`: a subscription (a prefix one above all) must not
        name, or time the changes of, a resource whose scopes the principal lacks."""
        scopes = self.catalog.resource_scopes(uri) if uri is not None else frozenset()
        return principal.has_scopes(scopes)

    async def _task_message(self, task_id: str | None, task_ids: frozenset[str], principal: str,
                            tag: dict[str, Any]) -> dict[str, Any] | None:
        if self.tasks is None or task_id is None or task_id not in task_ids:
            return None
        try:
            rec = await self.tasks.store.get(task_id)
        except Exception:
            log.warning("task %s: could not load for a listen notification", task_id)
            return None
        if rec is None or rec.principal != principal:
            return None
        return {"jsonrpc": "2.0", "method": "notifications/tasks", "params": {**rec.detailed(), "_meta": tag}}


def _end(sid: Any) -> ListenEnd:
    return ListenEnd({"jsonrpc": "2.0", "id": sid,
                      "result": {"resultType": "complete", "_meta": {META_SUBSCRIPTION_ID: sid}}})


def _event_message(
    ev: ChangeEvent, honoured: dict[str, Any], uris: UriFilter, tag: dict[str, Any]
) -> dict[str, Any] | None:
    if ev.kind == "resource_updated":
        uri = ev.uri or ""
        if not uris.matches(uri):
            return None
        return {"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": uri, "_meta": tag}}
    entry = _LIST_EVENTS.get(ev.kind)
    if entry is None or not honoured.get(entry[0]):
        return None
    return {"jsonrpc": "2.0", "method": entry[1], "params": {"_meta": tag}}
