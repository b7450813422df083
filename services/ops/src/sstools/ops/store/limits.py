"""Counters behind the sign-in limits, in PostgreSQL so that every ops replica sees the same ones.

A *backoff* key counts attempts that failed (a user name, a client address, a service client):
past its free ones, each failure blocks the key for a delay that doubles, up to a cap, and a
blocked key is refused without looking at the password. An attempt is counted *before* the
password is checked — in the same statement that checks the block, under the row's lock — so a
burst of parallel attempts gets no more tries than a sequence would; a right password then
clears the count. A *rate* key counts events in a fixed window (service tokens issued).
"""

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta

from sqlalchemy import Interval, case, delete, func, literal, or_, select, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from sstools.common.windows import count_in_window, whole_seconds
from sstools.ops.store.tables import limits


@dataclass(frozen=True)
class Backoff:
    free: int
    first_delay: timedelta
    max_delay: timedelta
    memory: timedelta
    """Failures are forgotten after this long without a new one."""

    def delay(self, failures: int) -> timedelta | None:
        """The block earned by the ``failures``-th failure in a row (None while still free)."""
        beyond = failures - self.free
        if beyond <= 0:
            return None
        # compared in seconds: a timedelta of first_delay * 2**beyond overflows long before
        # the count stops growing
        seconds = self.first_delay.total_seconds() * 2.0 ** min(beyond - 1, 64)
        return timedelta(seconds=min(seconds, self.max_delay.total_seconds()))


@dataclass(frozen=True)
class Attempt:
    """What :meth:`Limits.attempt` decided: refused for ``retry_after`` seconds, or counted."""

    retry_after: int | None
    failures_before: int
    """The most failures any key had before this attempt (within its memory)."""


class Limits:
    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine

    async def attempt(self, keys: Mapping[str, Backoff]) -> Attempt:
        """Count one attempt against every key, or none if any key is blocked."""
        async with self._engine.connect() as connection:
            failures_before = 0
            for key in sorted(keys):  # one lock order for every caller: no deadlock
                count = await self._count_attempt(connection, key, keys[key])
                if count is None:
                    await connection.rollback()  # a refused attempt counts against no key
                    return Attempt(await self._retry_after(connection, list(keys)), failures_before)
                failures_before = max(failures_before, count - 1)
                delay = keys[key].delay(count)
                if delay is not None:
                    await connection.execute(
                        update(limits)
                        .where(limits.c.key == key)
                        .values(blocked_until=func.now() + literal(delay, Interval))
                    )
            await connection.commit()
            return Attempt(None, failures_before)

    async def clear(self, key: str) -> None:
        """The attempt succeeded where it proves something (the user's password): start over."""
        async with self._engine.begin() as connection:
            await connection.execute(delete(limits).where(limits.c.key == key))

    async def refund(self, *keys: str) -> None:
        """The attempt counted on ``keys`` did not fail after all (a right password from a shared
        address, a check that never ran): take it back."""
        async with self._engine.begin() as connection:
            await connection.execute(
                update(limits)
                .where(limits.c.key.in_(keys))
                .values(count=func.greatest(limits.c.count - 1, 0), blocked_until=None)
            )

    async def hit(self, key: str, limit: int, window: timedelta) -> int | None:
        """Count one event in ``key``'s current window; seconds to wait if it is over ``limit``."""
        async with self._engine.begin() as connection:
            counted = await count_in_window(connection, limits, key, window)
        return counted.retry_after if counted.over(limit) else None

    async def sweep(self, older_than: timedelta) -> int:
        """Forget keys with no event for ``older_than`` and no block left; how many went."""
        async with self._engine.begin() as connection:
            result = await connection.execute(
                delete(limits).where(
                    limits.c.since < func.now() - literal(older_than, Interval),
                    or_(limits.c.blocked_until.is_(None), limits.c.blocked_until < func.now()),
                )
            )
        return result.rowcount

    @staticmethod
    async def _count_attempt(connection: AsyncConnection, key: str, backoff: Backoff) -> int | None:
        """The key's failures counting this attempt; None if it is blocked (nothing counted)."""
        forgotten = limits.c.since <= func.now() - literal(backoff.memory, Interval)
        statement = (
            insert(limits)
            .values(key=key, count=1, since=func.now())
            .on_conflict_do_update(
                index_elements=[limits.c.key],
                set_={"count": case((forgotten, 1), else_=limits.c.count + 1), "since": func.now()},
                where=or_(limits.c.blocked_until.is_(None), limits.c.blocked_until <= func.now()),
            )
            .returning(limits.c.count)
        )
        count: int | None = (await connection.execute(statement)).scalar()
        return count

    @staticmethod
    async def _retry_after(connection: AsyncConnection, keys: list[str]) -> int:
        remaining = await connection.scalar(
            select(func.max(func.extract("epoch", limits.c.blocked_until - func.now()))).where(
                limits.c.key.in_(keys)
            )
        )
        return whole_seconds(float(remaining or 0))
