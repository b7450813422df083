"""Settings base: every service reads its configuration from environment variables only.

Each service declares one subclass with its own ``env_prefix`` (``ROUTER_``, ``OPS_``...). The
fields declared here are shared by all services and keep their conventional, unprefixed names.
"""

from typing import Annotated, Any, ClassVar

from pydantic import Field, SecretStr, StringConstraints, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from sstools.common.grpc_auth import Callers
from sstools.common.tokens import PublicKeyCodec, parse_public_keys


class ServiceSettings(BaseSettings):
    """Configuration every service has. Subclasses add their ports and dependencies."""

    model_config = SettingsConfigDict(extra="ignore", frozen=True, populate_by_name=True)

    service_name: ClassVar[str]

    log_level: str = Field(
        default="INFO",
        validation_alias="LOG_LEVEL",
        pattern=r"^(?i:debug|info|warning|error|critical)$",
        description="Lowest log level written (JSON lines on stdout).",
    )
    otel_exporter_otlp_endpoint: str | None = Field(
        default=None,
        validation_alias="OTEL_EXPORTER_OTLP_ENDPOINT",
        description="OTLP/gRPC collector address; spans are exported only when set.",
    )
    host: str = Field(
        default="127.0.0.1",
        description="Interface every listener of the service binds to (0.0.0.0 in a pod).",
    )
    metrics_port: int = Field(
        default=9100,
        ge=0,
        le=65535,
        description="Port of /healthz, /readyz and Prometheus /metrics.",
    )
    shutdown_grace_seconds: float = Field(
        default=5.0,
        ge=0,
        description="How long in-flight calls may finish after SIGTERM.",
    )

    def ports(self) -> dict[str, int]:
        """Every listener of the service by field name (``grpc_port``, ``http_port``, ...)."""
        return {name: value for name, value in self if name.endswith("_port") and isinstance(value, int)}


def environment_variables(settings_class: type[BaseSettings]) -> dict[str, str]:
    """Each variable a settings class reads, with its description; the README table must list them."""
    prefix = str(settings_class.model_config.get("env_prefix", ""))
    variables = {}
    for name, field in settings_class.model_fields.items():
        alias: Any = field.validation_alias
        variable = alias if isinstance(alias, str) else f"{prefix}{name}".upper()
        variables[variable] = field.description or ""
    return variables


class CallerSettings(BaseSettings):
    """Mixin for gRPC servers that check their callers' service tokens (the router, which also
    runs offline — warm, route, eval — without keys: required only to serve)."""

    jwt_public_keys: str = Field(
        default="",
        validation_alias="JWT_PUBLIC_KEYS",
        description="Ed25519 public keys (PEM) of ops, whose service tokens callers must send; "
        "required to serve.",
    )

    @field_validator("jwt_public_keys")
    @classmethod
    def _public_keys(cls, value: str) -> str:
        if value:
            parse_public_keys(value)  # refuse a bad key at start, with the reason
        return value

    def token_codec(self) -> PublicKeyCodec:
        """Verifies tokens; holds no private key."""
        if not self.jwt_public_keys:
            raise ValueError("JWT_PUBLIC_KEYS is required: callers' service tokens are checked with it")
        return PublicKeyCodec(parse_public_keys(self.jwt_public_keys))

    def grpc_callers(self, *, late_user_seconds: float = 0.0) -> Callers:
        """Checks the service token (and user token) of every gRPC call with these keys."""
        return Callers(self.token_codec(), late_user_seconds=late_user_seconds)


class AuthSettings(CallerSettings):
    """Mixin for services that verify the tokens ops signs (user and service tokens)."""

    jwt_public_keys: str = Field(
        validation_alias="JWT_PUBLIC_KEYS",
        description="Ed25519 public keys (PEM, one after another) whose tokens are trusted; "
        "two while one replaces the other.",
    )


class AccountCheckSettings(BaseSettings):
    """Mixin for services that ask ops whether a signed-in user is still active."""

    account_check_seconds: float = Field(
        default=5.0,
        ge=0,
        le=300,
        description="How long ops' word that a user is active is trusted: a disabled user is "
        "refused at most this many seconds later (0: ops is asked on every request).",
    )


class ConfirmationSettings(BaseSettings):
    """Mixin for the agent, which signs a person's confirmation of a call, and ops, which checks it."""

    confirmation_secret: SecretStr = Field(
        validation_alias="CONFIRMATION_SECRET",
        min_length=32,
        description="HS256 secret of confirmation tokens, shared by the agent and ops only (32+ bytes).",
    )


class DatabaseSettings(BaseSettings):
    """Mixin for services that reach PostgreSQL."""

    database_url: str = Field(
        default="postgresql://postgres@127.0.0.1:5432/sstools",
        validation_alias="DATABASE_URL",
        description="PostgreSQL URL shared by the services that keep state.",
    )


class LlmSettings(BaseSettings):
    """Mixin for services that ask an OpenAI-compatible model (none set: the offline one)."""

    llm_base_url: str = Field(
        default="",
        validation_alias="LLM_BASE_URL",
        description="OpenAI-compatible endpoint (http://host:8000/v1); empty: the built-in offline model.",
    )
    llm_api_key: SecretStr = Field(
        default=SecretStr(""), validation_alias="LLM_API_KEY", description="Bearer key for that endpoint."
    )
    llm_model: str = Field(
        default="", validation_alias="LLM_MODEL", description="Model name at that endpoint."
    )
    llm_timeout_seconds: float = Field(
        default=60.0,
        gt=0,
        validation_alias="LLM_TIMEOUT_SECONDS",
        description="Longest one LLM call may take.",
    )
    # A small local model left unbounded once wrote 4,683 tokens for 7 minutes, holding the
    # server's only slot: every answer and call here fits in far fewer.
    llm_max_tokens: int = Field(
        default=1024,
        ge=16,
        le=32_768,
        validation_alias="LLM_MAX_TOKENS",
        description="Most tokens one LLM reply may generate (sent as max_tokens and max_completion_tokens).",
    )
    llm_temperature: float = Field(
        default=0.0,
        ge=0,
        le=2,
        validation_alias="LLM_TEMPERATURE",
        description="Sampling temperature of LLM replies (0: the likeliest; tool calls want it low).",
    )
    # A small model that does not stop at its turn's end goes on to write the person's next
    # message: these open a new turn in the common chat templates (ChatML, Llama 3, Gemma,
    # Mistral) and never belong in an answer. OpenAI's API takes at most four.
    llm_stop: list[Annotated[str, StringConstraints(min_length=1, max_length=32)]] = Field(
        default=["<|im_start|>", "<|start_header_id|>", "<start_of_turn>", "[INST]"],
        max_length=4,
        validation_alias="LLM_STOP",
        description="Stop sequences of LLM replies, a JSON list (at most four; []: none, for models "
        "that refuse them).",
    )
