"""Idempotency keys: the first request with a key runs; a repeat gets the first answer back.

The key is the one the agent's gate derives for a call (its conversation, the model's answer,
the call and the card confirmed), scoped by user and operation. A repeat that arrives while the
first is still running is told so (it must not run the operation a second time); a key reused
for a different request is refused. A first attempt that failed releases its key. A key is kept
for the retention only: past it, the same key is a new request (a retry comes within seconds,
and nothing should answer a request with a stale result days later), and the sweep forgets it.
"""

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from sqlalchemy import delete, func, select, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncEngine

from sstools.ops.store.tables import idempotency


@dataclass(frozen=True)
class Claimed:
    """This request holds the key: run the operation, then :meth:`IdempotencyStore.complete`."""


@dataclass(frozen=True)
class Replay:
    status_code: int
    response: Any


@dataclass(frozen=True)
class InProgress:
    """The first request with this key has not finished."""


@dataclass(frozen=True)
class Mismatch:
    """The key was used before for a different request."""


Outcome = Claimed | Replay | InProgress | Mismatch


class IdempotencyStore:
    def __init__(self, engine: AsyncEngine, retention: timedelta) -> None:
        self._engine = engine
        self._retention = retention

    def _expired(self) -> Any:
        return idempotency.c.created_at < func.now() - self._retention

    async def claim(self, username: str, operation: str, key: str, fingerprint: str) -> Outcome:
        async with self._engine.begin() as connection:
            await connection.execute(
                delete(idempotency).where(
                    idempotency.c.username == username,
                    idempotency.c.operation == operation,
                    idempotency.c.key == key,
                    self._expired(),
                )
            )
            inserted = await connection.execute(
                insert(idempotency)
                .values(username=username, operation=operation, key=key, fingerprint=fingerprint)
                .on_conflict_do_nothing()
                .returning(idempotency.c.key)
            )
            if inserted.first() is not None:
                return Claimed()
            row = (
                (
                    await connection.execute(
                        select(idempotency).where(
                            idempotency.c.username == username,
                            idempotency.c.operation == operation,
                            idempotency.c.key == key,
                        )
                    )
                )
                .mappings()
                .one()
            )
        if row["fingerprint"] != fingerprint:
            return Mismatch()
        if row["status_code"] is None:
            return InProgress()
        return Replay(row["status_code"], row["response"])

    async def complete(
        self, username: str, operation: str, key: str, status_code: int, response: Any
    ) -> None:
        async with self._engine.begin() as connection:
            await connection.execute(
                update(idempotency)
                .where(
                    idempotency.c.username == username,
                    idempotency.c.operation == operation,
                    idempotency.c.key == key,
                )
                .values(status_code=status_code, response=response)
            )

    async def release(self, username: str, operation: str, key: str) -> None:
        async with self._engine.begin() as connection:
            await connection.execute(
                delete(idempotency).where(
                    idempotency.c.username == username,
                    idempotency.c.operation == operation,
                    idempotency.c.key == key,
                )
            )

    async def sweep(self) -> int:
        """Forget every key past the retention; how many there were."""
        async with self._engine.begin() as connection:
            return (await connection.execute(delete(idempotency).where(self._expired()))).rowcount
