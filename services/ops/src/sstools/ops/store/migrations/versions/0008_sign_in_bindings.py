"""Single sign-on binds what it hands out: an account to the provider's issuer and subject, a
hand-off to the browser that started the sign-in, a sign-in under way to its client address.

Accounts made by single sign-on before this revision hold no subject: like every other existing
account, an admin links them (``sstools-ops users link``) before their next single sign-on.

Revision ID: ops_0008
Revises: ops_0007
Create Date: 2026-12-21
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "ops_0008"
down_revision: str | None = "ops_0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("ops_users", sa.Column("oidc_issuer", sa.Text))
    op.add_column("ops_users", sa.Column("oidc_subject", sa.Text))
    op.create_unique_constraint("uq_ops_users_oidc_identity", "ops_users", ["oidc_issuer", "oidc_subject"])
    op.add_column("ops_oidc_handoffs", sa.Column("browser_hash", sa.Text))
    op.add_column("ops_oidc_logins", sa.Column("address", sa.Text, nullable=False, server_default=""))
    op.create_index("ix_ops_oidc_logins_address", "ops_oidc_logins", ["address"])


def downgrade() -> None:
    op.drop_index("ix_ops_oidc_logins_address", "ops_oidc_logins")
    op.drop_column("ops_oidc_logins", "address")
    op.drop_column("ops_oidc_handoffs", "browser_hash")
    op.drop_constraint("uq_ops_users_oidc_identity", "ops_users")
    op.drop_column("ops_users", "oidc_subject")
    op.drop_column("ops_users", "oidc_issuer")
