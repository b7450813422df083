"""Records of backup archives (the zips themselves live in the backup folder)."""

import uuid
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import insert, select
from sqlalchemy.engine import RowMapping
from sqlalchemy.ext.asyncio import AsyncEngine

from sstools.ops.store.tables import backups


@dataclass(frozen=True)
class Backup:
    id: uuid.UUID
    env_id: str
    file_name: str
    dashboards: int
    size_bytes: int
    sha256: str
    created_by: str
    created_at: datetime

    @classmethod
    def from_row(cls, row: RowMapping) -> "Backup":
        return cls(**{column: row[column] for column in cls.__dataclass_fields__})


class BackupStore:
    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine

    async def add(
        self, env_id: str, file_name: str, dashboards: int, size_bytes: int, sha256: str, created_by: str
    ) -> Backup:
        async with self._engine.begin() as connection:
            row = (
                (
                    await connection.execute(
                        insert(backups)
                        .values(
                            id=uuid.uuid4(),
                            env_id=env_id,
                            file_name=file_name,
                            dashboards=dashboards,
                            size_bytes=size_bytes,
                            sha256=sha256,
                            created_by=created_by,
                        )
                        .returning(backups)
                    )
                )
                .mappings()
                .one()
            )
        return Backup.from_row(row)

    async def get(self, backup_id: uuid.UUID) -> Backup | None:
        async with self._engine.connect() as connection:
            row = (
                (await connection.execute(select(backups).where(backups.c.id == backup_id)))
                .mappings()
                .first()
            )
        return Backup.from_row(row) if row else None

    async def list(self, env_id: str, limit: int = 50) -> list[Backup]:
        async with self._engine.connect() as connection:
            rows = (
                (
                    await connection.execute(
                        select(backups)
                        .where(backups.c.env_id == env_id)
                        .order_by(backups.c.created_at.desc())
                        .limit(limit)
                    )
                )
                .mappings()
                .all()
            )
        return [Backup.from_row(row) for row in rows]
