"""The task worker: runs queued tasks one at a time per worker, renewing each task's lease while
it runs, so that a task whose ops died is picked up again by the next one to start. A task that
must not wait its turn (a statement someone waits for) is started here at once instead
(``start_here``) and is leased, ended and counted the same way.

A handler gets the task and a ``report`` callable for progress, and returns the result. What it
raises becomes the task's error: typed errors keep their code; anything else is logged and
reported as ``internal``. Every task that ends is counted by kind and outcome, and the time it
ran here is measured.
"""

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from datetime import timedelta
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram

from sstools.ops.errors import OperationError
from sstools.ops.store.tasks import Task, TaskStore

Report = Callable[[int], Awaitable[None]]
Handler = Callable[[Task, Report], Awaitable[dict[str, Any]]]

_log = logging.getLogger(__name__)


class TaskMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.ended = Counter(
            "sstools_ops_tasks_total",
            "Tasks that ended, by kind and outcome (success, failed).",
            ["kind", "outcome"],
            registry=registry,
        )
        self.seconds = Histogram(
            "sstools_ops_task_seconds",
            "Time a task ran, from a worker taking it to its end, by kind (a task failed unrun — "
            "unknown kind, interrupted too often — is counted, not timed).",
            ["kind"],
            # backups, deployments and migrations of whole dashboards: seconds to many minutes
            buckets=(0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0),
            registry=registry,
        )


class TaskWorker:
    def __init__(
        self,
        store: TaskStore,
        handlers: Mapping[str, Handler],
        *,
        lease: timedelta = timedelta(seconds=30),
        poll_seconds: float = 1.0,
        max_attempts: int = 3,
        metrics: TaskMetrics | None = None,
    ) -> None:
        self._store = store
        self._handlers = dict(handlers)
        self._lease = lease
        self._poll = poll_seconds
        self._max_attempts = max_attempts
        self._wake = asyncio.Event()
        self._here: set[asyncio.Task[dict[str, Any]]] = set()  # started here; kept from collection
        self._metrics = metrics if metrics is not None else TaskMetrics(CollectorRegistry())

    @property
    def kinds(self) -> set[str]:
        return set(self._handlers)

    def wake(self) -> None:
        """A task was queued: look now rather than at the next poll."""
        self._wake.set()

    async def run(self) -> None:
        while True:
            try:
                worked = await self.run_one()
            except Exception:  # noqa: BLE001 — the database went away: keep the worker, try later
                _log.exception("task worker could not claim a task")
                worked = False
            if not worked:
                self._wake.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), self._poll)

    async def run_one(self) -> bool:
        """Claim and run one task; False if there was none."""
        task = await self._store.claim(self._lease)
        if task is None:
            return False
        if task.attempts > self._max_attempts:
            message = f"interrupted {task.attempts - 1} times (ops restarted while it ran); not retried"
            await self._finish(task, error={"code": "interrupted", "message": message})
            return True
        handler = self._handlers.get(task.kind)
        if handler is None:
            await self._finish(task, error={"code": "unknown_task_kind", "message": task.kind})
            return True
        await self._execute(task, handler)
        return True

    async def start_here(
        self, kind: str, env_id: str, params: dict[str, Any], created_by: str
    ) -> tuple[Task, "asyncio.Task[dict[str, Any]]"]:
        """Start a task in this process at once, not in a worker's turn (a statement must not
        wait behind a deployment): its row, and the running job, which ends with the task's
        result or raises the error it ended with. If this ops dies meanwhile, the task's lease
        runs out and a worker claims it as any other (``attempts`` then says so)."""
        handler = self._handlers[kind]
        task = await self._store.start(kind, env_id, params, created_by, self._lease)
        job = asyncio.create_task(self._ended(task, handler))
        self._here.add(job)
        job.add_done_callback(self._ended_here)
        return task, job

    def _ended_here(self, job: "asyncio.Task[dict[str, Any]]") -> None:
        self._here.discard(job)
        if not job.cancelled():
            job.exception()  # stored as the task's error; nobody may be awaiting it any more

    async def _ended(self, task: Task, handler: Handler) -> dict[str, Any]:
        result, error = await self._execute(task, handler)
        if error is not None:
            raise error
        return result

    async def _execute(self, task: Task, handler: Handler) -> tuple[dict[str, Any], Exception | None]:
        """Run a task this process holds and end it: its result, or the error it failed with
        (stored: typed errors keep their code, anything else is ``internal``)."""

        async def report(percent: int) -> None:
            await self._store.progress(task.id, percent, self._lease)

        started = time.perf_counter()
        heartbeat = asyncio.create_task(self._heartbeat(task))
        try:
            result = await handler(task, report)
        except OperationError as error:
            await self._finish(task, error=error.body(), started=started)
            return {}, error
        except Exception as error:  # noqa: BLE001 — a task must end failed, never stay running
            _log.exception("task failed", extra={"task_id": str(task.id), "kind": task.kind})
            await self._finish(
                task, error={"code": "internal", "message": repr(error)[:500]}, started=started
            )
            return {}, error
        else:
            await self._finish(task, result=result, started=started)
            return result, None
        finally:
            heartbeat.cancel()

    async def _finish(
        self,
        task: Task,
        *,
        result: dict[str, Any] | None = None,
        error: dict[str, Any] | None = None,
        started: float | None = None,
    ) -> None:
        """End the task, then count it (once: a task whose end was not stored runs again); timed
        from ``started``, when it ran."""
        outcome = await self._store.finish(task.id, result=result, error=error)
        self._metrics.ended.labels(task.kind, outcome.value).inc()
        if started is not None:
            self._metrics.seconds.labels(task.kind).observe(time.perf_counter() - started)

    async def _heartbeat(self, task: Task) -> None:
        while True:
            await asyncio.sleep(self._lease.total_seconds() / 3)
            current = await self._store.get(task.id)
            await self._store.progress(task.id, current.progress if current else 0, self._lease)
