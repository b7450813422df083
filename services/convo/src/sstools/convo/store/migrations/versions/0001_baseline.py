"""Baseline of the convo schema: the version table only.

Conversation, message and audit tables follow in the conversation-service revisions.

Revision ID: convo_0001
Revises:
Create Date: 2026-11-30
"""

from collections.abc import Sequence

revision: str = "convo_0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
