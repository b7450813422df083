"""Ops REST: sign-in, service tokens, and the authoritative permission check for the agent's tools."""

from typing import Annotated

from fastapi import FastAPI, HTTPException, status
from pydantic import BaseModel, Field

from sstools.common.catalogue import tool_names
from sstools.common.policy import decide
from sstools.ops.api.auth import Authenticator, Caller, dependencies, unauthorized
from sstools.ops.audit import AuditLog
from sstools.ops.environments import Environment
from sstools.ops.identity import service_client_matches
from sstools.ops.sql import SqlNotParsed, classify, format_sql


class Login(BaseModel):
    username: str = Field(min_length=1, max_length=200)
    password: str = Field(min_length=1, max_length=1000)


class ServiceLogin(BaseModel):
    client_id: str = Field(min_length=1, max_length=200)
    client_secret: str = Field(min_length=1, max_length=1000)


class TokenOut(BaseModel):
    access_token: str
    token_type: str = "bearer"
    expires_in: int


class Me(BaseModel):
    username: str
    role: str


class AuthorizeIn(BaseModel):
    env_id: str | None = Field(default=None, max_length=200)
    # For superset_execute_sql: the statement; ops decides itself whether it changes anything.
    sql: str | None = Field(default=None, max_length=100_000)


class AuthorizeOut(BaseModel):
    tool: str
    allowed: bool
    user_role: str
    required_role: str
    tier: str
    risk_level: str
    env: str | None
    needs_confirmation: bool


class EnvironmentOut(BaseModel):
    id: str
    name: str
    url: str
    production: bool


class SqlIn(BaseModel):
    sql: str = Field(min_length=1, max_length=100_000)
    dialect: str = Field(default="postgres", pattern=r"^[a-z0-9]+$")


class SqlFormatted(BaseModel):
    sql: str
    statements: int
    read_only: bool


def _require(caller: Caller, tool: str) -> None:
    """403 unless the caller's role may run ``tool`` (an operation with no target environment)."""
    if not decide(tool).allows(caller.role):
        raise HTTPException(status.HTTP_403_FORBIDDEN, {"code": "role_too_low", "tool": tool})


def build_app(
    authenticator: Authenticator,
    audit: AuditLog,
    service_clients: dict[str, str],
    environments: dict[str, Environment],
) -> FastAPI:
    app = FastAPI(title="SS-Tools operations", version="0.1.0")
    user_only, agent_for_user = dependencies(authenticator)
    known_tools = set(tool_names())

    @app.post("/api/auth/login")
    async def login(body: Login) -> TokenOut:
        user = await authenticator.users.authenticate(body.username, body.password)
        if user is None:
            raise unauthorized("bad_credentials", "unknown user or wrong password")
        ttl = int(authenticator.user_ttl.total_seconds())
        return TokenOut(access_token=authenticator.issue_user_token(user.username), expires_in=ttl)

    @app.post("/api/auth/service-token")
    async def service_token(body: ServiceLogin) -> TokenOut:
        if not service_client_matches(service_clients, body.client_id, body.client_secret):
            raise unauthorized("bad_client_credentials", "unknown service client or wrong secret")
        ttl = int(authenticator.service_ttl.total_seconds())
        return TokenOut(access_token=authenticator.issue_service_token(body.client_id), expires_in=ttl)

    @app.get("/api/auth/me")
    async def me(caller: Annotated[Caller, user_only]) -> Me:
        return Me(username=caller.username, role=caller.role.value)

    @app.post("/api/tools/{tool}/authorize")
    async def authorize(
        tool: str, body: AuthorizeIn, caller: Annotated[Caller, agent_for_user]
    ) -> AuthorizeOut:
        """Ops' answer, the authoritative one, to "may this user run this tool here?"."""
        if tool not in known_tools:
            raise HTTPException(status.HTTP_404_NOT_FOUND, {"code": "unknown_tool", "tool": tool})
        mutating = body.sql is not None and not classify(body.sql).read_only
        decision = decide(tool, body.env_id, mutating_sql=mutating)
        allowed = decision.allows(caller.role)
        await audit.record(
            service=caller.service,
            username=caller.username,
            action=f"authorize:{tool}",
            target_env=body.env_id or "",
            outcome="allowed" if allowed else "denied",
            detail={"required_role": decision.required_role.value, "user_role": caller.role.value},
        )
        return AuthorizeOut(
            tool=tool,
            allowed=allowed,
            user_role=caller.role.value,
            required_role=decision.required_role.value,
            tier=decision.tier.value,
            risk_level=decision.risk_level.value,
            env=decision.env,
            needs_confirmation=decision.needs_confirmation,
        )

    @app.get("/api/environments")
    async def list_environments(caller: Annotated[Caller, agent_for_user]) -> list[EnvironmentOut]:
        """list_environments: where ops can act; credentials never leave."""
        _require(caller, "list_environments")
        return [
            EnvironmentOut(id=env.id, name=env.name, url=str(env.url), production=bool(env.production))
            for env in environments.values()
        ]

    @app.post("/api/sql/format")
    async def format_statement(body: SqlIn, caller: Annotated[Caller, agent_for_user]) -> SqlFormatted:
        """superset_format_sql: formatted locally, nothing is run."""
        _require(caller, "superset_format_sql")
        try:
            formatted = format_sql(body.sql, body.dialect)
        except SqlNotParsed as error:
            raise HTTPException(
                status.HTTP_422_UNPROCESSABLE_CONTENT, {"code": "sql_not_parsed", "message": str(error)}
            ) from None
        shape = classify(body.sql, body.dialect)
        return SqlFormatted(sql=formatted, statements=shape.statements, read_only=shape.read_only)

    return app
