"""The convo schema, declared once; the migrations create it and the queries read it."""

from typing import Literal

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    Column,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    Table,
    Text,
    UniqueConstraint,
    func,
)
from sqlalchemy.dialects.postgresql import JSONB, UUID

from sstools.common.windows import counter_columns

metadata = MetaData()

ROLES = ("user", "assistant", "tool", "system")
# What the agent decided about a command (an audit record's ``decision``).
AuditDecision = Literal["allowed", "denied", "refused", "needs_confirmation", "confirmed", "rejected"]

conversations = Table(
    "agent_conversations",
    metadata,
    Column("id", UUID(as_uuid=True), primary_key=True),
    Column("owner_id", Text, nullable=False),
    Column("title", Text, nullable=False, server_default=""),
    Column("message_count", Integer, nullable=False, server_default="0"),
    Column("is_archived", Boolean, nullable=False, server_default="false"),
    Column("archived_at", DateTime(timezone=True)),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column("updated_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column("last_message_at", DateTime(timezone=True)),
    Index("ix_agent_conversations_owner_listing", "owner_id", "is_archived", "updated_at", "id"),
)

messages = Table(
    "agent_messages",
    metadata,
    Column("id", UUID(as_uuid=True), primary_key=True),
    Column(
        "conversation_id",
        UUID(as_uuid=True),
        ForeignKey("agent_conversations.id", ondelete="CASCADE"),
        nullable=False,
    ),
    Column("seq", Integer, nullable=False),
    Column("client_message_id", Text, nullable=False),
    Column("role", Text, nullable=False),
    Column("content", Text, nullable=False, server_default=""),
    Column("metadata", JSONB, nullable=False, server_default="{}"),
    Column("partial", Boolean, nullable=False, server_default="false"),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    UniqueConstraint("conversation_id", "seq", name="uq_agent_messages_order"),
    UniqueConstraint("conversation_id", "client_message_id", name="uq_agent_messages_client_id"),
    CheckConstraint(f"role IN {ROLES!r}", name="ck_agent_messages_role"),
)

# One record per command the agent took (and per archive, restore and upload convo took). ``env``
# is the environment the command targeted (its tool arguments' ``env_id``; empty when it named
# none), kept apart so an admin can filter on it; ``calls`` holds every tool call the command was
# about, ``tool_name``/``tool_args`` the one its decision is about, ``code`` why it was refused.
audit = Table(
    "assistant_audit",
    metadata,
    Column("id", UUID(as_uuid=True), primary_key=True),
    Column("conversation_id", UUID(as_uuid=True)),
    Column("user_id", Text, nullable=False),
    Column("service_identity", Text, nullable=False, server_default=""),
    Column("decision", Text, nullable=False),
    Column("tool_name", Text, nullable=False, server_default=""),
    Column("tool_args", JSONB, nullable=False, server_default="{}"),
    Column("env", Text, nullable=False, server_default=""),
    Column("outcome", Text, nullable=False, server_default=""),
    Column("task_id", Text, nullable=False, server_default=""),
    Column("thread_id", Text, nullable=False, server_default=""),
    Column("latency_seconds", Float, nullable=False, server_default="0"),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column("action", Text, nullable=False, server_default=""),
    Column("code", Text, nullable=False, server_default=""),
    Column("calls", JSONB, nullable=False, server_default="[]"),
    Index("ix_assistant_audit_conversation", "conversation_id", "created_at"),
    Index("ix_assistant_audit_listing", "created_at", "id"),
)

leases = Table(
    "agent_conversation_leases",
    metadata,
    Column(
        "conversation_id",
        UUID(as_uuid=True),
        ForeignKey("agent_conversations.id", ondelete="CASCADE"),
        primary_key=True,
    ),
    Column("holder", Text, nullable=False),
    Column("expires_at", DateTime(timezone=True), nullable=False),
)

# Checkpoint clean-ups owed for archived threads: a row is written in the archiving transaction
# and removed only once every checkpoint row of the thread is gone, so none is ever forgotten.
checkpoint_cleanups = Table(
    "agent_checkpoint_cleanups",
    metadata,
    Column("thread_id", Text, primary_key=True),
    Column("requested_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column("attempts", Integer, nullable=False, server_default="0"),
    Column("last_error", Text),
)

# Files a user uploaded for a turn (REST, under their JWT): read by the agent by id for this user
# and conversation only, deleted after the turn that used them or once expired. The conversation
# may not exist yet (the page makes its id before the first message), so no foreign key.
uploads = Table(
    "agent_uploads",
    metadata,
    Column("id", UUID(as_uuid=True), primary_key=True),
    Column("owner_id", Text, nullable=False),
    Column("conversation_id", UUID(as_uuid=True), nullable=False),
    Column("name", Text, nullable=False),
    Column("size_bytes", BigInteger, nullable=False),
    Column("content", LargeBinary, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column("expires_at", DateTime(timezone=True), nullable=False),
    Index("ix_agent_uploads_owner_pending", "owner_id", "expires_at"),
    Index("ix_agent_uploads_expires_at", "expires_at"),
)

# Chat turns per user in the current window (sstools.common.windows), counted for every agent pod.
# One row per user who ever chatted (the id comes from a verified token): nothing to sweep.
turn_counts = Table(
    "agent_turn_counts",
    metadata,
    *counter_columns(),
)
