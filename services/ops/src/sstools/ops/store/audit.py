"""Ops' own audit trail: both identities of every decision it makes; read back by admins."""

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, insert, select
from sqlalchemy.engine import RowMapping
from sqlalchemy.ext.asyncio import AsyncEngine

from sstools.common.paging import Page, newest_first, newest_first_page
from sstools.ops.store.tables import audit


@dataclass(frozen=True)
class AuditFilter:
    """Which records an admin reads: each field left None matches every record."""

    user: str | None = None
    action: str | None = None
    env: str | None = None
    outcome: str | None = None
    since: datetime | None = None  # inclusive
    until: datetime | None = None  # exclusive


class AuditLog:
    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine

    async def record(
        self,
        *,
        service: str,
        username: str,
        action: str,
        target_env: str,
        outcome: str,
        detail: dict[str, Any],
    ) -> None:
        async with self._engine.begin() as connection:
            await connection.execute(
                insert(audit).values(
                    id=uuid.uuid4(),
                    service=service,
                    username=username,
                    action=action,
                    target_env=target_env,
                    outcome=outcome,
                    detail=detail,
                )
            )

    async def page(self, wanted: AuditFilter, *, limit: int, cursor: str | None = None) -> Page:
        """The records ``wanted`` names, newest first, ``limit`` from past the one ``cursor`` names."""
        query = newest_first(
            select(audit).where(*_conditions(wanted)), audit.c.at, audit.c.id, limit=limit, cursor=cursor
        )
        async with self._engine.connect() as connection:
            rows: list[RowMapping] = list((await connection.execute(query)).mappings())
        return newest_first_page(rows, audit.c.at, audit.c.id, limit=limit)


def _conditions(wanted: AuditFilter) -> list[ColumnElement[bool]]:
    equal = (
        (audit.c.username, wanted.user),
        (audit.c.action, wanted.action),
        (audit.c.target_env, wanted.env),
        (audit.c.outcome, wanted.outcome),
    )
    conditions = [column == value for column, value in equal if value is not None]
    if wanted.since is not None:
        conditions.append(audit.c.at >= wanted.since)
    if wanted.until is not None:
        conditions.append(audit.c.at < wanted.until)
    return conditions
