"""Tasks, idempotency keys, maintenance windows and backups.

Revision ID: ops_0003
Revises: ops_0002
Create Date: 2026-11-30
"""

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB, UUID

revision: str = "ops_0003"
down_revision: str | None = "ops_0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _created_at(name: str = "created_at") -> sa.Column[Any]:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now())


def upgrade() -> None:
    op.create_table(
        "ops_tasks",
        sa.Column("id", UUID(as_uuid=True), primary_key=True),
        sa.Column("kind", sa.Text, nullable=False),
        sa.Column("env_id", sa.Text, nullable=False, server_default=""),
        sa.Column("status", sa.Text, nullable=False, server_default="queued"),
        sa.Column("progress", sa.Integer, nullable=False, server_default="0"),
        sa.Column("params", JSONB, nullable=False, server_default="{}"),
        sa.Column("result", JSONB),
        sa.Column("error", JSONB),
        sa.Column("created_by", sa.Text, nullable=False, server_default=""),
        sa.Column("attempts", sa.Integer, nullable=False, server_default="0"),
        sa.Column("lease_until", sa.DateTime(timezone=True)),
        _created_at(),
        _created_at("updated_at"),
    )
    op.create_index("ix_ops_tasks_claim", "ops_tasks", ["status", "created_at"])
    op.create_table(
        "ops_idempotency",
        sa.Column("username", sa.Text, primary_key=True),
        sa.Column("operation", sa.Text, primary_key=True),
        sa.Column("key", sa.Text, primary_key=True),
        sa.Column("fingerprint", sa.Text, nullable=False),
        sa.Column("status_code", sa.Integer),
        sa.Column("response", JSONB),
        _created_at(),
    )
    op.create_table(
        "ops_maintenance",
        sa.Column("id", UUID(as_uuid=True), primary_key=True),
        sa.Column("env_id", sa.Text, nullable=False),
        sa.Column("reason", sa.Text, nullable=False),
        sa.Column("started_by", sa.Text, nullable=False),
        _created_at("started_at"),
        sa.Column("ended_by", sa.Text),
        sa.Column("ended_at", sa.DateTime(timezone=True)),
    )
    op.create_index(
        "ux_ops_maintenance_open",
        "ops_maintenance",
        ["env_id"],
        unique=True,
        postgresql_where=sa.text("ended_at IS NULL"),
    )
    op.create_table(
        "ops_backups",
        sa.Column("id", UUID(as_uuid=True), primary_key=True),
        sa.Column("env_id", sa.Text, nullable=False),
        sa.Column("file_name", sa.Text, nullable=False),
        sa.Column("dashboards", sa.Integer, nullable=False),
        sa.Column("size_bytes", sa.BigInteger, nullable=False),
        sa.Column("sha256", sa.Text, nullable=False),
        sa.Column("created_by", sa.Text, nullable=False),
        _created_at(),
    )
    op.create_index("ix_ops_backups_env", "ops_backups", ["env_id", "created_at"])


def downgrade() -> None:
    for table in ("ops_backups", "ops_maintenance", "ops_idempotency", "ops_tasks"):
        op.drop_table(table)
