"""The task worker: runs queued tasks one at a time per worker, renewing each task's lease while
it runs, so that a task whose ops died is picked up again by the next one to start.

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

        async def report(percent: int) -> None:
            await self._store.progress(task.id, percent, self._lease)

        started = time.perf_counter()
        heartbeat = asyncio.create_task(self._heartbeat(task))
        try:
            result = await handler(task, report)
        except OperationError as error:
            await self._finish(task, error=error.body(), started=started)
        except Exception as error:  # noqa: BLE001 — a task must end failed, never stay running
            _log.exception("task failed", extra={"task_id": str(task.id), "kind": task.kind})
            await self._finish(
                task, error={"code": "internal", "message": repr(error)[:500]}, started=started
            )
        else:
            await self._finish(task, result=result, started=started)
        finally:
            heartbeat.cancel()
        return True

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
