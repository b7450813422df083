"""Baseline of the ops schema: the version table only.

User, role, environment and task tables follow in the operations-API revisions.

Revision ID: ops_0001
Revises:
Create Date: 2026-11-30
"""

from collections.abc import Sequence

revision: str = "ops_0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
