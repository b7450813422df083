"""Every query of the convo service, over one async engine.

A conversation is visible only to its owner: each call names the user it acts for, and a
conversation of someone else is reported as not found, exactly like one that does not exist.
The audit trail is read whole, and only by admins: the REST edge checks the caller's role.
"""

import contextlib
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, ClassVar

from sqlalchemy import ColumnElement, delete, func, insert, or_, select, text, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.engine import RowMapping
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from sstools.common.grpc_errors import CONVERSATION_ARCHIVED, CONVERSATION_BUSY
from sstools.common.paging import (
    Page,
    decode_cursor,
    encode_cursor,
    newest_first,
    newest_first_page,
    substring_pattern,
)
from sstools.common.windows import count_in_window
from sstools.convo.store.tables import (
    audit,
    checkpoint_cleanups,
    conversations,
    leases,
    messages,
    turn_counts,
)

TITLE_LENGTH = 60
# LangGraph's checkpoint tables (langgraph-checkpoint-postgres), keyed by thread_id, which is
# the conversation id. Children first, so a foreign key added upstream would not bite.
CHECKPOINT_TABLES = ("checkpoint_writes", "checkpoint_blobs", "checkpoints")


class ConversationNotFound(LookupError):
    """No conversation with that id belongs to that user."""


class ConversationRefused(Exception):
    """The caller's conversation refuses this action now; ``code`` and ``message`` say why, as
    every edge says it (gRPC metadata, REST, the agent's stream)."""

    code: ClassVar[str]
    message: ClassVar[str]


class ConversationArchived(ConversationRefused):
    """The conversation is archived: closed to messages and turns until its owner restores it."""

    code = CONVERSATION_ARCHIVED
    message = "the conversation is archived: restore it to continue"


class ConversationBusy(ConversationRefused):
    """A turn holds the conversation's lease now: it cannot be archived under that turn."""

    code = CONVERSATION_BUSY
    message = "the conversation is answering a message: archive it once the answer ends"


@dataclass(frozen=True)
class NewMessage:
    client_message_id: str
    role: str
    content: str
    metadata: dict[str, Any] = field(default_factory=dict)
    partial: bool = False


@dataclass(frozen=True)
class AuditFilter:
    """Which audit records an admin reads: each field left None matches every record."""

    user: str | None = None
    tool: str | None = None
    env: str | None = None
    decision: str | None = None
    outcome: str | None = None
    since: datetime | None = None  # inclusive
    until: datetime | None = None  # exclusive


@dataclass(frozen=True)
class TurnBudget:
    """At most ``limit`` turns of a user per ``window``."""

    limit: int
    window: timedelta


@dataclass(frozen=True)
class LeaseState:
    conversation_id: uuid.UUID
    holder: str  # empty, as is expires_at, for a turn over its budget: no lease was looked at
    expires_at: datetime | None
    acquired: bool
    over_budget_wait: int | None = None  # a turn over its budget: seconds until its window ends


@dataclass(frozen=True)
class TurnEnded:
    released: bool  # the holder still had the lease
    audit_id: uuid.UUID
    answer_refused: str | None  # why the answer was not kept (``refusal_code``'s), or None


def make_title(first_message: str) -> str:
    return " ".join(first_message.split())[:TITLE_LENGTH]


