"""Conversations, messages, audit, leases and the checkpoint clean-up queue.

Written out in full rather than built from tables.py: a migration is a snapshot of its day,
and must not change when the table definitions move on.

Revision ID: convo_0002
Revises: convo_0001
Create Date: 2026-11-30
"""

from collections.abc import Sequence
from datetime import datetime

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB, UUID

revision: str = "convo_0002"
down_revision: str | None = "convo_0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _created_at() -> sa.Column[datetime]:
    return sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now())


def upgrade() -> None:
    op.create_table(
        "agent_conversations",
        sa.Column("id", UUID(as_uuid=True), primary_key=True),
        sa.Column("owner_id", sa.Text, nullable=False),
        sa.Column("title", sa.Text, nullable=False, server_default=""),
        sa.Column("message_count", sa.Integer, nullable=False, server_default="0"),
        sa.Column("is_archived", sa.Boolean, nullable=False, server_default="false"),
        sa.Column("archived_at", sa.DateTime(timezone=True)),
        _created_at(),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()),
        sa.Column("last_message_at", sa.DateTime(timezone=True)),
    )
    op.create_index(
        "ix_agent_conversations_owner_listing",
        "agent_conversations",
        ["owner_id", "is_archived", "updated_at", "id"],
    )
    op.create_table(
        "agent_messages",
        sa.Column("id", UUID(as_uuid=True), primary_key=True),
        sa.Column(
            "conversation_id",
            UUID(as_uuid=True),
            sa.ForeignKey("agent_conversations.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("seq", sa.Integer, nullable=False),
        sa.Column("client_message_id", sa.Text, nullable=False),
        sa.Column("role", sa.Text, nullable=False),
        sa.Column("content", sa.Text, nullable=False, server_default=""),
        sa.Column("metadata", JSONB, nullable=False, server_default="{}"),
        sa.Column("partial", sa.Boolean, nullable=False, server_default="false"),
        _created_at(),
        sa.UniqueConstraint("conversation_id", "seq", name="uq_agent_messages_order"),
        sa.UniqueConstraint("conversation_id", "client_message_id", name="uq_agent_messages_client_id"),
        sa.CheckConstraint("role IN ('user', 'assistant', 'tool', 'system')", name="ck_agent_messages_role"),
    )
    op.create_table(
        "assistant_audit",
        sa.Column("id", UUID(as_uuid=True), primary_key=True),
        sa.Column("conversation_id", UUID(as_uuid=True)),
        sa.Column("user_id", sa.Text, nullable=False),
        sa.Column("service_identity", sa.Text, nullable=False, server_default=""),
        sa.Column("decision", sa.Text, nullable=False),
        sa.Column("tool_name", sa.Text, nullable=False, server_default=""),
        sa.Column("tool_args", JSONB, nullable=False, server_default="{}"),
        sa.Column("outcome", sa.Text, nullable=False, server_default=""),
        sa.Column("task_id", sa.Text, nullable=False, server_default=""),
        sa.Column("thread_id", sa.Text, nullable=False, server_default=""),
        sa.Column("latency_seconds", sa.Float, nullable=False, server_default="0"),
        _created_at(),
    )
    op.create_index("ix_assistant_audit_conversation", "assistant_audit", ["conversation_id", "created_at"])
    op.create_table(
        "agent_conversation_leases",
        sa.Column(
            "conversation_id",
            UUID(as_uuid=True),
            sa.ForeignKey("agent_conversations.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("holder", sa.Text, nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_table(
        "agent_checkpoint_cleanups",
        sa.Column("thread_id", sa.Text, primary_key=True),
        sa.Column("requested_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()),
        sa.Column("attempts", sa.Integer, nullable=False, server_default="0"),
        sa.Column("last_error", sa.Text),
    )


def downgrade() -> None:
    for table in (
        "agent_checkpoint_cleanups",
        "agent_conversation_leases",
        "assistant_audit",
        "agent_messages",
        "agent_conversations",
    ):
        op.drop_table(table)
