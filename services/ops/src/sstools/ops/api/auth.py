"""Who is calling: user tokens from login, service tokens for the agent, and the dual identity of
agent calls (the service token authenticates the agent, the user token authorises the operation).
"""

from dataclasses import dataclass
from datetime import timedelta
from typing import Annotated

from fastapi import Depends, Header, HTTPException, status

from sstools.common.catalogue import Role
from sstools.common.tokens import (
    SERVICE_AUDIENCE,
    USER_AUDIENCE,
    PublicKeyCodec,
    TokenError,
    TokenType,
    superset_audience,
)
from sstools.ops.store.users import UserStore

# Life of the token that lets ops act in one Superset as a person: minted for each call, so a
# minute covers a slow one and leaves little to whoever might copy it from a log.
SUPERSET_TOKEN_TTL = timedelta(seconds=60)

# Internal addresses (Superset's and the LLM's URLs) are told to those who operate them.
SEES_ADDRESSES = Role.OPERATOR


@dataclass(frozen=True)
class Caller:
    service: str
    username: str
    role: Role

    @property
    def sees_addresses(self) -> bool:
        return self.role.at_least(SEES_ADDRESSES)


def unauthorized(code: str, message: str = "") -> HTTPException:
    return HTTPException(
        status.HTTP_401_UNAUTHORIZED,
        {"code": code, "message": message},
        headers={"WWW-Authenticate": "Bearer"},
    )


def bearer(header: str | None, missing_code: str) -> str:
    scheme, _, token = (header or "").partition(" ")
    if scheme.lower() != "bearer" or not token:
        raise unauthorized(missing_code, "expected 'Bearer <token>'")
    return token


class Authenticator:
    """``late_user``: how long after it expired a person's token still authorises an agent's call
    (beside a valid service token, never the browser's own): a turn that began while the token
    was valid — the agent checks it then — may outlive it."""

    def __init__(
        self,
        codec: PublicKeyCodec,
        users: UserStore,
        *,
        user_ttl: timedelta,
        service_ttl: timedelta,
        late_user: timedelta = timedelta(),
    ) -> None:
        self.codec = codec
        self.users = users
        self.user_ttl = user_ttl
        self.service_ttl = service_ttl
        self._late_codec = PublicKeyCodec(codec.trusted, leeway_seconds=late_user.total_seconds())

    def issue_user_token(self, username: str) -> str:
        return self.codec.issue(
            username, token_type=TokenType.USER, audience=USER_AUDIENCE, ttl=self.user_ttl
        )

    def issue_service_token(self, client_id: str) -> str:
        return self.codec.issue(
            client_id, token_type=TokenType.SERVICE, audience=SERVICE_AUDIENCE, ttl=self.service_ttl
        )

    def issue_superset_token(self, username: str, env_id: str) -> str:
        """What Superset ``env_id`` takes as this person for one call (its side of the hook
        checks the signature against ops' JWKS, the audience, the kind and the minute's life)."""
        return self.codec.issue(
            username,
            token_type=TokenType.SUPERSET,
            audience=superset_audience(env_id),
            ttl=SUPERSET_TOKEN_TTL,
        )

    async def user(self, token: str, *, late: bool = False) -> Caller:
        codec = self._late_codec if late else self.codec
        try:
            claims = codec.verify(token, audience=USER_AUDIENCE, token_type=TokenType.USER)
        except TokenError as error:
            raise unauthorized(error.code, str(error)) from None
        user = await self.users.active(claims.subject)
        if user is None:
            raise unauthorized("user_inactive", "the user does not exist or is disabled")
        if user.sessions_valid_from is not None and claims.issued_at < user.sessions_valid_from:
            raise unauthorized("session_ended", "this session was ended (a new password?): sign in again")
        return Caller("", user.username, user.role)

    def service(self, token: str) -> str:
        try:
            return self.codec.verify(token, audience=SERVICE_AUDIENCE, token_type=TokenType.SERVICE).subject
        except TokenError as error:
            raise unauthorized(error.code, str(error)) from None


def admin_only(user_only: object) -> object:
    """The dependency of an admin's own call (accounts, the audit trail): the browser's user,
    refused unless an admin now."""

    async def admin(caller: Annotated[Caller, user_only]) -> Caller:
        if caller.role is not Role.ADMIN:
            raise HTTPException(
                status.HTTP_403_FORBIDDEN,
                {
                    "code": "permission_denied",
                    "required_role": Role.ADMIN.value,
                    "user_role": caller.role.value,
                },
            )
        return caller

    return Depends(admin)


def dependencies(authenticator: Authenticator) -> tuple[object, object]:
    """FastAPI dependencies: the browser's user alone, and an agent call's two identities."""

    async def user_only(authorization: Annotated[str | None, Header()] = None) -> Caller:
        return await authenticator.user(bearer(authorization, "user_token_missing"))

    async def agent_for_user(
        authorization: Annotated[str | None, Header()] = None,
        x_user_authorization: Annotated[str | None, Header()] = None,
    ) -> Caller:
        service = authenticator.service(bearer(authorization, "service_token_missing"))
        user = await authenticator.user(bearer(x_user_authorization, "user_token_missing"), late=True)
        return Caller(service, user.username, user.role)

    return Depends(user_only), Depends(agent_for_user)
