"""Single sign-on: sign-ins under way at the provider, and the one-time hand-offs to the page.

Revision ID: ops_0006
Revises: ops_0005
Create Date: 2026-12-15
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "ops_0006"
down_revision: str | None = "ops_0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "ops_oidc_logins",
        sa.Column("state", sa.Text, primary_key=True),
        sa.Column("nonce", sa.Text, nullable=False),
        sa.Column("code_verifier", sa.Text, nullable=False),
        sa.Column("return_to", sa.Text, nullable=False),
        sa.Column("prompt_none", sa.Boolean, nullable=False, server_default="false"),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()),
    )
    op.create_index("ix_ops_oidc_logins_created_at", "ops_oidc_logins", ["created_at"])
    op.create_table(
        "ops_oidc_handoffs",
        sa.Column("code_hash", sa.Text, primary_key=True),
        sa.Column("username", sa.Text, nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()),
    )


def downgrade() -> None:
    op.drop_table("ops_oidc_handoffs")
    op.drop_table("ops_oidc_logins")
