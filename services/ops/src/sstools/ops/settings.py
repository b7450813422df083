from typing import ClassVar

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from sstools.common.settings import DatabaseSettings, ServiceSettings


class OpsSettings(ServiceSettings, DatabaseSettings):
    model_config = SettingsConfigDict(env_prefix="OPS_")
    service_name: ClassVar[str] = "ops"

    http_port: int = Field(default=8000, ge=0, le=65535, description="Operations REST API port.")
    metrics_port: int = Field(default=9104, ge=0, le=65535, description="Probes and /metrics port.")