class ConversationStore:
    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine

    async def create(
        self, owner_id: str, first_message: str = "", conversation_id: uuid.UUID | None = None
    ) -> RowMapping:
        """A new conversation; creating one that exists (a retry) returns it to its owner."""
        new_id = conversation_id or uuid.uuid4()
        async with self._engine.begin() as connection:
            created = await self._insert(connection, owner_id, new_id, first_message)
            if created is None:  # the id exists: the owner gets it back, anyone else is told nothing
                return await self._owned(connection, owner_id, new_id)
            return created

    async def get(self, owner_id: str, conversation_id: uuid.UUID) -> RowMapping:
        async with self._engine.connect() as connection:
            return await self._owned(connection, owner_id, conversation_id)

    async def listing(
        self, owner_id: str, *, archived: bool, search: str = "", limit: int = 20, cursor: str | None = None
    ) -> Page:
        query = select(conversations).where(
            conversations.c.owner_id == owner_id, conversations.c.is_archived == archived
        )
        if search:
            pattern = substring_pattern(search)
            said = select(messages.c.id).where(
                messages.c.conversation_id == conversations.c.id,
                messages.c.content.ilike(pattern, escape="\\"),
            )
            # by its title or by a word of any message in it
            query = query.where(or_(conversations.c.title.ilike(pattern, escape="\\"), said.exists()))
        at, key = conversations.c.updated_at, conversations.c.id
        query = newest_first(query, at, key, limit=limit, cursor=cursor)
        async with self._engine.connect() as connection:
            rows = list((await connection.execute(query)).mappings())
        return newest_first_page(rows, at, key, limit=limit)

    async def history(
        self, owner_id: str, conversation_id: uuid.UUID, *, limit: int = 50, cursor: str | None = None
    ) -> Page:
        after = int(decode_cursor(cursor, 1)[0]) if cursor else 0
        async with self._engine.connect() as connection:
            await self._owned(connection, owner_id, conversation_id)
            query = (
                select(messages)
                .where(messages.c.conversation_id == conversation_id, messages.c.seq > after)
                .order_by(messages.c.seq)
                .limit(limit + 1)
            )
            rows = list((await connection.execute(query)).mappings())
        more = len(rows) > limit
        rows = rows[:limit]
        return Page(rows, encode_cursor(rows[-1]["seq"]) if more and rows else None)

    async def append(
        self, owner_id: str, conversation_id: uuid.UUID, new: Sequence[NewMessage]
    ) -> list[RowMapping]:
        """Store messages in order after the existing ones; a client_message_id stored before is
        returned as it was, not stored twice. Concurrent appends to one conversation queue on
        its row lock, so the order has no gaps and no duplicates."""
        async with self._engine.begin() as connection:
            return await self._append(connection, owner_id, conversation_id, new)

    async def end_turn(
        self,
        owner_id: str,
        conversation_id: uuid.UUID | None,
        *,
        holder: str,
        answer: NewMessage | None,
        audit_values: dict[str, Any],
    ) -> TurnEnded:
        """A command's end in one transaction: its answer appended (unless the conversation
        refuses it now: said, not raised), its audit record kept as ``owner_id``'s, the holder's
        lease given back.
        The conversation's row lock comes before the lease's, as when a lease is taken."""
        refused = None
        async with self._engine.begin() as connection:
            if answer is not None and conversation_id is not None:
                try:
                    await self._append(connection, owner_id, conversation_id, [answer])
                except (ConversationNotFound, ConversationRefused) as error:  # raised before any write
                    refused = refusal_code(error)
            audit_id = await self._insert_audit(connection, {**audit_values, "user_id": owner_id})
            released = False
            if holder and conversation_id is not None:
                released = await self._release(connection, conversation_id, holder)
        return TurnEnded(released, audit_id, refused)

    async def _append(
        self,
        connection: AsyncConnection,
        owner_id: str,
        conversation_id: uuid.UUID,
        new: Sequence[NewMessage],
    ) -> list[RowMapping]:
        conversation = await self._owned(connection, owner_id, conversation_id, lock=True, open_only=True)
        client_ids = [message.client_message_id for message in new]
        existing = {
            row["client_message_id"]: row
            for row in (
                await connection.execute(
                    select(messages).where(
                        messages.c.conversation_id == conversation_id,
                        messages.c.client_message_id.in_(client_ids),
                    )
                )
            ).mappings()
        }
        fresh = [
            message
            for message in dict((m.client_message_id, m) for m in new).values()
            if message.client_message_id not in existing
        ]
        count = conversation["message_count"]
        stored: dict[str, RowMapping] = dict(existing)
        if fresh:
            rows = [
                {
                    "id": uuid.uuid4(),
                    "conversation_id": conversation_id,
                    "seq": count + number,
                    "client_message_id": message.client_message_id,
                    "role": message.role,
                    "content": message.content,
                    "metadata": message.metadata,
                    "partial": message.partial,
                }
                for number, message in enumerate(fresh, 1)
            ]
            inserted = await connection.execute(insert(messages).returning(messages), rows)
            stored.update({row["client_message_id"]: row for row in inserted.mappings()})
            changes: dict[str, Any] = {
                "message_count": count + len(fresh),
                "updated_at": func.now(),
                "last_message_at": func.now(),
            }
            first_user_text = next((m.content for m in fresh if m.role == "user" and m.content.strip()), "")
            if not conversation["title"] and first_user_text:
                changes["title"] = make_title(first_user_text)
            await connection.execute(
                update(conversations).where(conversations.c.id == conversation_id).values(changes)
            )
        return [stored[client_id] for client_id in dict.fromkeys(client_ids)]

    async def set_archived(self, owner_id: str, conversation_id: uuid.UUID, archived: bool) -> RowMapping:
        """Archive (and owe a checkpoint clean-up for the thread, in the same transaction) or restore
        (and cancel a clean-up not yet done).

        Archiving closes the conversation: a turn takes its lease under the same row lock, so
        either the turn is refused or the archive is (``ConversationBusy`` while a lease is live),
        and no turn ever writes a checkpoint into a thread already archived."""
        async with self._engine.begin() as connection:
            await self._owned(connection, owner_id, conversation_id, lock=True)
            if archived:
                await self._close_leases(connection, conversation_id)
            row: RowMapping = (
                (
                    await connection.execute(
                        update(conversations)
                        .where(conversations.c.id == conversation_id)
                        .values(
                            is_archived=archived,
                            archived_at=func.now() if archived else None,
                            updated_at=func.now(),
                        )
                        .returning(conversations)
                    )
                )
                .mappings()
                .one()
            )
            if archived:
                await connection.execute(
                    pg_insert(checkpoint_cleanups)
                    .values(thread_id=str(conversation_id))
                    .on_conflict_do_nothing()
                )
            else:
                # Restored before the clean-up ran: keep the agent's memory of the thread.
                await connection.execute(
                    delete(checkpoint_cleanups).where(checkpoint_cleanups.c.thread_id == str(conversation_id))
                )
            return row

    async def acquire_lease(
        self,
        owner_id: str,
        conversation_id: uuid.UUID,
        holder: str,
        ttl: timedelta,
        *,
        first_message: str | None = None,
        budget: TurnBudget | None = None,
    ) -> LeaseState:
        """Take the conversation's lease if it is free, expired, or already the holder's; never
        for an archived one (``ConversationArchived``). A new message's lease counts the user's
        turn against ``budget`` first (past it nothing is created or taken) and creates the
        conversation with ``first_message`` when there is none of that id. One transaction: a
        turn refused for its conversation (another's id, archived) is not counted."""
        async with self._engine.begin() as connection:
            if budget is not None:
                turn = await count_in_window(connection, turn_counts, owner_id, budget.window)
                if turn.over(budget.limit):
                    return LeaseState(conversation_id, "", None, False, over_budget_wait=turn.retry_after)
            try:
                await self._owned(connection, owner_id, conversation_id, lock=True, open_only=True)
            except ConversationNotFound:
                if first_message is None:
                    raise
                # a new conversation (or another's id: the insert then does nothing, and it is not found)
                await self._insert(connection, owner_id, conversation_id, first_message)
                await self._owned(connection, owner_id, conversation_id, lock=True, open_only=True)
            expires = func.now() + ttl
            proposed = pg_insert(leases).values(
                conversation_id=conversation_id, holder=holder, expires_at=expires
            )
            statement = proposed.on_conflict_do_update(
                index_elements=[leases.c.conversation_id],
                set_={"holder": proposed.excluded.holder, "expires_at": proposed.excluded.expires_at},
                where=or_(leases.c.expires_at <= func.now(), leases.c.holder == proposed.excluded.holder),
            ).returning(leases)
            taken = (await connection.execute(statement)).mappings().one_or_none()
            acquired = taken is not None
            if taken is None:  # another holder's, still running
                held = select(leases).where(leases.c.conversation_id == conversation_id)
                taken = (await connection.execute(held)).mappings().one()
            return LeaseState(conversation_id, taken["holder"], taken["expires_at"], acquired)

    async def renew_lease(self, conversation_id: uuid.UUID, holder: str, ttl: timedelta) -> LeaseState | None:
        """Extend a lease the holder still has; None when it was lost (expired and taken)."""
        async with self._engine.begin() as connection:
            row = (
                (
                    await connection.execute(
                        update(leases)
                        .where(leases.c.conversation_id == conversation_id, leases.c.holder == holder)
                        .values(expires_at=func.now() + ttl)
                        .returning(leases)
                    )
                )
                .mappings()
                .one_or_none()
            )
        return LeaseState(conversation_id, row["holder"], row["expires_at"], True) if row else None

    @staticmethod
    async def _release(connection: AsyncConnection, conversation_id: uuid.UUID, holder: str) -> bool:
        result = await connection.execute(
            delete(leases).where(leases.c.conversation_id == conversation_id, leases.c.holder == holder)
        )
        return bool(result.rowcount)

    async def active_lease(self, owner_id: str, conversation_id: uuid.UUID) -> RowMapping | None:
        async with self._engine.connect() as connection:
            await self._owned(connection, owner_id, conversation_id)
            return (
                (
                    await connection.execute(
                        select(leases).where(
                            leases.c.conversation_id == conversation_id, leases.c.expires_at > func.now()
                        )
                    )
                )
                .mappings()
                .one_or_none()
            )

    async def record_audit(self, **values: Any) -> uuid.UUID:
        async with self._engine.begin() as connection:
            return await self._insert_audit(connection, values)

    @staticmethod
    async def _insert_audit(connection: AsyncConnection, values: dict[str, Any]) -> uuid.UUID:
        """Keep one record; a NUL in what it quotes (JSONB takes none) is kept as U+FFFD, so that
        no argument anyone typed can cost the record."""
        audit_id = uuid.uuid4()
        kept = {key: _without_nul(value) for key, value in values.items()}
        await connection.execute(insert(audit).values(id=audit_id, **kept))
        return audit_id

    @contextlib.asynccontextmanager
    async def audited(
        self,
        user: str,
        conversation_id: uuid.UUID,
        action: str,
        args: dict[str, Any] | None = None,
        *,
        refusal_code: Callable[[Exception], str | None],
    ) -> AsyncIterator[None]:
        """One audit record of convo's own action on a conversation: taken, or refused with the
        code ``refusal_code`` gives its error (an error it gives none for is not a refusal)."""
        kept = {
            "conversation_id": conversation_id,
            "thread_id": str(conversation_id),
            "user_id": user,
            "service_identity": "convo",
            "action": action,
            "tool_args": args or {},
        }
        try:
            yield
        except Exception as error:
            code = refusal_code(error)
            if code is not None:
                await self.record_audit(**kept, decision="refused", code=code, outcome="failed")
            raise
        await self.record_audit(**kept, decision="allowed", outcome="success")

    async def audit_page(self, wanted: AuditFilter, *, limit: int, cursor: str | None = None) -> Page:
        """Every user's audit records that ``wanted`` names, newest first (for admins: the caller
        checks that it is one)."""
        query = newest_first(
            select(audit).where(*_audit_conditions(wanted)),
            audit.c.created_at,
            audit.c.id,
            limit=limit,
            cursor=cursor,
        )
        async with self._engine.connect() as connection:
            rows = list((await connection.execute(query)).mappings())
        return newest_first_page(rows, audit.c.created_at, audit.c.id, limit=limit)

    async def audit_record(self, audit_id: uuid.UUID) -> RowMapping | None:
        async with self._engine.connect() as connection:
            found: RowMapping | None = (
                (await connection.execute(select(audit).where(audit.c.id == audit_id))).mappings().first()
            )
            return found

    @staticmethod
    async def _insert(
        connection: AsyncConnection, owner_id: str, conversation_id: uuid.UUID, first_message: str
    ) -> RowMapping | None:
        """The conversation created, titled by its first message; None when the id exists."""
        values = {"id": conversation_id, "owner_id": owner_id, "title": make_title(first_message)}
        result = await connection.execute(
            pg_insert(conversations).values(values).on_conflict_do_nothing().returning(conversations)
        )
        created: RowMapping | None = result.mappings().first()
        return created

    async def _owned(
        self,
        connection: AsyncConnection,
        owner_id: str,
        conversation_id: uuid.UUID,
        *,
        lock: bool = False,
        open_only: bool = False,
    ) -> RowMapping:
        query = select(conversations).where(
            conversations.c.id == conversation_id, conversations.c.owner_id == owner_id
        )
        row = (await connection.execute(query.with_for_update() if lock else query)).mappings().one_or_none()
        if row is None:
            raise ConversationNotFound(str(conversation_id))
        if open_only and row["is_archived"]:
            raise ConversationArchived(str(conversation_id))
        return row

    @staticmethod
    async def _close_leases(connection: AsyncConnection, conversation_id: uuid.UUID) -> None:
        """Refuse to archive under a live turn; forget a lapsed lease, so that its holder, if it
        still runs, cannot renew it."""
        live = await connection.scalar(
            select(leases.c.holder).where(
                leases.c.conversation_id == conversation_id, leases.c.expires_at > func.now()
            )
        )
        if live is not None:
            raise ConversationBusy(str(conversation_id))
        await connection.execute(delete(leases).where(leases.c.conversation_id == conversation_id))


