"""The ops schema, declared once; migrations are written out from it by hand."""

from sqlalchemy import Boolean, Column, DateTime, Index, MetaData, Table, Text, func
from sqlalchemy.dialects.postgresql import JSONB, UUID

metadata = MetaData()

users = Table(
    "ops_users",
    metadata,
    Column("id", UUID(as_uuid=True), primary_key=True),
    Column("username", Text, nullable=False, unique=True),
    Column("password_hash", Text, nullable=False),
    Column("role", Text, nullable=False),
    Column("is_active", Boolean, nullable=False, server_default="true"),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
)

# Who did what through ops: both identities of an agent call, or the user's alone.
audit = Table(
    "ops_audit",
    metadata,
    Column("id", UUID(as_uuid=True), primary_key=True),
    Column("at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column("service", Text, nullable=False, server_default=""),
    Column("username", Text, nullable=False, server_default=""),
    Column("action", Text, nullable=False),
    Column("target_env", Text, nullable=False, server_default=""),
    Column("outcome", Text, nullable=False),
    Column("detail", JSONB, nullable=False, server_default="{}"),
    Index("ix_ops_audit_at", "at"),
)
