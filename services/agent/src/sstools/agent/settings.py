from typing import ClassVar

from pydantic import Field, SecretStr
from pydantic_settings import SettingsConfigDict

from sstools.common.settings import (
    AccountCheckSettings,
    AuthSettings,
    ConfirmationSettings,
    DatabaseSettings,
    LlmSettings,
    ServiceSettings,
)


class AgentSettings(
    ServiceSettings, DatabaseSettings, AuthSettings, AccountCheckSettings, ConfirmationSettings, LlmSettings
):
    model_config = SettingsConfigDict(env_prefix="AGENT_")
    service_name: ClassVar[str] = "agent"

    http_port: int = Field(default=7860, ge=0, le=65535, description="Chat endpoint (Gradio) port.")
    metrics_port: int = Field(default=9105, ge=0, le=65535, description="Probes and /metrics port.")
    ops_url: str = Field(default="http://127.0.0.1:8000", description="Operations API base URL.")
    ops_client_id: str = Field(
        default="agent", min_length=1, description="This agent's service client id at ops."
    )
    ops_client_secret: SecretStr = Field(
        default=SecretStr(""), description="Its secret (one of OPS_SERVICE_CLIENTS); required to call ops."
    )
    router_target: str = Field(
        default="127.0.0.1:50051", description="Router gRPC target (dns:/// for client-side balancing)."
    )
    router_timeout_seconds: float = Field(
        default=0.5,
        gt=0,
        description="Longest a routing call may take before the in-process keyword tier answers.",
    )
    convo_target: str = Field(default="127.0.0.1:50053", description="Conversation service gRPC target.")
    docparse_target: str = Field(default="127.0.0.1:50052", description="Document-parse service gRPC target.")
    docparse_timeout_seconds: float = Field(
        default=30.0, gt=0, description="Longest reading one upload may take."
    )
    convo_timeout_seconds: float = Field(default=2.0, gt=0, description="Longest one convo call may take.")
    tool_timeout_seconds: float = Field(default=30.0, gt=0, description="Longest one tool call may take.")
    task_wait_share: float = Field(
        default=0.8,
        ge=0,
        lt=1,
        description="Share of the tool timeout a call that starts an ops task waits for its end before "
        "answering that it started (the page then follows the task to its end).",
    )
    offline_words_per_second: float = Field(
        default=0.0,
        ge=0,
        description="Pace of the offline model's streamed answer in words a second (0: all at once).",
    )
    concurrency_limit: int = Field(default=32, ge=1, description="Chat turns Gradio runs at once.")
    turns_per_user: int = Field(
        default=30, ge=1, description="New messages one user may send per window, across agent pods."
    )
    turns_window_seconds: int = Field(
        default=60, ge=1, le=86_400, description="The window those messages are counted in."
    )
    prefetch_dashboard_limit: int = Field(
        default=25, ge=0, le=100, description="Dashboards fetched ahead for list requests (0: never)."
    )
    # Renewed every third of it while a turn runs; a pod that dies frees its conversations after
    # it (bench/chaos.py: 60 s kept them BUSY for a minute after the agent was killed).
    lease_ttl_seconds: int = Field(
        default=15, ge=3, le=3600, description="A conversation's convo lease: renewed while a turn runs."
    )
    tool_retry_backoff_seconds: float = Field(
        default=0.5, ge=0, le=30, description="First pause before a read tool is asked again (doubles)."
    )
    grounding_seconds: float = Field(
        default=120.0,
        ge=0,
        le=3600,
        description="Seconds a person's outline and dashboards of an environment are reused "
        "(0: read each time).",
    )
