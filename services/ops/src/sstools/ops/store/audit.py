"""Ops' own audit trail: both identities of every decision it makes."""

import uuid
from typing import Any

from sqlalchemy import insert
from sqlalchemy.ext.asyncio import AsyncEngine

from sstools.ops.store.tables import audit


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
