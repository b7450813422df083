from pathlib import Path
from typing import ClassVar
from urllib.parse import urlsplit

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
from sstools.ops.oidc import OidcConfig, parse_default_role, parse_role_mapping


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
    sql_timeout_seconds: float = Field(
        default=120.0,
        gt=0,
        description="Longest one SQL execution may take (Superset's SQLLAB_TIMEOUT and its web "
        "server's timeout must allow it).",
    )
    read_wait_seconds: float = Field(
        default=20.0,
        gt=0,
        description="How long a request for a slow read (a statement, a health check) waits for it "
        "before answering with the task that goes on with it (below the agent's tool timeout, 30 s "
        "by default).",
    )
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
    late_user_token_seconds: int = Field(
        default=900,
        ge=0,
        le=3600,
        description="How long after it expired a user token still authorises the agent's calls (beside "
        "a valid service token; never the browser's own): a turn may outlive the token it began with.",
    )
    heavy_reads_per_minute: int = Field(
        default=20,
        ge=1,
        description="Health checks, SQL statements and database explorations one person may run a minute.",
    )
    read_retention_seconds: int = Field(
        default=86_400,
        ge=60,
        description="How long the task of a slow read (its rows, its report) is kept once it ended.",
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

    password_sign_in: bool = Field(
        default=True,
        description="Whether POST /api/auth/login takes passwords; false: 403 password_sign_in_off "
        "(single sign-on alone).",
    )
    oidc_issuer: str = Field(
        default="",
        description="Issuer URL of the OpenID Connect provider for single sign-on; empty: SSO off.",
    )
    oidc_client_id: str = Field(default="", description="Ops' client id at that provider.")
    oidc_client_secret: SecretStr = Field(
        default=SecretStr(""),
        description="Ops' client secret at that provider (client_secret_basic); "
        "or OPS_OIDC_CLIENT_SECRET_FILE.",
    )
    oidc_client_secret_file: Path | None = Field(
        default=None,
        description="A file holding the client secret (a mounted Secret), read at each use.",
    )
    oidc_scopes: str = Field(
        default="openid profile email groups", description="Scopes asked for; must include openid."
    )
    oidc_username_claim: str = Field(
        default="preferred_username",
        min_length=1,
        description="ID token claim that is the ops username (1-200 characters, no whitespace or '/').",
    )
    oidc_groups_claim: str = Field(
        default="groups",
        min_length=1,
        description="ID token claim listing the person's groups (missing: no groups).",
    )
    oidc_role_mapping: str = Field(
        default="{}",
        description="JSON object group -> role (viewer, analyst, operator, admin), "
        'e.g. {"bi-admins": "admin"}; several mapped groups: the highest role.',
    )
    oidc_default_role: str = Field(
        default="",
        description="Role of a person in no mapped group; empty: they are refused (oidc_unmapped).",
    )
    oidc_provider_name: str = Field(
        default="SSO", min_length=1, max_length=100, description="The provider's name on the sign-in button."
    )
    oidc_redirect_url: str = Field(
        default="",
        description="Public URL of ops' callback as the browser reaches it, "
        "e.g. https://agent.example.com/api/auth/oidc/callback (registered at the provider).",
    )
    oidc_pending_sign_ins: int = Field(
        default=1000,
        ge=1,
        description="Single sign-ins started and not yet back (10 minutes each) past which new ones get 429.",
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

    @field_validator("oidc_client_secret_file", mode="before")
    @classmethod
    def _empty_is_unset(cls, value: object) -> object:
        return None if value == "" else value

    @field_validator("oidc_role_mapping")
    @classmethod
    def _role_mapping(cls, value: str) -> str:
        parse_role_mapping(value)  # bad JSON or an unknown role: refuse to start, with the reason
        return value

    @field_validator("oidc_default_role")
    @classmethod
    def _default_role(cls, value: str) -> str:
        parse_default_role(value)
        return value

    @model_validator(mode="after")
    def _single_sign_on(self) -> "OpsSettings":
        if not self.oidc_issuer:
            if not self.password_sign_in:
                raise ValueError(
                    "OPS_PASSWORD_SIGN_IN is false and OPS_OIDC_ISSUER is empty: nobody could sign in"
                )
            return self
        issuer = urlsplit(self.oidc_issuer)
        if issuer.scheme not in ("http", "https") or not issuer.netloc or issuer.query or issuer.fragment:
            raise ValueError("OPS_OIDC_ISSUER must be an http(s) URL without query or fragment")
        redirect = urlsplit(self.oidc_redirect_url)
        if redirect.scheme not in ("http", "https") or not redirect.netloc or redirect.fragment:
            raise ValueError("OPS_OIDC_REDIRECT_URL must be the callback's absolute http(s) URL")
        if not self.oidc_client_id:
            raise ValueError("OPS_OIDC_ISSUER is set: OPS_OIDC_CLIENT_ID is required")
        has_secret = bool(self.oidc_client_secret.get_secret_value())
        if has_secret == (self.oidc_client_secret_file is not None):
            raise ValueError(
                "single sign-on needs a client secret: give one of OPS_OIDC_CLIENT_SECRET and "
                "OPS_OIDC_CLIENT_SECRET_FILE"
            )
        # The file is read at each use, not here: `sstools-ops migrate` (the chart's Job) reads
        # these settings too, and need not have the secret mounted.
        if "openid" not in self.oidc_scopes.split():
            raise ValueError("OPS_OIDC_SCOPES must include openid")
        if not parse_role_mapping(self.oidc_role_mapping) and not self.oidc_default_role:
            raise ValueError(
                "OPS_OIDC_ISSUER is set: OPS_OIDC_ROLE_MAPPING or OPS_OIDC_DEFAULT_ROLE is required "
                "(else nobody could sign in)"
            )
        return self

    def oidc_client_secret_value(self) -> str:
        """The client secret: the variable's, or the file's as it is now (a rotated Secret is
        picked up without a restart)."""
        if self.oidc_client_secret_file is None:
            secret = self.oidc_client_secret.get_secret_value()
        else:
            try:
                secret = self.oidc_client_secret_file.read_text().strip()
            except OSError as error:
                said = f"OPS_OIDC_CLIENT_SECRET_FILE {self.oidc_client_secret_file} cannot be read"
                raise ValueError(f"{said}: {error.strerror}") from None
        if not secret:
            raise ValueError("single sign-on needs a client secret (OPS_OIDC_CLIENT_SECRET or _FILE)")
        return secret

    def oidc_config(self) -> OidcConfig | None:
        """Single sign-on's configuration; None while it is off."""
        if not self.oidc_issuer:
            return None
        return OidcConfig(
            issuer=self.oidc_issuer,
            client_id=self.oidc_client_id,
            client_secret=self.oidc_client_secret_value,
            redirect_url=self.oidc_redirect_url,
            scopes=" ".join(self.oidc_scopes.split()),
            username_claim=self.oidc_username_claim,
            groups_claim=self.oidc_groups_claim,
            role_mapping=parse_role_mapping(self.oidc_role_mapping),
            default_role=parse_default_role(self.oidc_default_role),
            provider_name=self.oidc_provider_name,
        )

    def clients(self) -> dict[str, str]:
        pairs = filter(None, self.service_clients.get_secret_value().split(","))
        return dict(pair.split(":", 1) for pair in pairs)
