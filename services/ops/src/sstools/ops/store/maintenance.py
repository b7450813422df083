"""Maintenance windows: at most one open per environment (a partial unique index says so)."""

import uuid
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func, insert, select, update
from sqlalchemy.engine import RowMapping
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine

from sstools.ops.store.tables import maintenance


class AlreadyUnderMaintenance(Exception):
    def __init__(self, window: "Window") -> None:
        super().__init__(f"{window.env_id} is already under maintenance: {window.reason}")
        self.window = window


@dataclass(frozen=True)
class Window:
    id: uuid.UUID
    env_id: str
    reason: str
    started_by: str
    started_at: datetime
    ended_by: str | None
    ended_at: datetime | None

    @classmethod
    def from_row(cls, row: RowMapping) -> "Window":
        return cls(**{column: row[column] for column in cls.__dataclass_fields__})


class MaintenanceStore:
    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine

    async def start(self, env_id: str, reason: str, username: str) -> Window:
        try:
            async with self._engine.begin() as connection:
                row = (
                    (
                        await connection.execute(
                            insert(maintenance)
                            .values(id=uuid.uuid4(), env_id=env_id, reason=reason, started_by=username)
                            .returning(maintenance)
                        )
                    )
                    .mappings()
                    .one()
                )
        except IntegrityError:
            current = await self.open(env_id)
            if current is None:  # it ended between the two statements: try once more
                return await self.start(env_id, reason, username)
            raise AlreadyUnderMaintenance(current) from None
        return Window.from_row(row)

    async def end(self, env_id: str, username: str) -> Window | None:
        async with self._engine.begin() as connection:
            row = (
                (
                    await connection.execute(
                        update(maintenance)
                        .where(maintenance.c.env_id == env_id, maintenance.c.ended_at.is_(None))
                        .values(ended_at=func.now(), ended_by=username)
                        .returning(maintenance)
                    )
                )
                .mappings()
                .first()
            )
        return Window.from_row(row) if row else None

    async def open(self, env_id: str) -> Window | None:
        async with self._engine.connect() as connection:
            row = (
                (
                    await connection.execute(
                        select(maintenance).where(
                            maintenance.c.env_id == env_id, maintenance.c.ended_at.is_(None)
                        )
                    )
                )
                .mappings()
                .first()
            )
        return Window.from_row(row) if row else None

    async def list(self, env_id: str | None = None, limit: int = 50) -> list[Window]:
        query = select(maintenance).order_by(maintenance.c.started_at.desc()).limit(limit)
        if env_id is not None:
            query = query.where(maintenance.c.env_id == env_id)
        async with self._engine.connect() as connection:
            rows = (await connection.execute(query)).mappings().all()
        return [Window.from_row(row) for row in rows]
