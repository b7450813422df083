"""What an admin sees of an account beyond its role: whether only single sign-on lets them in,
when their sessions were last ended, and how, when and from where they last signed in.

Accounts made by single sign-on before this revision cannot be told apart from local ones:
``sso_only`` is false for every existing account.

Revision ID: ops_0007
Revises: ops_0006
Create Date: 2026-12-20
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "ops_0007"
down_revision: str | None = "ops_0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_COLUMNS = (
    "last_sign_in_group",
    "last_sign_in_address",
    "last_sign_in_at",
    "last_sign_in_method",
    "sessions_valid_from",
    "sso_only",
)


def upgrade() -> None:
    op.add_column("ops_users", sa.Column("sso_only", sa.Boolean, nullable=False, server_default="false"))
    op.add_column("ops_users", sa.Column("sessions_valid_from", sa.DateTime(timezone=True)))
    op.add_column("ops_users", sa.Column("last_sign_in_method", sa.Text))
    op.add_column("ops_users", sa.Column("last_sign_in_at", sa.DateTime(timezone=True)))
    op.add_column("ops_users", sa.Column("last_sign_in_address", sa.Text))
    op.add_column("ops_users", sa.Column("last_sign_in_group", sa.Text))


def downgrade() -> None:
    for column in _COLUMNS:
        op.drop_column("ops_users", column)
