"""User accounts, for admins signed in themselves (never through the agent: no tool changes who
may use the system). Every change is in ops' audit trail (never a password).

    GET   /api/admin/users                      a page: ?q= &role= &active= &limit= &cursor=
    GET   /api/admin/users/{username}           one account, with how it last signed in
    POST  /api/admin/users                      {"username", "password", "role"}
    PATCH /api/admin/users/{username}           {"role"?, "active"?}
    POST  /api/admin/users/{username}/password  {"password"}: their sessions end
    PUT   /api/admin/users/{username}/sso       {"subject", "issuer"?}: single sign-on's link
    DELETE /api/admin/users/{username}/sso      the link undone
"""

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, HTTPException, Query, status
from pydantic import BaseModel, ConfigDict, Field

from sstools.common.catalogue import Role
from sstools.common.paging import PageQuery
from sstools.ops.api.auth import Caller
from sstools.ops.api.context import OpsContext
from sstools.ops.store.users import (
    PASSWORD_MAX_CHARS,
    PASSWORD_MIN_CHARS,
    Account,
    AccountChangeRefused,
    AccountSearch,
    ProviderSubject,
    SignInMethod,
)

ACCOUNTS_PATH = "/api/admin/users"


class AccountOut(BaseModel):
    username: str
    role: Role
    active: bool

    @classmethod
    def of(cls, account: Account) -> "AccountOut":
        return cls(username=account.username, role=account.role, active=account.active)


class LastSignInOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    method: SignInMethod
    at: datetime
    # the client's address (behind the ingress, as OPS_TRUSTED_PROXIES lets ops read it)
    address: str
    # single sign-on: the provider's group whose mapping gave the role (null: the default role)
    group: str | None


class SsoSubject(BaseModel):
    """The provider's issuer and the subject (``sub``) it gives the person: single sign-ons with
    it are this account, whatever name the provider sends."""

    model_config = ConfigDict(from_attributes=True)

    issuer: str = Field(min_length=1, max_length=500)
    subject: str = Field(min_length=1, max_length=255)


class SsoLink(BaseModel):
    subject: str = Field(min_length=1, max_length=255)
    issuer: str | None = Field(
        default=None, min_length=1, max_length=500, description="Default: the configured provider's."
    )


class AccountDetailOut(AccountOut):
    """An account as the store's :class:`AccountDetail` has it."""

    model_config = ConfigDict(from_attributes=True)

    # made by single sign-on: no password lets them in, and an admin may not set one
    sso_only: bool
    last_sign_in: LastSignInOut | None
    # linked to this single sign-on subject (null: no sign-on is this account)
    sso_subject: SsoSubject | None


class AccountsPage(BaseModel):
    items: list[AccountDetailOut]
    total: int
    next_cursor: str | None


class AccountsQuery(PageQuery):
    q: str = Field(default="", max_length=200, description="A part of the username, in any case.")
    role: Role | None = None
    active: bool | None = None


class NewAccount(BaseModel):
    username: str = Field(min_length=1, max_length=200, pattern=r"^[^\s/]+$")
    password: str = Field(min_length=PASSWORD_MIN_CHARS, max_length=PASSWORD_MAX_CHARS)
    role: Role


class AccountChange(BaseModel):
    """What to change; what is left out stays. ``active: false`` also ends the user's sessions."""

    role: Role | None = None
    active: bool | None = None


class NewPassword(BaseModel):
    password: str = Field(min_length=PASSWORD_MIN_CHARS, max_length=PASSWORD_MAX_CHARS)


_REFUSED_STATUS = {
    "user_exists": status.HTTP_409_CONFLICT,
    "user_not_found": status.HTTP_404_NOT_FOUND,
    "last_admin": status.HTTP_409_CONFLICT,
    "sso_only": status.HTTP_409_CONFLICT,
    "subject_linked": status.HTTP_409_CONFLICT,
}


