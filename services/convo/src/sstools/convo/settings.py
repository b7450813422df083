from typing import ClassVar

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from sstools.common.settings import AuthSettings, DatabaseSettings, ServiceSettings


class ConvoSettings(ServiceSettings, DatabaseSettings, AuthSettings):
    model_config = SettingsConfigDict(env_prefix="CONVO_")
    service_name: ClassVar[str] = "convo"

    grpc_port: int = Field(default=50053, ge=0, le=65535, description="gRPC ConversationService port.")
    http_port: int = Field(default=8010, ge=0, le=65535, description="REST API for the browser.")
    metrics_port: int = Field(default=9103, ge=0, le=65535, description="Probes and /metrics port.")
    max_message_chars: int = Field(
        default=200_000, ge=1, description="Longest message content accepted; longer is refused (413)."
    )
    lease_ttl_seconds: int = Field(default=60, ge=1, le=3600, description="Default life of an active lease.")
    housekeeping_interval_seconds: float = Field(
        default=30.0, gt=0, description="How often owed checkpoint clean-ups and the retention sweep run."
    )
    checkpoint_retention_hours: float = Field(
        default=168.0, gt=0, description="Threads idle this long keep only their newest checkpoint."
    )
