"""Uploads: the files a user sends with a turn, kept here until the turn that used them ends.

An upload belongs to one user and one conversation; it is found only by its id (issued here, a
random UUID) together with both — anyone else's, another conversation's or an expired one is
simply not found. Each user has a bound on pending uploads (count and bytes), checked and taken
in one transaction under a per-user advisory lock, so parallel uploads cannot overrun it.
"""

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import delete, func, insert, select
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from sstools.convo.store.queries import ConversationArchived, ConversationNotFound
from sstools.convo.store.tables import conversations, uploads

# First key of the per-user advisory lock (pg_advisory_xact_lock(int, int)): "upl" in ASCII.
_LOCK_CLASS = 0x75706C


class UploadQuotaExceeded(Exception):
    """The user's pending uploads would pass the count or byte bound."""

    def __init__(self, max_files: int, max_bytes: int) -> None:
        super().__init__(f"at most {max_files} pending files and {max_bytes} bytes per user")
        self.max_files = max_files
        self.max_bytes = max_bytes


@dataclass(frozen=True)
class UploadLimits:
    max_files: int
    max_bytes: int
    ttl: timedelta


@dataclass(frozen=True)
class StoredUpload:
    id: uuid.UUID
    conversation_id: uuid.UUID
    name: str
    size_bytes: int
    expires_at: datetime


@dataclass(frozen=True)
class UploadContent:
    id: uuid.UUID
    name: str
    content: bytes


class UploadStore:
    def __init__(self, engine: AsyncEngine, limits: UploadLimits) -> None:
        self._engine = engine
        self.limits = limits

    async def check_conversation(self, owner_id: str, conversation_id: uuid.UUID) -> None:
        """Raises ConversationNotFound when the conversation exists and is someone else's, and
        ConversationArchived when it is archived; one not created yet is fine (the page makes
        the id before the first message)."""
        async with self._engine.connect() as connection:
            await _open_to(connection, owner_id, conversation_id)

    async def check_quota(self, owner_id: str, size_bytes: int) -> None:
        """An early answer before the body is read; ``add`` decides again, atomically."""
        async with self._engine.connect() as connection:
            count, total = await self._pending(connection, owner_id)
        self._fits(count, total, size_bytes)

    async def add(self, owner_id: str, conversation_id: uuid.UUID, name: str, content: bytes) -> StoredUpload:
        async with self._engine.begin() as connection:
            await connection.execute(select(func.pg_advisory_xact_lock(_LOCK_CLASS, func.hashtext(owner_id))))
            await _open_to(connection, owner_id, conversation_id)
            count, total = await self._pending(connection, owner_id)
            self._fits(count, total, len(content))
            row = (
                (
                    await connection.execute(
                        insert(uploads)
                        .values(
                            id=uuid.uuid4(),
                            owner_id=owner_id,
                            conversation_id=conversation_id,
                            name=name,
                            size_bytes=len(content),
                            content=content,
                            expires_at=func.now() + self.limits.ttl,
                        )
                        .returning(
                            uploads.c.id,
                            uploads.c.conversation_id,
                            uploads.c.name,
                            uploads.c.size_bytes,
                            uploads.c.expires_at,
                        )
                    )
                )
                .mappings()
                .one()
            )
        return StoredUpload(**row)

    async def read(
        self, owner_id: str, conversation_id: uuid.UUID, upload_id: uuid.UUID
    ) -> UploadContent | None:
        """The upload, if it is this user's, for this conversation, and not expired."""
        async with self._engine.connect() as connection:
            row = (
                (
                    await connection.execute(
                        select(uploads.c.id, uploads.c.name, uploads.c.content).where(
                            uploads.c.id == upload_id,
                            uploads.c.owner_id == owner_id,
                            uploads.c.conversation_id == conversation_id,
                            uploads.c.expires_at > func.now(),
                        )
                    )
                )
                .mappings()
                .one_or_none()
            )
        return UploadContent(row["id"], row["name"], bytes(row["content"])) if row else None

    async def delete(self, owner_id: str, conversation_id: uuid.UUID, upload_ids: Sequence[uuid.UUID]) -> int:
        if not upload_ids:
            return 0
        async with self._engine.begin() as connection:
            result = await connection.execute(
                delete(uploads).where(
                    uploads.c.id.in_(list(upload_ids)),
                    uploads.c.owner_id == owner_id,
                    uploads.c.conversation_id == conversation_id,
                )
            )
        return int(result.rowcount)

    async def sweep(self) -> int:
        """Removes every expired upload; returns how many."""
        async with self._engine.begin() as connection:
            result = await connection.execute(delete(uploads).where(uploads.c.expires_at <= func.now()))
        return int(result.rowcount)

    @staticmethod
    async def _pending(connection: AsyncConnection, owner_id: str) -> tuple[int, int]:
        row = (
            await connection.execute(
                select(func.count(), func.coalesce(func.sum(uploads.c.size_bytes), 0)).where(
                    uploads.c.owner_id == owner_id, uploads.c.expires_at > func.now()
                )
            )
        ).one()
        return int(row[0]), int(row[1])

    def _fits(self, count: int, total: int, size_bytes: int) -> None:
        if count + 1 > self.limits.max_files or total + size_bytes > self.limits.max_bytes:
            raise UploadQuotaExceeded(self.limits.max_files, self.limits.max_bytes)


async def _open_to(connection: AsyncConnection, owner_id: str, conversation_id: uuid.UUID) -> None:
    """The conversation takes an upload of ``owner_id``'s: it is theirs (or not created yet) and
    not archived."""
    found = (
        await connection.execute(
            select(conversations.c.owner_id, conversations.c.is_archived).where(
                conversations.c.id == conversation_id
            )
        )
    ).one_or_none()
    if found is None:
        return
    if found.owner_id != owner_id:
        raise ConversationNotFound(str(conversation_id))
    if found.is_archived:
        raise ConversationArchived(str(conversation_id))
