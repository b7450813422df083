from typing import ClassVar

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from sstools.common.settings import DatabaseSettings, ServiceSettings


class ConvoSettings(ServiceSettings, DatabaseSettings):
    model_config = SettingsConfigDict(env_prefix="CONVO_")
    service_name: ClassVar[str] = "convo"

    grpc_port: int = Field(default=50053, ge=0, le=65535, description="gRPC ConversationService port.")
    http_port: int = Field(default=8010, ge=0, le=65535, description="REST API for the browser.")
    metrics_port: int = Field(default=9103, ge=0, le=65535, description="Probes and /metrics port.")
