from pathlib import Path
from typing import ClassVar

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import SettingsConfigDict

from sstools.common.settings import (
    AuthSettings,
    ConfirmationSettings,
    DatabaseSettings,
    LlmSettings,
    ServiceSettings,
)
from sstools.common.tokens import PublicKeyCodec, SigningKey, parse_public_keys
from sstools.ops.api.clients import parse_networks
from sstools.ops.environments import parse_environments


class OpsSettings(ServiceSettings, DatabaseSettings, AuthSettings, ConfirmationSettings, LlmSettings):
    model_config = SettingsConfigDict(env_prefix="OPS_")
    service_name: ClassVar[str] = "ops"

    http_port: int = Field(default=8000, ge=0, le=65535, description="Operations REST API port.")
    metrics_port: int = Field(default=9104, ge=0, le=65535, description="Probes and /metrics port.")
    admin_username: str = Field(
        default="admin", min_length=1, description="The admin created on first start."
    )
    admin_password: SecretStr | None = Field(
        default=None, description="Password of that admin; no admin is created while unset."
    )
    service_clients: SecretStr = Field(
        default=SecretStr(""),
        description="Services that may ask for service tokens, as id:secret pairs separated by commas.",
    )
    environments: str = Field(
        default="[]",
        validation_alias="ENVIRONMENTS",
        description="JSON list of Superset environments (id, name, url, username, password_env or _file).",
    )
    superset_timeout_seconds: float = Field(
        default=30.0, gt=0, description="Longest one Superset call may take."
    )
    superset_read_retries: int = Field(
        default=2, ge=0, le=10, description="Extra attempts of a Superset read that failed in transit."
    )
    sql_max_rows: int = Field(
        default=1000, ge=1, le=100_000, description="Most rows one SQL execution returns."
    )
    sql_timeout_seconds: float = Field(default=60.0, gt=0, description="Longest one SQL execution may take.")
    backup_dir: Path = Field(
        default=Path("/var/lib/sstools-ops/backups"), description="Where backup archives are written."
    )
    git_repo: Path = Field(
        default=Path("/var/lib/sstools-ops/exports"),
        description="The git repository of dashboard exports (created if missing).",
    )
    task_lease_seconds: float = Field(
        default=30.0,
        ge=1,
        description="A running task not renewed this long is taken over by another worker.",
    )
    jwt_private_key: SecretStr = Field(
        validation_alias="JWT_PRIVATE_KEY",
        description="Ed25519 private key (PEM) ops signs user and service tokens with; "
        "its public half must be in JWT_PUBLIC_KEYS.",
    )
    user_token_ttl_seconds: int = Field(
        default=300, ge=5, description="Life of a user (access) token from sign-in or refresh."
    )
    refresh_token_ttl_seconds: int = Field(
        default=43_200, ge=1, description="Life of a refresh token; each use gives a new one."
    )
    service_token_ttl_seconds: int = Field(default=300, ge=30, description="Life of a service token.")
    heavy_reads_per_minute: int = Field(
        default=20,
        ge=1,
        description="Health checks, SQL statements and database explorations one person may run a minute.",
    )
    idempotency_retention_seconds: int = Field(
        default=86_400,
        ge=60,
        description="How long a write's Idempotency-Key answers its repeats; past it, it is forgotten.",
    )

    login_free_failures: int = Field(
        default=5, ge=0, description="Wrong passwords per user name before each failure blocks it."
    )
    login_free_failures_per_address: int = Field(
        default=20, ge=0, description="Failed sign-ins per client address before it is blocked."
    )
    login_first_delay_seconds: float = Field(
        default=1.0, gt=0, description="Block after the first failure past the free ones; doubles."
    )
    login_max_delay_seconds: float = Field(
        default=900.0, gt=0, description="Longest block one failed sign-in earns."
    )
    login_memory_seconds: float = Field(
        default=3600.0, gt=0, description="Failures are forgotten after this long without a new one."
    )
    password_checks_at_once: int = Field(
        default=1, ge=1, description="Password hashes computed at the same time (CPU bound of a flood)."
    )
    password_checks_waiting: int = Field(
        default=256, ge=0, description="Sign-ins that may wait for a check; more are told to retry."
    )
    service_tokens_per_minute: int = Field(
        default=60, ge=1, description="Service tokens one client may be issued per minute."
    )
    trusted_proxies: str = Field(
        default="",
        description="Addresses or CIDR ranges of proxies whose X-Forwarded-For is believed.",
    )
    trusted_proxy_hops: int = Field(
        default=1,
        ge=1,
        le=10,
        description="Proxies in front of ops that append to X-Forwarded-For (the ingress alone: 1).",
    )

    @field_validator("jwt_private_key")
    @classmethod
    def _private_key(cls, value: SecretStr) -> SecretStr:
        SigningKey.from_pem(value.get_secret_value())
        return value

    @model_validator(mode="after")
    def _signing_key_is_trusted(self) -> "OpsSettings":
        self.token_codec()  # the other services must trust what ops signs: refuse to start otherwise
        return self

    def token_codec(self) -> PublicKeyCodec:
        """Verifies tokens, and signs them with ops' private key."""
        return PublicKeyCodec(
            parse_public_keys(self.jwt_public_keys),
            SigningKey.from_pem(self.jwt_private_key.get_secret_value()),
        )

    @field_validator("trusted_proxies")
    @classmethod
    def _networks(cls, value: str) -> str:
        parse_networks(value)
        return value

    @field_validator("service_clients")
    @classmethod
    def _pairs(cls, value: SecretStr) -> SecretStr:
        for pair in filter(None, value.get_secret_value().split(",")):
            client_id, _, secret = pair.partition(":")
            if not client_id or len(secret) < 16:
                raise ValueError("each service client is id:secret with a secret of 16+ characters")
        return value

    @field_validator("environments")
    @classmethod
    def _environments(cls, value: str) -> str:
        parse_environments(value)  # refuse a bad list at start, with the reason
        return value

    def clients(self) -> dict[str, str]:
        pairs = filter(None, self.service_clients.get_secret_value().split(","))
        return dict(pair.split(":", 1) for pair in pairs)
