"""LangGraph checkpoint housekeeping: clean-up for archived threads, and retention of idle ones.

Archiving a conversation writes a row into ``agent_checkpoint_cleanups`` in the same
transaction; an archived thread found with checkpoints again (written by a turn that had lost
its lease before the archive) owes one anew. ``clean_pending`` then deletes every checkpoint row
of each owed thread (and of no other) in one transaction per thread, and drops the owed row only
in that transaction: a crash or error midway rolls back and leaves the debt in place, to be paid
on the next pass.

Open-source LangGraph keeps every checkpoint of every thread forever. ``sweep`` keeps, for
threads idle longer than a given age, only the newest checkpoint of each namespace, with the
writes and blobs it references, so the thread can still be resumed.
"""

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta

from sqlalchemy import delete, select, text, update
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from sstools.convo.store.queries import existing_checkpoint_tables
from sstools.convo.store.tables import checkpoint_cleanups

_log = logging.getLogger(__name__)

# Called between the per-table deletes of one thread; tests use it to fail a clean-up midway.
StepHook = Callable[[str, str], Awaitable[None]]


async def _no_hook(thread_id: str, table: str) -> None:
    return None


@dataclass(frozen=True)
class CleanupPass:
    cleaned: int
    failed: int


@dataclass(frozen=True)
class SweepPass:
    threads: int
    checkpoints_deleted: int
    writes_deleted: int
    blobs_deleted: int


@dataclass(frozen=True)
class CheckpointVolume:
    rows: dict[str, int]
    bytes: dict[str, int]


class CheckpointJanitor:
    def __init__(self, engine: AsyncEngine, *, between_steps: StepHook = _no_hook) -> None:
        self._engine = engine
        self._between_steps = between_steps

    async def clean_pending(self, limit: int = 100) -> CleanupPass:
        async with self._engine.begin() as connection:
            if "checkpoints" in await existing_checkpoint_tables(connection):
                await connection.execute(text(_OWE_ARCHIVED_WITH_CHECKPOINTS))
            owed = list(
                (
                    await connection.execute(
                        select(checkpoint_cleanups.c.thread_id)
                        .order_by(checkpoint_cleanups.c.requested_at)
                        .limit(limit)
                    )
                ).scalars()
            )
        results = [await self.clean(thread_id) for thread_id in owed]
        cleaned = sum(results)
        failed = len(results) - cleaned
        return CleanupPass(cleaned, failed)

    async def clean(self, thread_id: str) -> bool:
        """Pay one owed clean-up now; on failure record the attempt and leave it owed."""
        try:
            await self._clean_thread(thread_id)
        except Exception as error:  # noqa: BLE001 — recorded, retried on the next pass
            _log.warning("checkpoint clean-up failed", extra={"thread_id": thread_id, "error": repr(error)})
            async with self._engine.begin() as connection:
                await connection.execute(
                    update(checkpoint_cleanups)
                    .where(checkpoint_cleanups.c.thread_id == thread_id)
                    .values(attempts=checkpoint_cleanups.c.attempts + 1, last_error=repr(error)[:500])
                )
            return False
        return True

    async def _clean_thread(self, thread_id: str) -> None:
        async with self._engine.begin() as connection:
            for table in await existing_checkpoint_tables(connection):
                await connection.execute(
                    text(f"DELETE FROM {table} WHERE thread_id = :thread"), {"thread": thread_id}
                )
                await self._between_steps(thread_id, table)
            await connection.execute(
                delete(checkpoint_cleanups).where(checkpoint_cleanups.c.thread_id == thread_id)
            )

    async def sweep(self, idle_for: timedelta) -> SweepPass:
        """Keep only the newest checkpoint (and what it needs) of threads idle for ``idle_for``."""
        async with self._engine.begin() as connection:
            tables = await existing_checkpoint_tables(connection)
            if "checkpoints" not in tables:
                return SweepPass(0, 0, 0, 0)
            await connection.execute(text(_LATEST_CHECKPOINTS))
            await connection.execute(text(_KEEP_ONLY_IDLE), {"idle_seconds": idle_for.total_seconds()})
            threads = await connection.scalar(text("SELECT count(DISTINCT thread_id) FROM sweep_latest"))
            writes = await _count(connection, _DELETE_OLD_WRITES) if "checkpoint_writes" in tables else 0
            blobs = (
                await _count(connection, _DELETE_UNREFERENCED_BLOBS) if "checkpoint_blobs" in tables else 0
            )
            checkpoints = await _count(connection, _DELETE_OLD_CHECKPOINTS)
        return SweepPass(int(threads or 0), checkpoints, writes, blobs)

    async def volume(self) -> CheckpointVolume:
        """Rows and on-disk bytes of each checkpoint table, for the metrics."""
        rows: dict[str, int] = {}
        sizes: dict[str, int] = {}
        async with self._engine.connect() as connection:
            for table in await existing_checkpoint_tables(connection):
                rows[table] = int(await connection.scalar(text(f"SELECT count(*) FROM {table}")) or 0)
                sizes[table] = int(
                    await connection.scalar(
                        text("SELECT pg_total_relation_size(to_regclass(:t))"), {"t": table}
                    )
                    or 0
                )
        return CheckpointVolume(rows, sizes)


# Index probes per archived conversation (the checkpoints' key starts with thread_id).
_OWE_ARCHIVED_WITH_CHECKPOINTS = """
INSERT INTO agent_checkpoint_cleanups (thread_id)
SELECT a.id::text FROM agent_conversations a
WHERE a.is_archived AND EXISTS (SELECT 1 FROM checkpoints c WHERE c.thread_id = a.id::text)
ON CONFLICT DO NOTHING
"""


async def _count(connection: AsyncConnection, statement: str) -> int:
    return (await connection.execute(text(statement))).rowcount or 0


# The newest checkpoint of every (thread, namespace) whose newest checkpoint is older than the
# idle age; checkpoint ids are time-ordered (uuid6), and "ts" is the checkpoint's own time.
_LATEST_CHECKPOINTS = """
CREATE TEMP TABLE sweep_latest ON COMMIT DROP AS
SELECT DISTINCT ON (thread_id, checkpoint_ns) thread_id, checkpoint_ns, checkpoint_id, checkpoint
FROM checkpoints
ORDER BY thread_id, checkpoint_ns, checkpoint_id DESC
"""
_KEEP_ONLY_IDLE = """
DELETE FROM sweep_latest
WHERE (checkpoint->>'ts')::timestamptz > now() - make_interval(secs => :idle_seconds)
"""
_DELETE_OLD_WRITES = """
DELETE FROM checkpoint_writes w USING sweep_latest l
WHERE w.thread_id = l.thread_id AND w.checkpoint_ns = l.checkpoint_ns AND w.checkpoint_id <> l.checkpoint_id
"""
# A blob is (thread, namespace, channel, version); the newest checkpoint names the versions it uses.
_DELETE_UNREFERENCED_BLOBS = """
DELETE FROM checkpoint_blobs b USING sweep_latest l
WHERE b.thread_id = l.thread_id AND b.checkpoint_ns = l.checkpoint_ns
  AND (l.checkpoint->'channel_versions'->>b.channel) IS DISTINCT FROM b.version
"""
_DELETE_OLD_CHECKPOINTS = """
DELETE FROM checkpoints c USING sweep_latest l
WHERE c.thread_id = l.thread_id AND c.checkpoint_ns = l.checkpoint_ns AND c.checkpoint_id <> l.checkpoint_id
"""
