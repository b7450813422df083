from typing import ClassVar

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from sstools.common.settings import ServiceSettings


class DocparseSettings(ServiceSettings):
    model_config = SettingsConfigDict(env_prefix="DOCPARSE_")
    service_name: ClassVar[str] = "docparse"

    grpc_port: int = Field(default=50052, ge=0, le=65535, description="gRPC DocparseService port.")
    metrics_port: int = Field(default=9102, ge=0, le=65535, description="Probes and /metrics port.")