def refusal_code(error: Exception) -> str | None:
    """The code a refusal of the store's is recorded with (REST's spelling); None for any other
    error."""
    if isinstance(error, ConversationNotFound):
        return "conversation_not_found"
    return error.code.lower() if isinstance(error, ConversationRefused) else None


def _without_nul(value: Any) -> Any:
    if isinstance(value, str):
        return value.replace("\x00", "\ufffd")
    if isinstance(value, dict):
        return {_without_nul(key): _without_nul(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_without_nul(item) for item in value]
    return value


def _audit_conditions(wanted: AuditFilter) -> list[ColumnElement[bool]]:
    equal = (
        (audit.c.user_id, wanted.user),
        (audit.c.tool_name, wanted.tool),
        (audit.c.env, wanted.env),
        (audit.c.decision, wanted.decision),
        (audit.c.outcome, wanted.outcome),
    )
    conditions = [column == value for column, value in equal if value is not None]
    if wanted.since is not None:
        conditions.append(audit.c.created_at >= wanted.since)
    if wanted.until is not None:
        conditions.append(audit.c.created_at < wanted.until)
    return conditions


async def existing_checkpoint_tables(connection: AsyncConnection) -> list[str]:
    """The LangGraph checkpoint tables present (none until the agent has run its setup)."""
    present = []
    for table in CHECKPOINT_TABLES:
        if await connection.scalar(text("SELECT to_regclass(:name)"), {"name": table}) is not None:
            present.append(table)
    return present
