"""Audit records that say everything a command was about: what the person asked for (``action``),
why it was refused or denied (``code``), and every tool call it concerned (``calls``).

Revision ID: convo_0006
Revises: convo_0005
Create Date: 2026-12-05
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision: str = "convo_0006"
down_revision: str | None = "convo_0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("assistant_audit", sa.Column("action", sa.Text, nullable=False, server_default=""))
    op.add_column("assistant_audit", sa.Column("code", sa.Text, nullable=False, server_default=""))
    op.add_column("assistant_audit", sa.Column("calls", JSONB, nullable=False, server_default="[]"))


def downgrade() -> None:
    for column in ("calls", "code", "action"):
        op.drop_column("assistant_audit", column)
