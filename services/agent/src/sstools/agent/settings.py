from typing import ClassVar

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from sstools.common.settings import ServiceSettings


class AgentSettings(ServiceSettings):
    model_config = SettingsConfigDict(env_prefix="AGENT_")
    service_name: ClassVar[str] = "agent"

    http_port: int = Field(default=7860, ge=0, le=65535, description="Chat endpoint (Gradio) port.")
    metrics_port: int = Field(default=9105, ge=0, le=65535, description="Probes and /metrics port.")
