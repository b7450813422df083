"""Sign-in, service tokens, who am I, and "may this user run this tool here?"."""

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Request, status
from pydantic import BaseModel, Field

from sstools.common.catalogue import EXAMPLE_PROMPTS, IDLE_EXAMPLES, tool_names
from sstools.common.policy import decide
from sstools.common.tokens import jwks
from sstools.ops.api.auth import Caller, unauthorized
from sstools.ops.api.clients import client_address
from sstools.ops.api.context import OpsContext
from sstools.ops.api.guard import Guard
from sstools.ops.environments import Environment
from sstools.ops.signin import SignInRefused
from sstools.ops.store.sessions import RefreshRefused
from sstools.ops.store.users import SignIn


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


class SessionOut(TokenOut):
    """A person's tokens: a short-lived access token, and the refresh token that renews it."""

    refresh_token: str
    refresh_expires_in: int


class RefreshIn(BaseModel):
    refresh_token: str = Field(min_length=1, max_length=200)


class Example(BaseModel):
    """A request an empty chat offers, in both languages."""

    tool: str
    ru: str
    en: str


class Me(BaseModel):
    username: str
    role: str
    # what this role may ask, for an empty chat (the catalogue's idle examples it may run)
    examples: list[Example]

    @classmethod
    def of(cls, caller: Caller) -> "Me":
        examples = [
            Example(tool=name, ru=EXAMPLE_PROMPTS[name][0], en=EXAMPLE_PROMPTS[name][1])
            for name in IDLE_EXAMPLES
            if decide(name, None, production=False).allows(caller.role)
        ]
        return cls(username=caller.username, role=caller.role.value, examples=examples[:4])


class AuthorizeIn(BaseModel):
    env_id: str | None = Field(default=None, max_length=200)


class AuthorizeOut(BaseModel):
    tool: str
    allowed: bool
    user_role: str
    required_role: str
    tier: str
    risk_level: str
    env: str | None
    needs_confirmation: bool


class EnvironmentNamed(BaseModel):
    """What anyone signed in may know of an environment: no address, no credentials."""

    id: str
    name: str
    production: bool

    @staticmethod
    def fields(env: Environment) -> dict[str, Any]:
        return {"id": env.id, "name": env.name, "production": env.production}


class EnvironmentChoice(EnvironmentNamed):
    """An environment as a person picks it, with the browser origin its drawer speaks from, when
    it has one."""

    origin: str | None = None

    @classmethod
    def of(cls, env: Environment) -> "EnvironmentChoice":
        return cls(**cls.fields(env), origin=env.browser_origin)


@contextmanager
def refused_as_429() -> Iterator[None]:
    """A sign-in refused for now: 429 with the seconds to wait, in the body and Retry-After."""
    try:
        yield
    except SignInRefused as refused:
        raise HTTPException(
            status.HTTP_429_TOO_MANY_REQUESTS,
            {"code": refused.code, "message": refused.message, "retry_after": refused.retry_after},
            headers={"Retry-After": str(refused.retry_after)},
        ) from None


def session_out(ctx: OpsContext, username: str, refresh_token: str) -> SessionOut:
    """A signed-in person's tokens (password sign-in, refresh and single sign-on alike): a new
    access token, and ``refresh_token`` from :class:`RefreshTokens`."""
    return SessionOut(
        access_token=ctx.authenticator.issue_user_token(username),
        expires_in=int(ctx.authenticator.user_ttl.total_seconds()),
        refresh_token=refresh_token,
        refresh_expires_in=int(ctx.sessions.ttl.total_seconds()),
    )


def router(ctx: OpsContext, guard: Guard, user_only: object, agent_for_user: object) -> APIRouter:
    api = APIRouter()
    authenticator = ctx.authenticator
    known_tools = set(tool_names())

    @api.post("/api/auth/login")
    async def login(body: Login, request: Request) -> SessionOut:
        if not ctx.password_sign_in:
            raise HTTPException(
                status.HTTP_403_FORBIDDEN,
                {"code": "password_sign_in_off", "message": "password sign-in is off: use single sign-on"},
            )
        address = client_address(request, ctx.trusted_proxies)
        with refused_as_429():
            user = await ctx.sign_ins.password(body.username, body.password, address)
        if user is None:
            raise unauthorized("bad_credentials", "unknown user or wrong password")
        await authenticator.users.signed_in(user.username, SignIn("password", address))
        return session_out(ctx, user.username, await ctx.sessions.issue(user.username))

    @api.post("/api/auth/refresh")
    async def refresh(body: RefreshIn) -> SessionOut:
        """New tokens for a refresh token, which is used up: the answer carries its successor."""
        try:
            renewed = await ctx.sessions.renew(body.refresh_token)
        except RefreshRefused as refused:
            raise unauthorized(refused.code, str(refused)) from None
        return session_out(ctx, renewed.username, renewed.refresh_token)

    @api.post("/api/auth/logout", status_code=status.HTTP_204_NO_CONTENT)
    async def logout(body: RefreshIn) -> None:
        """Sign out: the session's refresh tokens are revoked (its access token ends by itself)."""
        await ctx.sessions.revoke(body.refresh_token)

    @api.post("/api/auth/service-token")
    async def service_token(body: ServiceLogin, request: Request) -> TokenOut:
        address = client_address(request, ctx.trusted_proxies)
        with refused_as_429():
            if not await ctx.sign_ins.service(body.client_id, body.client_secret, address):
                raise unauthorized("bad_client_credentials", "unknown service client or wrong secret")
        ttl = int(authenticator.service_ttl.total_seconds())
        return TokenOut(access_token=authenticator.issue_service_token(body.client_id), expires_in=ttl)

    @api.get("/.well-known/jwks.json")
    async def public_keys() -> dict[str, Any]:
        """The public keys ops' tokens are verified with (RFC 7517), ``kid`` by ``kid``."""
        return jwks(authenticator.codec.trusted.values())

    @api.get("/api/auth/me")
    async def me(caller: Annotated[Caller, user_only]) -> Me:
        return Me.of(caller)

    @api.get("/api/auth/environments")
    async def environments(caller: Annotated[Caller, user_only]) -> list[EnvironmentChoice]:
        """The environments a signed-in person can point the page at: ids and names only (the
        operations on them go through the agent, under both identities)."""
        return [EnvironmentChoice.of(env) for env in ctx.supersets.environments.values()]

    @api.post("/api/tools/{tool}/authorize")
    async def authorize(
        tool: str, body: AuthorizeIn, caller: Annotated[Caller, agent_for_user]
    ) -> AuthorizeOut:
        """Ops' answer, the authoritative one, to "may this user run this tool here?"."""
        if tool not in known_tools:
            raise HTTPException(status.HTTP_404_NOT_FOUND, {"code": "unknown_tool", "tool": tool})
        # For SQL: may they run it at all (a statement is judged by the sql/shape endpoint, in
        # its database's dialect).
        decision = guard.decision(tool, body.env_id)
        allowed = decision.allows(caller.role)
        await ctx.audit.record(
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

    return api
