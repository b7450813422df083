"""Refresh tokens: a session's renewals, revocable by family and by user.

Revision ID: ops_0005
Revises: ops_0004
Create Date: 2026-12-01
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import UUID

revision: str = "ops_0005"
down_revision: str | None = "ops_0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "ops_refresh_tokens",
        sa.Column("id", UUID(as_uuid=True), primary_key=True),
        sa.Column("family", UUID(as_uuid=True), nullable=False),
        sa.Column("username", sa.Text, nullable=False),
        sa.Column("token_hash", sa.Text, nullable=False, unique=True),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("used_at", sa.DateTime(timezone=True)),
        sa.Column("revoked_at", sa.DateTime(timezone=True)),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()),
    )
    op.create_index("ix_ops_refresh_tokens_family", "ops_refresh_tokens", ["family"])
    op.create_index("ix_ops_refresh_tokens_username", "ops_refresh_tokens", ["username"])


def downgrade() -> None:
    op.drop_table("ops_refresh_tokens")
