"""Conversations, messages, audit, leases and the checkpoint clean-up queue.

Revision ID: convo_0002
Revises: convo_0001
Create Date: 2026-11-30
"""

from collections.abc import Sequence

from alembic import op

from sstools.convo.store.tables import audit, checkpoint_cleanups, conversations, leases, messages

revision: str = "convo_0002"
down_revision: str | None = "convo_0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_TABLES = (conversations, messages, audit, leases, checkpoint_cleanups)


def upgrade() -> None:
    bind = op.get_bind()
    for table in _TABLES:
        table.create(bind)


def downgrade() -> None:
    bind = op.get_bind()
    for table in reversed(_TABLES):
        table.drop(bind)
