"""The task worker: runs queued tasks one at a time per worker, renewing each task's lease while
it runs, so that a task whose ops died is picked up again by the next one to start.

A handler gets the task and a ``report`` callable for progress, and returns the result. What it
raises becomes the task's error: typed errors keep their code; anything else is logged and
reported as ``internal``.
"""

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Mapping
from datetime import timedelta
from typing import Any

from sstools.ops.errors import OperationError
from sstools.ops.store.tasks import Task, TaskStore

Report = Callable[[int], Awaitable[None]]
Handler = Callable[[Task, Report], Awaitable[dict[str, Any]]]

_log = logging.getLogger(__name__)


class TaskWorker:
    def __init__(
        self,
        store: TaskStore,
        handlers: Mapping[str, Handler],
        *,
        lease: timedelta = timedelta(seconds=30),
        poll_seconds: float = 1.0,
        max_attempts: int = 3,
    ) -> None:
        self._store = store
        self._handlers = dict(handlers)
        self._lease = lease
        self._poll = poll_seconds
        self._max_attempts = max_attempts
        self._wake = asyncio.Event()

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
            await self._store.finish(task.id, error={"code": "interrupted", "message": message})
            return True
        handler = self._handlers.get(task.kind)
        if handler is None:
            await self._store.finish(task.id, error={"code": "unknown_task_kind", "message": task.kind})
            return True

        async def report(percent: int) -> None:
            await self._store.progress(task.id, percent, self._lease)

        heartbeat = asyncio.create_task(self._heartbeat(task))
        try:
            result = await handler(task, report)
        except OperationError as error:
            await self._store.finish(task.id, error=error.body())
        except Exception as error:  # noqa: BLE001 — a task must end failed, never stay running
            _log.exception("task failed", extra={"task_id": str(task.id), "kind": task.kind})
            await self._store.finish(task.id, error={"code": "internal", "message": repr(error)[:500]})
        else:
            await self._store.finish(task.id, result=result)
        finally:
            heartbeat.cancel()
        return True

    async def _heartbeat(self, task: Task) -> None:
        while True:
            await asyncio.sleep(self._lease.total_seconds() / 3)
            current = await self._store.get(task.id)
            await self._store.progress(task.id, current.progress if current else 0, self._lease)
