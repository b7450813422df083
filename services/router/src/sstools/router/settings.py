from typing import ClassVar

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from sstools.common.settings import ServiceSettings


class RouterSettings(ServiceSettings):
    model_config = SettingsConfigDict(env_prefix="ROUTER_")
    service_name: ClassVar[str] = "router"

    grpc_port: int = Field(default=50051, ge=0, le=65535, description="gRPC RouterService port.")
    metrics_port: int = Field(default=9101, ge=0, le=65535, description="Probes and /metrics port.")
