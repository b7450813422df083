"""The ops schema, declared once; migrations are written out from it by hand."""

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    DateTime,
    Index,
    Integer,
    MetaData,
    Table,
    Text,
    UniqueConstraint,
    func,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB, UUID

from sstools.common.windows import counter_columns

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
    # Made by single sign-on, with a password nobody knows: the provider alone lets them in.
    Column("sso_only", Boolean, nullable=False, server_default="false"),
    # Access tokens issued before this (whole) second are refused: their sessions were ended.
    Column("sessions_valid_from", DateTime(timezone=True)),
    # The last sign-in: password or sso, when, from which client address, and for sso the
    # provider's group whose mapping gave the role (null: the default role gave it).
    Column("last_sign_in_method", Text),
    Column("last_sign_in_at", DateTime(timezone=True)),
    Column("last_sign_in_address", Text),
    Column("last_sign_in_group", Text),
    # Who the provider says this account is (its issuer and subject): single sign-on finds the
    # account by these, never by name alone. Null: not linked (a local account).
    Column("oidc_issuer", Text),
    Column("oidc_subject", Text),
    UniqueConstraint("oidc_issuer", "oidc_subject", name="uq_ops_users_oidc_identity"),
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

# Long operations (deploy, migration, backup, restore, LLM validation and documentation). A
# worker claims a queued task, or a running one whose lease ran out because its ops died.
tasks = Table(
    "ops_tasks",
    metadata,
    Column("id", UUID(as_uuid=True), primary_key=True),
    Column("kind", Text, nullable=False),
    Column("env_id", Text, nullable=False, server_default=""),
    Column("status", Text, nullable=False, server_default="queued"),
    Column("progress", Integer, nullable=False, server_default="0"),
    Column("params", JSONB, nullable=False, server_default="{}"),
    Column("result", JSONB),
    Column("error", JSONB),
    Column("created_by", Text, nullable=False, server_default=""),
    Column("attempts", Integer, nullable=False, server_default="0"),
    Column("lease_until", DateTime(timezone=True)),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column("updated_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Index("ix_ops_tasks_claim", "status", "created_at"),
)

# The first answer to each Idempotency-Key, per user and operation: a repeat gets it back.
idempotency = Table(
    "ops_idempotency",
    metadata,
    Column("username", Text, primary_key=True),
    Column("operation", Text, primary_key=True),
    Column("key", Text, primary_key=True),
    Column("fingerprint", Text, nullable=False),
    Column("status_code", Integer),  # null while the first request is still running
    Column("response", JSONB),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
)

# Maintenance windows; at most one open (ended_at null) per environment.
maintenance = Table(
    "ops_maintenance",
    metadata,
    Column("id", UUID(as_uuid=True), primary_key=True),
    Column("env_id", Text, nullable=False),
    Column("reason", Text, nullable=False),
    Column("started_by", Text, nullable=False),
    Column("started_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column("ended_by", Text),
    Column("ended_at", DateTime(timezone=True)),
    Index("ux_ops_maintenance_open", "env_id", unique=True, postgresql_where=text("ended_at IS NULL")),
)

# Backup archives: the zip lives in the backup folder, its record here.
backups = Table(
    "ops_backups",
    metadata,
    Column("id", UUID(as_uuid=True), primary_key=True),
    Column("env_id", Text, nullable=False),
    Column("file_name", Text, nullable=False),
    Column("dashboards", Integer, nullable=False),
    Column("size_bytes", BigInteger, nullable=False),
    Column("sha256", Text, nullable=False),
    Column("created_by", Text, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Index("ix_ops_backups_env", "env_id", "created_at"),
)

# Counters of the sign-in limits, shared by every ops replica: failed attempts per user name,
# client address or service client (with the block they earned), and issuance per window.
limits = Table(
    "ops_limits",
    metadata,
    *counter_columns(),
    Column("blocked_until", DateTime(timezone=True)),
)

# Refresh tokens (stored as SHA-256 only): each use replaces the token with a new one of the same
# family; a used one presented again means it was copied, and the whole family is revoked.
refresh_tokens = Table(
    "ops_refresh_tokens",
    metadata,
    Column("id", UUID(as_uuid=True), primary_key=True),
    Column("family", UUID(as_uuid=True), nullable=False),
    Column("username", Text, nullable=False),
    Column("token_hash", Text, nullable=False, unique=True),
    Column("expires_at", DateTime(timezone=True), nullable=False),
    Column("used_at", DateTime(timezone=True)),
    Column("revoked_at", DateTime(timezone=True)),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Index("ix_ops_refresh_tokens_family", "family"),
    Index("ix_ops_refresh_tokens_username", "username"),
)

# Single sign-ons under way: what the browser's return from the provider is checked against. A
# row lives 10 minutes and is deleted when used, so a state works once.
oidc_logins = Table(
    "ops_oidc_logins",
    metadata,
    Column("state", Text, primary_key=True),
    Column("nonce", Text, nullable=False),
    Column("code_verifier", Text, nullable=False),
    Column("return_to", Text, nullable=False),
    Column("prompt_none", Boolean, nullable=False, server_default="false"),
    # The client address that started it: when too many are under way, the heaviest starter's
    # oldest goes first.
    Column("address", Text, nullable=False, server_default=""),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Index("ix_ops_oidc_logins_created_at", "created_at"),
    Index("ix_ops_oidc_logins_address", "address"),
)

# A finished single sign-on's one-time hand-off to the page (stored as SHA-256 only): the page
# posts the code it got in the URL's fragment and gets the session; 60 seconds, once.
oidc_handoffs = Table(
    "ops_oidc_handoffs",
    metadata,
    Column("code_hash", Text, primary_key=True),
    Column("username", Text, nullable=False),
    # SHA-256 of the secret in the cookie the callback gave the browser: redeemed only with it.
    Column("browser_hash", Text),
    Column("expires_at", DateTime(timezone=True), nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
)
