"""Tasks: long operations persisted so that a restart of ops neither loses nor repeats them
blindly. A worker claims a task with a lease; while it works it renews the lease; a task whose
lease ran out (its ops died) is claimed again, up to ``max_attempts``.
"""

import uuid
from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from sqlalchemy import delete, func, insert, or_, select, update
from sqlalchemy.engine import RowMapping
from sqlalchemy.ext.asyncio import AsyncEngine

from sstools.ops.store.tables import tasks


class TaskStatus(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    SUCCESS = "success"
    FAILED = "failed"


@dataclass(frozen=True)
class Task:
    id: uuid.UUID
    kind: str
    env_id: str
    status: TaskStatus
    progress: int
    params: dict[str, Any]
    result: dict[str, Any] | None
    error: dict[str, Any] | None
    created_by: str
    attempts: int
    created_at: datetime
    updated_at: datetime

    @classmethod
    def from_row(cls, row: RowMapping) -> "Task":
        return cls(
            id=row["id"],
            kind=row["kind"],
            env_id=row["env_id"],
            status=TaskStatus(row["status"]),
            progress=row["progress"],
            params=row["params"],
            result=row["result"],
            error=row["error"],
            created_by=row["created_by"],
            attempts=row["attempts"],
            created_at=row["created_at"],
            updated_at=row["updated_at"],
        )


class TaskStore:
    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine

    async def submit(self, kind: str, env_id: str, params: dict[str, Any], created_by: str) -> Task:
        """A task queued for the next worker free."""
        return await self._insert(kind=kind, env_id=env_id, params=params, created_by=created_by)

    async def start(
        self, kind: str, env_id: str, params: dict[str, Any], created_by: str, lease: timedelta
    ) -> Task:
        """A task taken at once by the ops that stores it (it runs there, not in a worker's
        turn); another claims it only if this one's lease runs out."""
        return await self._insert(
            kind=kind,
            env_id=env_id,
            params=params,
            created_by=created_by,
            status=TaskStatus.RUNNING,
            attempts=1,
            lease_until=func.now() + lease,
        )

    async def _insert(self, **values: Any) -> Task:
        async with self._engine.begin() as connection:
            row = (
                (await connection.execute(insert(tasks).values(id=uuid.uuid4(), **values).returning(tasks)))
                .mappings()
                .one()
            )
        return Task.from_row(row)

    async def get(self, task_id: uuid.UUID) -> Task | None:
        async with self._engine.connect() as connection:
            row = (await connection.execute(select(tasks).where(tasks.c.id == task_id))).mappings().first()
        return Task.from_row(row) if row else None

    async def claim(self, lease: timedelta) -> Task | None:
        """Take the oldest queued task, or one whose worker's lease ran out."""
        now = func.now()
        candidate = (
            select(tasks.c.id)
            .where(
                or_(
                    tasks.c.status == TaskStatus.QUEUED,
                    (tasks.c.status == TaskStatus.RUNNING) & (tasks.c.lease_until < now),
                )
            )
            .order_by(tasks.c.created_at)
            .limit(1)
            .with_for_update(skip_locked=True)
            .scalar_subquery()
        )
        async with self._engine.begin() as connection:
            row = (
                (
                    await connection.execute(
                        update(tasks)
                        .where(tasks.c.id == candidate)
                        .values(
                            status=TaskStatus.RUNNING,
                            attempts=tasks.c.attempts + 1,
                            lease_until=now + lease,
                            updated_at=now,
                        )
                        .returning(tasks)
                    )
                )
                .mappings()
                .first()
            )
        return Task.from_row(row) if row else None

    async def progress(self, task_id: uuid.UUID, percent: int, lease: timedelta) -> None:
        """Record progress and renew the lease of a task this worker runs."""
        async with self._engine.begin() as connection:
            await connection.execute(
                update(tasks)
                .where(tasks.c.id == task_id, tasks.c.status == TaskStatus.RUNNING)
                .values(
                    progress=max(0, min(percent, 100)), lease_until=func.now() + lease, updated_at=func.now()
                )
            )

    async def finish(
        self, task_id: uuid.UUID, *, result: dict[str, Any] | None = None, error: dict[str, Any] | None = None
    ) -> TaskStatus:
        """End the task: failed with ``error``, else a success with ``result``; its final status."""
        status = TaskStatus.FAILED if error is not None else TaskStatus.SUCCESS
        values: dict[str, Any] = {"status": status, "result": result, "error": error, "lease_until": None}
        if status is TaskStatus.SUCCESS:
            values["progress"] = 100
        async with self._engine.begin() as connection:
            await connection.execute(
                update(tasks).where(tasks.c.id == task_id).values(updated_at=func.now(), **values)
            )
        return status

    async def sweep(self, kinds: Collection[str], retention: timedelta) -> int:
        """Forget the ended tasks of ``kinds`` last changed longer than ``retention`` ago (a read's
        result: rows, a report — kept while someone may still follow it); how many there were."""
        async with self._engine.begin() as connection:
            swept = await connection.execute(
                delete(tasks).where(
                    tasks.c.kind.in_(list(kinds)),
                    tasks.c.status.in_([TaskStatus.SUCCESS, TaskStatus.FAILED]),
                    tasks.c.updated_at < func.now() - retention,
                )
            )
        return swept.rowcount

    async def latest(self, kind: str, env_id: str, limit: int = 20) -> list[Task]:
        async with self._engine.connect() as connection:
            rows = (
                (
                    await connection.execute(
                        select(tasks)
                        .where(tasks.c.kind == kind, tasks.c.env_id == env_id)
                        .order_by(tasks.c.created_at.desc())
                        .limit(limit)
                    )
                )
                .mappings()
                .all()
            )
        return [Task.from_row(row) for row in rows]
