"""Users with their roles, and the audit trail of who did what.

Revision ID: ops_0002
Revises: ops_0001
Create Date: 2026-11-30
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB, UUID

revision: str = "ops_0002"
down_revision: str | None = "ops_0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "ops_users",
        sa.Column("id", UUID(as_uuid=True), primary_key=True),
        sa.Column("username", sa.Text, nullable=False, unique=True),
        sa.Column("password_hash", sa.Text, nullable=False),
        sa.Column("role", sa.Text, nullable=False),
        sa.Column("is_active", sa.Boolean, nullable=False, server_default="true"),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()),
    )
    op.create_table(
        "ops_audit",
        sa.Column("id", UUID(as_uuid=True), primary_key=True),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()),
        sa.Column("service", sa.Text, nullable=False, server_default=""),
        sa.Column("username", sa.Text, nullable=False, server_default=""),
        sa.Column("action", sa.Text, nullable=False),
        sa.Column("target_env", sa.Text, nullable=False, server_default=""),
        sa.Column("outcome", sa.Text, nullable=False),
        sa.Column("detail", JSONB, nullable=False, server_default="{}"),
    )
    op.create_index("ix_ops_audit_at", "ops_audit", ["at"])


def downgrade() -> None:
    op.drop_table("ops_audit")
    op.drop_table("ops_users")
