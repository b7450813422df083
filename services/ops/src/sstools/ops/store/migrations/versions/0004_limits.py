"""Sign-in and service-token limits.

Revision ID: ops_0004
Revises: ops_0003
Create Date: 2026-12-01
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "ops_0004"
down_revision: str | None = "ops_0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "ops_limits",
        sa.Column("key", sa.Text, primary_key=True),
        sa.Column("count", sa.Integer, nullable=False, server_default="0"),
        sa.Column("since", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()),
        sa.Column("blocked_until", sa.DateTime(timezone=True)),
    )


def downgrade() -> None:
    op.drop_table("ops_limits")
