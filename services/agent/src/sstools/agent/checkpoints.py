"""LangGraph's PostgreSQL checkpointer on a connection pool. Its tables are created (or
migrated) by ``setup()`` once the database answers; until then the agent is not ready, and
keeps trying rather than exiting, so it can start before its database does."""

import asyncio
import contextlib
import logging
from typing import Any

from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from psycopg import AsyncConnection, OperationalError
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool, PoolTimeout

_log = logging.getLogger(__name__)


class CheckpointsNotReady(RuntimeError):
    """The checkpoint database has not answered yet."""


class PooledSaver(AsyncPostgresSaver):
    """LangGraph's saver, without the lock it takes around every operation.

    The lock guards the one connection the saver may be given; on a pool each operation takes a
    connection of its own, and the lock only made every conversation's checkpoint reads and
    writes wait in one queue (at 20 conversations, most of a turn's time in the graph).
    """

    def __init__(self, pool: AsyncConnectionPool[Any]) -> None:
        super().__init__(pool)
        self.lock = contextlib.nullcontext()  # type: ignore[assignment]  # used as `async with`


class Checkpoints:
    """The pool and the saver belong to the event loop, so both are made in :meth:`prepare`."""

    def __init__(self, database_url: str, *, max_connections: int = 10) -> None:
        self._database_url = database_url
        self._max_connections = max_connections
        self._pool: AsyncConnectionPool[Any] | None = None
        self._saver: PooledSaver | None = None
        self._ready = False

    @property
    def saver(self) -> AsyncPostgresSaver:
        if self._saver is None or not self._ready:
            raise CheckpointsNotReady("the checkpoint database has not answered yet")
        return self._saver

    async def prepare(self, retry_seconds: float = 2.0) -> None:
        """Open the pool and set the tables up, retrying while the database is away."""
        self._pool = AsyncConnectionPool(
            self._database_url,
            open=False,
            max_size=self._max_connections,
            kwargs={"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row},
        )
        self._saver = PooledSaver(self._pool)
        while True:
            try:
                await self._pool.open(wait=True, timeout=10)
                await self._saver.setup()
            except (OperationalError, PoolTimeout) as error:
                _log.warning("checkpoint database not reachable yet", extra={"error": repr(error)[:300]})
                await asyncio.sleep(retry_seconds)
                continue
            self._ready = True
            _log.info("checkpoint tables ready")
            return

    async def check(self) -> None:
        """Readiness: set up, and the database answers now."""
        if not self._ready or self._pool is None:
            raise CheckpointsNotReady("checkpoint tables are not set up yet")
        async with self._pool.connection(timeout=2) as connection:
            await connection.execute("SELECT 1")

    async def close(self) -> None:
        if self._pool is not None:
            await self._pool.close()


class CheckpointSchema:
    """``sstools-agent migrate``: LangGraph's checkpoint tables set up ahead of a rollout, as an
    init container or a Helm hook runs it (the service also does it at start)."""

    def upgrade(self, database_url: str) -> None:
        async def setup() -> None:
            async with await AsyncConnection.connect(
                database_url, autocommit=True, row_factory=dict_row
            ) as connection:
                await AsyncPostgresSaver(connection).setup()

        asyncio.run(setup())

    def head(self) -> str:
        return f"langgraph-checkpoint-postgres v{len(AsyncPostgresSaver.MIGRATIONS) - 1}"
