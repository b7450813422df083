"""Uploads: files a user sent for a turn, kept until the turn that used them ends or they expire.

Revision ID: convo_0003
Revises: convo_0002
Create Date: 2026-12-14
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import UUID

revision: str = "convo_0003"
down_revision: str | None = "convo_0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "agent_uploads",
        sa.Column("id", UUID(as_uuid=True), primary_key=True),
        sa.Column("owner_id", sa.Text, nullable=False),
        sa.Column("conversation_id", UUID(as_uuid=True), nullable=False),
        sa.Column("name", sa.Text, nullable=False),
        sa.Column("size_bytes", sa.BigInteger, nullable=False),
        sa.Column("content", sa.LargeBinary, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_agent_uploads_owner_pending", "agent_uploads", ["owner_id", "expires_at"])
    op.create_index("ix_agent_uploads_expires_at", "agent_uploads", ["expires_at"])


def downgrade() -> None:
    op.drop_table("agent_uploads")
