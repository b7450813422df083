"""The environment each audit record's command targeted, in a column of its own (admins filter on
it), filled for the records kept before from their tool arguments' ``env_id``; and an index for
the trail read newest first.

Revision ID: convo_0005
Revises: convo_0004
Create Date: 2026-12-20
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "convo_0005"
down_revision: str | None = "convo_0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("assistant_audit", sa.Column("env", sa.Text, nullable=False, server_default=""))
    # only what an environment id can be (sstools.common.tool_args.ENV_ID_PATTERN)
    op.execute(
        "UPDATE assistant_audit SET env = tool_args->>'env_id'"
        " WHERE jsonb_typeof(tool_args->'env_id') = 'string'"
        " AND tool_args->>'env_id' ~ '^[a-z0-9][a-z0-9_-]{0,62}$'"
    )
    op.create_index("ix_assistant_audit_listing", "assistant_audit", ["created_at", "id"])


def downgrade() -> None:
    op.drop_index("ix_assistant_audit_listing", table_name="assistant_audit")
    op.drop_column("assistant_audit", "env")
