"""What more than one group of routes speaks: the Idempotency-Key header, and a task as it is
answered (an operation started, a statement followed, a status asked for)."""

from datetime import datetime
from typing import Annotated, Any

from fastapi import Header
from pydantic import BaseModel

from sstools.ops.store.tasks import Task

IdempotencyKey = Annotated[str | None, Header(alias="Idempotency-Key", max_length=200)]


class TaskOut(BaseModel):
    id: str
    kind: str
    env_id: str
    status: str
    progress: int
    result: dict[str, Any] | None
    error: dict[str, Any] | None
    created_by: str
    created_at: datetime
    updated_at: datetime

    @classmethod
    def of(cls, task: Task) -> "TaskOut":
        return cls(
            id=str(task.id),
            kind=task.kind,
            env_id=task.env_id,
            status=task.status.value,
            progress=task.progress,
            result=task.result,
            error=task.error,
            created_by=task.created_by,
            created_at=task.created_at,
            updated_at=task.updated_at,
        )