@contextmanager
def refused_as_http() -> Iterator[None]:
    """An account change the store refused, as its typed HTTP answer."""
    try:
        yield
    except AccountChangeRefused as refused:
        raise HTTPException(
            _REFUSED_STATUS[refused.code], {"code": refused.code, "message": str(refused)}
        ) from None


def router(ctx: OpsContext, admin_only: object) -> APIRouter:
    users = ctx.authenticator.users
    api = APIRouter(prefix=ACCOUNTS_PATH)

    async def recorded(caller: Caller, action: str, account: AccountOut) -> AccountOut:
        await ctx.audit.record(
            service="",
            username=caller.username,
            action=action,
            target_env="",
            outcome="done",
            detail=account.model_dump(mode="json"),
        )
        return account

    @api.get("")
    async def listing(
        caller: Annotated[Caller, admin_only], query: Annotated[AccountsQuery, Query()]
    ) -> AccountsPage:
        """Accounts by name, a page at a time, with the number of all that match."""
        search = AccountSearch(text=query.q, role=query.role, active=query.active)
        page = await users.find(search, limit=query.limit, cursor=query.cursor)
        return AccountsPage(
            items=[AccountDetailOut.model_validate(account) for account in page.items],
            total=page.total,
            next_cursor=page.next_cursor,
        )

    @api.get("/{username}")
    async def one(username: str, caller: Annotated[Caller, admin_only]) -> AccountDetailOut:
        account = await users.account(username)
        if account is None:
            raise HTTPException(
                status.HTTP_404_NOT_FOUND,
                {"code": "user_not_found", "message": f"no user named {username!r}"},
            )
        return AccountDetailOut.model_validate(account)

    @api.post("", status_code=status.HTTP_201_CREATED)
    async def add(body: NewAccount, caller: Annotated[Caller, admin_only]) -> AccountOut:
        with refused_as_http():
            account = await users.add(body.username, body.password, body.role)
        return await recorded(caller, "user.add", AccountOut.of(account))

    @api.patch("/{username}")
    async def change(username: str, body: AccountChange, caller: Annotated[Caller, admin_only]) -> AccountOut:
        with refused_as_http():
            account = await users.change(username, role=body.role, active=body.active)
        return await recorded(caller, "user.change", AccountOut.of(account))

    @api.post("/{username}/password")
    async def set_password(
        username: str, body: NewPassword, caller: Annotated[Caller, admin_only]
    ) -> AccountOut:
        """A new password, chosen by the admin; every session the user has ends (they sign in
        with it). Refused for an account only single sign-on lets in (409 ``sso_only``)."""
        with refused_as_http():
            account = await users.reset_password(username, body.password, refuse_sso_only=True)
        return await recorded(caller, "user.password", AccountOut.of(account))

    @api.put("/{username}/sso")
    async def link(username: str, body: SsoLink, caller: Annotated[Caller, admin_only]) -> AccountOut:
        """Single sign-ons of this subject are this account from now on (a local account kept by
        a person who now signs in through the provider; a name the provider gave someone new)."""
        issuer = body.issuer or (ctx.single_sign_on.client.config.issuer if ctx.single_sign_on else None)
        if issuer is None:
            raise HTTPException(
                status.HTTP_422_UNPROCESSABLE_ENTITY,
                {"code": "sso_off", "message": "single sign-on is not configured: name the issuer"},
            )
        with refused_as_http():
            account = await users.link(username, ProviderSubject(issuer, body.subject))
        await ctx.audit.record(
            service="",
            username=caller.username,
            action="user.sso_link",
            target_env="",
            outcome="done",
            detail={"username": account.username, "issuer": issuer, "subject": body.subject},
        )
        return AccountOut.of(account)

    @api.delete("/{username}/sso")
    async def unlink(username: str, caller: Annotated[Caller, admin_only]) -> AccountOut:
        with refused_as_http():
            account = await users.link(username, None)
        return await recorded(caller, "user.sso_unlink", AccountOut.of(account))

    return api
