"""User accounts, for admins signed in themselves (never through the agent: no tool changes who
may use the system). Every change is in ops' audit trail."""

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated

from fastapi import APIRouter, Depends, HTTPException, status
from pydantic import BaseModel, Field

from sstools.common.catalogue import Role
from sstools.ops.api.auth import Caller
from sstools.ops.api.context import OpsContext
from sstools.ops.store.users import PASSWORD_MIN_CHARS, Account, AccountChangeRefused

ACCOUNTS_PATH = "/api/admin/users"


class AccountOut(BaseModel):
    username: str
    role: Role
    active: bool

    @classmethod
    def of(cls, account: Account) -> "AccountOut":
        return cls(username=account.username, role=account.role, active=account.active)


class NewAccount(BaseModel):
    username: str = Field(min_length=1, max_length=200, pattern=r"^[^\s/]+$")
    password: str = Field(min_length=PASSWORD_MIN_CHARS, max_length=1000)
    role: Role


class AccountChange(BaseModel):
    """What to change; what is left out stays. ``active: false`` also ends the user's sessions."""

    role: Role | None = None
    active: bool | None = None


_REFUSED_STATUS = {
    "user_exists": status.HTTP_409_CONFLICT,
    "user_not_found": status.HTTP_404_NOT_FOUND,
    "last_admin": status.HTTP_409_CONFLICT,
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


def router(ctx: OpsContext, user_only: object) -> APIRouter:
    users = ctx.authenticator.users

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

    api = APIRouter(prefix=ACCOUNTS_PATH)
    admin_only = Depends(admin)

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
    async def listing(caller: Annotated[Caller, admin_only]) -> list[AccountOut]:
        return [AccountOut.of(account) for account in await users.accounts()]

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

    return api
