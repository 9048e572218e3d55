"""Running tools as durable tasks (extension `io.modelcontextprotocol/tasks`, SEP-2663).

The task record in the `TaskStore` is the only truth. The instance running a task holds a lease that it
renews; any instance answers `tasks/get`/`update`/`cancel` from the store. When a lease lapses (its
instance died), the next instance to notice either re-runs the task (tools declared `retry_safe`) or marks
it `failed`: a task is never left `working` forever.

Handlers are replayed, like MRTR: a task that needs input parks in `input_required`; once `tasks/update`
supplies every answer, the handler runs again from the top with those answers, on whichever instance
took the update.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Any

from ..protocol import errors
from ..protocol.envelope import Request
from ..protocol.errors import McpError
from ..state.base import StateUnavailable
from .host import NeedsInput, TaskOutcome, ToolHost
from .model import EXTENSION_ID, TaskRecord, TaskStatus, new_task_id
from .store import MemoryTaskStore, TaskStore, TaskUpdate

if TYPE_CHECKING:
    from ..state.base import StateBundle

log = logging.getLogger("mcp_stateless.tasks")

REQUIRED_CAPABILITY: dict[str, Any] = {"extensions": {EXTENSION_ID: {}}}
CANCEL_SETTLE_S = 2.0  # how long tasks/cancel waits for a local run to record its cancellation
LOST_RUNNER = {"code": errors.INTERNAL_ERROR,
               "message": "The server instance running this task stopped before it finished; start it again."}


def malformed_answer(request: Any, answer: Any) -> bool:
    """Whether `answer` is NOT a well-formed result for the wire input request `request` (its
    `method`): the same shape the handler's replay will insist on, checked before the answer is kept
    so that a malformed one cannot fail the task later."""
    method = request.get("method") if isinstance(request, dict) else None
    if not isinstance(answer, dict):
        return True
    if method == "elicitation/create":
        content = answer.get("content")
        return answer.get("action") not in ("accept", "decline", "cancel") or (
            content is not None and not isinstance(content, dict))
    if method == "sampling/createMessage":
        return not isinstance(answer.get("content"), dict | list) or "role" not in answer
    if method == "roots/list":
        roots = answer.get("roots")
        return not isinstance(roots, list) or not all(
            isinstance(r, dict) and isinstance(r.get("uri"), str) for r in roots)
    return False  # a method this runtime does not know: the handler judges it


def declares_tasks(capabilities: dict[str, Any]) -> bool:
    ext = capabilities.get("extensions")
    return isinstance(ext, dict) and isinstance(ext.get(EXTENSION_ID), dict)


class TaskRuntime:
    def __init__(
        self,
        store: TaskStore | None = None,
        *,
        ttl_ms: int | None = 3_600_000,
        poll_interval_ms: int = 250,
        lease_s: float = 6.0,
        sweep_interval_s: float = 1.0,
        max_attempts: int = 3,
        instance_id: str | None = None,
    ) -> None:
        # No store given: tasks live wherever the app's state lives (`--state`), memory until then.
        self._explicit_store = store is not None
        self.store: TaskStore = store if store is not None else MemoryTaskStore()
        self.ttl_ms = ttl_ms
        self.poll_interval_ms = poll_interval_ms
        self.lease_s = lease_s
        self.sweep_interval_s = sweep_interval_s
        self.max_attempts = max_attempts
        self.instance_id = instance_id or f"{os.getpid()}-{secrets.token_hex(4)}"
        self._host: ToolHost | None = None
        self._running: dict[str, asyncio.Task[None]] = {}
        self._sweeper: asyncio.Task[None] | None = None
        self._closing = False

    @property
    def running(self) -> int:
        """How many tasks this process is running now."""
        return len(self._running)

    def attach(self, host: ToolHost) -> None:
        self._host = host

    def adopt_state(self, bundle: StateBundle) -> None:
        """Keep tasks in the app's state bundle, on the connection its handles and events use (closed by
        `bundle.aclose()`), unless this runtime was built with its own store."""
        if not self._explicit_store:
            self.store = bundle.typed_store(TaskStore)

    @property
    def host(self) -> ToolHost:
        assert self._host is not None, "TaskRuntime is not attached to a host (App.enable_tasks)"
        return self._host

    # ------------------------------------------------------------------ lifecycle
    def ensure_started(self) -> None:
        if self._sweeper is None or self._sweeper.done():
            self._closing = False
            self._sweeper = asyncio.get_running_loop().create_task(self._sweep_forever())

    async def aclose(self) -> None:
        """Stop this instance's runners and hand their leases back so another instance recovers them."""
        self._closing = True
        if self._sweeper is not None:
            self._sweeper.cancel()
        running = list(self._running.values())
        for t in running:
            t.cancel()
        if running:
            await asyncio.wait(running, timeout=2.0)

    async def _sweep_forever(self) -> None:
        unavailable = False  # one warning when the store goes, one line when it is back: not one a sweep
        while not self._closing:
            try:
                for tid in await self.store.lapsed(time.time()):
                    if tid not in self._running:
                        await self._recover(tid)
                if unavailable:
                    unavailable = False
                    log.info("task sweep resumed: the state store is reachable again")
            except StateUnavailable as e:
                if not unavailable:
                    unavailable = True
                    log.warning("task sweep paused until the state store is reachable (readiness reports it "
                                "too): %s", e)
                else:
                    log.debug("task sweep skipped: %s", e)
            except Exception:
                log.exception("task sweep failed")
            await asyncio.sleep(self.sweep_interval_s)

    async def _recover(self, task_id: str) -> TaskRecord | None:
        """Take over a task whose lease lapsed: re-run it when its tool is safe to repeat, else fail it."""
        now = time.time()

        def take(rec: TaskRecord) -> bool:
            if rec.status != "working" or rec.lease_until >= now:
                return False
            if rec.cancel_requested:
                rec.touch("cancelled", "Cancelled by the client")
            elif self.host.retry_safe(rec.tool) and rec.attempts < self.max_attempts:
                rec.lease_owner, rec.lease_until = self.instance_id, now + self.lease_s
                rec.attempts += 1
                rec.touch(message=f"re-running after a lost instance (attempt {rec.attempts})")
            else:
                rec.error = dict(LOST_RUNNER)
                rec.lease_until = 0.0
                rec.touch("failed")
            return True

        change = await self.store.update(task_id, take)
        if change is None:
            return None
        rec = change.after
        # Decided from what this call committed: a retried mutator leaves no stale verdict behind, so
        # of all the instances that noticed the lapsed lease only the one whose write won re-runs it.
        if change.written and rec.terminal:
            await self._publish(task_id)
        elif change.written and rec.lease_owner == self.instance_id and rec.attempts > change.before.attempts:
            self.spawn(rec)
        return rec

    # ------------------------------------------------------------------ creation
    def new_record(self, tool: str, req: Request, principal: str, arguments: dict[str, Any],
                   answers: dict[str, Any], scopes: Iterable[str] = ()) -> TaskRecord:
        now = time.time()
        return TaskRecord(
            task_id=new_task_id(),
            principal=principal,
            tool=tool,
            arguments=arguments,
            request_meta={"version": req.version, "capabilities": req.capabilities, "clientInfo": req.client_info},
            created_at=now,
            updated_at=now,
            ttl_ms=self.ttl_ms,
            poll_interval_ms=self.poll_interval_ms,
            answers=dict(answers),
            asked=list(answers),
            lease_owner=self.instance_id,
            lease_until=now + self.lease_s,
            attempts=1,
            principal_scopes=sorted(scopes),
        )

    async def create(self, rec: TaskRecord) -> dict[str, Any]:
        """Store the task durably, then (only then) return its CreateTaskResult."""
        self.ensure_started()
        await self.store.create(rec)
        return {"resultType": "task", **rec.task_fields()}

    def spawn(self, rec: TaskRecord, runner: Awaitable[TaskOutcome] | None = None) -> None:
        """Run a stored task here: `runner` is the handler already running (started inline, then
        detached), else the host runs the record's tool from the top."""
        tid = rec.task_id
        task = asyncio.get_running_loop().create_task(self._run(rec, runner))
        self._running[tid] = task

        def forget(done: asyncio.Task[None]) -> None:
            # a later run of the same task (resumed here after a park) may already have replaced this one
            if self._running.get(tid) is done:
                del self._running[tid]

        task.add_done_callback(forget)

    async def _run(self, rec: TaskRecord, runner: Awaitable[TaskOutcome] | None) -> None:
        tid = rec.task_id
        renew = asyncio.get_running_loop().create_task(self._renew(tid))
        try:
            await self._settle(rec, runner)
        except StateUnavailable as e:
            # The tool's own store call, or the write of its outcome: nothing can be written now, so the
            # lease lapses and whichever instance notices re-runs or fails the task.
            log.error("task %s: store unavailable, lease will lapse: %s", tid, e)
        finally:
            renew.cancel()

    async def _settle(self, rec: TaskRecord, runner: Awaitable[TaskOutcome] | None) -> None:
        tid = rec.task_id
        try:
            if runner is None:
                runner = self.host.run(rec)
            outcome = await runner
            if isinstance(outcome, NeedsInput):
                await self._park(tid, outcome)
            else:
                await self._finish(tid, "completed", result={**outcome.result, "resultType": "complete"})
        except StateUnavailable:
            raise  # an McpError too, but not the tool's verdict: see _run
        except McpError as e:
            await self._finish(tid, "failed", error=e.to_error())
        except asyncio.CancelledError:
            if self._closing:
                await self._release(tid)
            else:
                await self._finish(tid, "cancelled", message="Cancelled by the client")
        except Exception:
            log.exception("task %s crashed", tid)
            await self._finish(tid, "failed", error={"code": errors.INTERNAL_ERROR, "message": "Internal error"})

    async def _renew(self, tid: str) -> None:
        me = self.instance_id
        while True:
            await asyncio.sleep(self.lease_s / 3)

            def extend(rec: TaskRecord) -> bool:
                if rec.terminal or rec.lease_owner != me:
                    return False
                rec.lease_until = time.time() + self.lease_s
                return True

            try:
                change = await self.store.update(tid, extend)
            except StateUnavailable:
                continue
            rec = None if change is None else change.after
            # Another instance holding the lease took the task over (ours lapsed): it runs it now, so the
            # run here stops; `_finish` then writes nothing, the record is no longer ours.
            if rec is None or rec.cancel_requested or rec.terminal or rec.lease_owner != me:
                if rec is not None and not rec.terminal and rec.lease_owner != me:
                    log.warning("task %s: lease taken over by %s; stopping the run here", tid, rec.lease_owner)
                task = self._running.get(tid)
                if task is not None:
                    task.cancel()
                return

    async def _finish(self, tid: str, status: TaskStatus, *, result: dict[str, Any] | None = None,
                      error: dict[str, Any] | None = None, message: str | None = None) -> None:
        def done(rec: TaskRecord) -> bool:
            # Only the lease holder reports: a run that lost its lease to another instance (which re-ran
            # or failed the task) must not overwrite what that instance decides.
            if rec.terminal or rec.lease_owner != self.instance_id:
                return False
            # Cancellation is cooperative: a handler that finished anyway reports what it did.
            rec.result, rec.error = result, error
            rec.input_requests = {}
            rec.lease_owner, rec.lease_until = None, 0.0
            rec.touch(status, message)
            return True

        await self._publish_if_written(await self.store.update(tid, done))

    async def _park(self, tid: str, asked: NeedsInput) -> None:
        def park(rec: TaskRecord) -> bool:
            if rec.terminal or rec.lease_owner != self.instance_id:
                return False
            fresh = {k: r for k, r in asked.requests.items() if k not in rec.answers}
            rec.input_requests = fresh
            rec.asked.extend(k for k in fresh if k not in rec.asked)
            rec.lease_owner, rec.lease_until = None, 0.0
            rec.touch("input_required", "Waiting for input")
            return True

        await self._publish_if_written(await self.store.update(tid, park))

    async def _release(self, tid: str) -> None:
        def release(rec: TaskRecord) -> bool:
            if rec.terminal or rec.lease_owner != self.instance_id:
                return False
            rec.lease_until = 0.0
            return True

        with contextlib.suppress(Exception):
            await self.store.update(tid, release)

    async def _publish(self, tid: str) -> None:
        with contextlib.suppress(Exception):
            await self.host.publish(tid)

    async def _publish_if_written(self, change: TaskUpdate | None) -> None:
        if change is not None and change.written:
            await self._publish(change.after.task_id)

    # ------------------------------------------------------------------ tasks/* methods
    async def _owned(self, req: Request, principal: str) -> TaskRecord:
        if not declares_tasks(req.capabilities):
            raise errors.missing_capability(REQUIRED_CAPABILITY, f"{req.method} needs the {EXTENSION_ID} extension")
        tid = req.params.get("taskId")
        if not isinstance(tid, str):
            raise errors.invalid_params(f"{req.method} needs params.taskId")
        self.ensure_started()
        rec = await self.store.get(tid)  # StateUnavailable (-32603, retryable) when the store is down
        if rec is None or rec.principal != principal:  # another principal's task does not exist for you
            raise McpError(errors.INVALID_PARAMS, f"Unknown or expired task: {tid}", {"taskId": tid})
        if rec.status == "working" and rec.lease_until < time.time() and tid not in self._running:
            rec = await self._recover(tid) or rec
        return rec

    async def get(self, req: Request, principal: str) -> dict[str, Any]:
        rec = await self._owned(req, principal)
        return {"resultType": "complete", **rec.detailed()}

    async def update(self, req: Request, principal: str) -> dict[str, Any]:
        rec = await self._owned(req, principal)
        responses = req.params.get("inputResponses")
        if not isinstance(responses, dict):
            raise errors.invalid_params("tasks/update needs params.inputResponses (an object)")
        # A malformed answer to a pending key is refused before anything is written, so the task stays
        # input_required and the client can correct it (kept, it would fail the task on replay).
        for key, value in responses.items():
            if key in rec.input_requests and malformed_answer(rec.input_requests[key], value):
                method = rec.input_requests[key].get("method")
                raise McpError(errors.INVALID_PARAMS, f"inputResponses[{key!r}] is not a valid {method} result",
                               {"taskId": rec.task_id, "key": key})

        def apply(r: TaskRecord) -> bool:
            changed = False
            for key, value in responses.items():
                # unknown, answered or superseded keys are ignored (a retried update is harmless); an
                # answer that became malformed for a concurrently re-asked key is skipped too
                if key in r.input_requests and not malformed_answer(r.input_requests[key], value):
                    r.answers[key] = value
                    del r.input_requests[key]
                    changed = True
            if changed and r.status == "input_required" and not r.input_requests:
                r.lease_owner, r.lease_until = self.instance_id, time.time() + self.lease_s
                r.touch("working", "Resuming with the answers")
            elif changed:
                r.touch()
            return changed

        change = await self.store.update(rec.task_id, apply)
        # Resume only when this call's committed write supplied the last answer: concurrent updates
        # carrying the same answers (a client retrying) find nothing left to answer and write nothing.
        if change is not None and change.written and change.before.status == "input_required" \
                and change.after.status == "working":
            self.spawn(change.after)
        return {"resultType": "complete"}

    async def cancel(self, req: Request, principal: str) -> dict[str, Any]:
        rec = await self._owned(req, principal)
        local = self._running.get(rec.task_id)

        def ask(r: TaskRecord) -> bool:
            if r.terminal:
                return False
            if r.status == "input_required" or (r.lease_until < time.time() and local is None):
                r.input_requests = {}
                r.lease_owner, r.lease_until = None, 0.0
                r.touch("cancelled", "Cancelled by the client")
            else:
                r.cancel_requested = True
                r.touch()
            return True

        change = await self.store.update(rec.task_id, ask)
        if local is not None:
            local.cancel()
            # A run that honours the cancellation writes its terminal status as it unwinds: give it a moment,
            # so a tasks/get sent right after this ack sees "cancelled" rather than a stale "working". Bounded
            # (cancellation is cooperative; a handler may keep going) and never cancels the run's own write.
            await asyncio.wait({local}, timeout=CANCEL_SETTLE_S)
        elif change is not None and change.written and change.after.terminal:
            await self._publish(rec.task_id)
        return {"resultType": "complete"}

    def methods(self) -> dict[str, Callable[[Request, str], Awaitable[dict[str, Any]]]]:
        return {"tasks/get": self.get, "tasks/update": self.update, "tasks/cancel": self.cancel}
