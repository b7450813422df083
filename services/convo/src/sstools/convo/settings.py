from typing import ClassVar

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from sstools.common.grpc_client import FILE_MESSAGE_MAX_BYTES
from sstools.common.settings import AccountCheckSettings, AuthSettings, DatabaseSettings, ServiceSettings

# A whole upload travels to the agent in one gRPC message, which the agent accepts up to this.
UPLOAD_MAX_BYTES_CEILING = FILE_MESSAGE_MAX_BYTES - 1024 * 1024


class ConvoSettings(ServiceSettings, DatabaseSettings, AuthSettings, AccountCheckSettings):
    model_config = SettingsConfigDict(env_prefix="CONVO_")
    service_name: ClassVar[str] = "convo"

    grpc_port: int = Field(default=50053, ge=0, le=65535, description="gRPC ConversationService port.")
    http_port: int = Field(default=8010, ge=0, le=65535, description="REST API for the browser.")
    metrics_port: int = Field(default=9103, ge=0, le=65535, description="Probes and /metrics port.")
    ops_url: str = Field(
        default="",
        description="Operations API base URL, asked whether a signed-in user is still active; empty: "
        "not asked, and a disabled user's token works until it expires (OPS_USER_TOKEN_TTL_SECONDS).",
    )
    ops_timeout_seconds: float = Field(
        default=5.0, gt=0, description="Longest wait for ops' answer (503 account_check_unavailable past it)."
    )
    max_message_chars: int = Field(
        default=200_000, ge=1, description="Longest message content accepted; longer is refused (413)."
    )
    lease_ttl_seconds: int = Field(default=60, ge=1, le=3600, description="Default life of an active lease.")
    late_user_token_seconds: int = Field(
        default=900,
        ge=0,
        le=3600,
        description="How long after it expired a user token still records a turn's end over gRPC "
        "(its answer, audit record and uploads' removal), with a valid service token: a turn may "
        "outlive the token it began with.",
    )
    housekeeping_interval_seconds: float = Field(
        default=30.0,
        gt=0,
        description="How often checkpoint clean-ups, the retention and expired-upload sweeps run.",
    )
    checkpoint_retention_hours: float = Field(
        default=168.0, gt=0, description="Threads idle this long keep only their newest checkpoint."
    )
    upload_max_bytes: int = Field(
        default=10 * 1024 * 1024,
        ge=1,
        le=UPLOAD_MAX_BYTES_CEILING,
        description="Largest uploaded file (413 beyond, before the body is kept).",
    )
    upload_max_pending_files: int = Field(
        default=10, ge=1, description="Most uploads one user may have waiting for a turn (429 beyond)."
    )
    upload_max_pending_bytes: int = Field(
        default=50 * 1024 * 1024,
        ge=1,
        description="Most bytes one user may have waiting for a turn (429 beyond).",
    )
    upload_ttl_seconds: int = Field(
        default=900, ge=1, description="An upload no turn used is deleted after this many seconds."
    )
