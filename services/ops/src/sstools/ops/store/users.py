"""Users, passwords and the tokens ops issues; the admin bootstrapped on first start; the
changes an admin makes to accounts.

Passwords are hashed with argon2id. A user's role is read from the database on every call, so
a demotion takes effect at once, whatever an older token says. Disabling a user also revokes
every refresh token they hold, so enabling them again does not bring old sessions back; so does
resetting their password.
"""

import asyncio
import hmac
import secrets
import uuid
from collections.abc import Mapping
from dataclasses import dataclass

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError
from sqlalchemy import RowMapping, func, insert, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from sstools.common.catalogue import Role
from sstools.ops.store.sessions import revoke_sessions_of
from sstools.ops.store.tables import users

_hasher = PasswordHasher()

# The shortest password an account may be given (the admin API and `sstools-ops users` both check
# it), and the longest: sign-in accepts no longer one.
PASSWORD_MIN_CHARS = 12
PASSWORD_MAX_CHARS = 1000


@dataclass(frozen=True)
class User:
    username: str
    role: Role


@dataclass(frozen=True)
class Account:
    username: str
    role: Role
    active: bool


class AccountChangeRefused(Exception):
    """An account change that cannot be made; ``code`` says why."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


class UserStore:
    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine

    async def create(self, username: str, password: str, role: Role) -> User:
        password_hash = await asyncio.to_thread(_hasher.hash, password)  # tens of ms of CPU: off the loop
        async with self._engine.begin() as connection:
            await connection.execute(
                insert(users).values(
                    id=uuid.uuid4(), username=username, password_hash=password_hash, role=role.value
                )
            )
        return User(username, role)

    async def add(self, username: str, password: str, role: Role) -> Account:
        """A new active user; :class:`AccountChangeRefused` ``user_exists`` if the name is taken."""
        try:
            await self.create(username, password, role)
        except IntegrityError:
            raise AccountChangeRefused("user_exists", f"a user named {username!r} exists") from None
        return Account(username, role, True)

    async def accounts(self) -> list[Account]:
        async with self._engine.connect() as connection:
            rows = (await connection.execute(select(users).order_by(users.c.username))).mappings()
            return [Account(row["username"], Role(row["role"]), row["is_active"]) for row in rows]

    async def change(self, username: str, *, role: Role | None, active: bool | None) -> Account:
        """Set the user's role and/or whether they are active. Refused (:class:`AccountChangeRefused`)
        for an unknown user and for a change that would leave no active admin."""
        async with self._engine.begin() as connection:
            admins, row = await _admins_and_user_locked(connection, username)
            if row is None:
                raise AccountChangeRefused("user_not_found", f"no user named {username!r}")
            after = Account(
                username, role or Role(row["role"]), row["is_active"] if active is None else active
            )
            if after.role is Role.ADMIN and after.active:
                admins.add(username)
            else:
                admins.discard(username)
            if not admins:
                raise AccountChangeRefused("last_admin", "this would leave no active admin")
            await connection.execute(
                update(users)
                .where(users.c.username == username)
                .values(role=after.role.value, is_active=after.active)
            )
            if not after.active:
                await revoke_sessions_of(connection, username)
        return after

    async def reset_password(self, username: str, password: str) -> Account:
        """Give the user a new password and revoke every refresh token they hold, in one
        transaction (their old sessions end); :class:`AccountChangeRefused` ``user_not_found`` for
        an unknown user."""
        password_hash = await asyncio.to_thread(_hasher.hash, password)  # tens of ms of CPU: off the loop
        async with self._engine.begin() as connection:
            row = (
                await connection.execute(
                    update(users)
                    .where(users.c.username == username)
                    .values(password_hash=password_hash)
                    .returning(users.c.role, users.c.is_active)
                )
            ).first()
            if row is None:
                raise AccountChangeRefused("user_not_found", f"no user named {username!r}")
            await revoke_sessions_of(connection, username)
        return Account(username, Role(row.role), row.is_active)

    async def single_sign_on(self, username: str, role: Role) -> Account:
        """The user a single sign-on names, with the role the provider's groups give: created on
        their first sign-in (with a password hash nobody can match, so password sign-in never
        lets them in), given that role at every later one. An existing account of that name is
        the same person (the provider is trusted with names); its password stays as it was.

        Refused (:class:`AccountChangeRefused`): ``user_disabled`` for a disabled account (single
        sign-on does not enable it again), ``last_admin`` for a sign-in that would demote the
        last active admin (ops would be left with no admin: the mapping is fixed first)."""
        unusable = await asyncio.to_thread(_hasher.hash, secrets.token_urlsafe(32))
        for attempt in range(2):
            try:
                async with self._engine.begin() as connection:
                    admins, row = await _admins_and_user_locked(connection, username)
                    if row is None:
                        await connection.execute(
                            insert(users).values(
                                id=uuid.uuid4(), username=username, password_hash=unusable, role=role.value
                            )
                        )
                        return Account(username, role, True)
                    if not row["is_active"]:
                        raise AccountChangeRefused("user_disabled", f"the user {username!r} is disabled")
                    if role is not Role.ADMIN and admins == {username}:
                        said = f"signing {username!r} in as {role.value} would leave no active admin"
                        raise AccountChangeRefused("last_admin", said)
                    if row["role"] != role.value:
                        await connection.execute(
                            update(users).where(users.c.username == username).values(role=role.value)
                        )
                    return Account(username, role, True)
            except IntegrityError:
                if attempt:  # created by a sign-in beside this one: read it again, once
                    raise
        raise AssertionError("unreachable")

    async def authenticate(self, username: str, password: str) -> User | None:
        """The user if the password is theirs and they are active; None otherwise (same cost)."""
        async with self._engine.connect() as connection:
            row = (
                (await connection.execute(select(users).where(users.c.username == username)))
                .mappings()
                .first()
            )
        stored = row["password_hash"] if row else _DUMMY_HASH  # unknown users cost as much as known ones
        try:  # in a thread: a hash takes tens of milliseconds of CPU, the loop must go on
            await asyncio.to_thread(_hasher.verify, stored, password)
        except (VerificationError, InvalidHashError):
            return None
        if row is None or not row["is_active"]:
            return None
        return User(row["username"], Role(row["role"]))

    async def active(self, username: str) -> User | None:
        async with self._engine.connect() as connection:
            row = (
                (
                    await connection.execute(
                        select(users).where(users.c.username == username, users.c.is_active)
                    )
                )
                .mappings()
                .first()
            )
        return User(row["username"], Role(row["role"])) if row else None

    async def bootstrap_admin(self, username: str, password: str) -> bool:
        """Create the first admin when there are no users at all; True if it was created."""
        async with self._engine.connect() as connection:
            count = await connection.scalar(select(func.count()).select_from(users))
        if count:
            return False
        await self.create(username, password, Role.ADMIN)
        return True


async def _admins_and_user_locked(
    connection: AsyncConnection, username: str
) -> tuple[set[str], RowMapping | None]:
    """The active admins' names and the user's row (None if there is none), every one of those
    rows locked in this order, so two changes that could each leave no admin (two admins
    demoting each other, a sign-in beside a demotion) are judged one after the other."""
    admins = set(
        (
            await connection.scalars(
                select(users.c.username)
                .where(users.c.role == Role.ADMIN.value, users.c.is_active)
                .order_by(users.c.username)
                .with_for_update()
            )
        ).all()
    )
    row = (
        (await connection.execute(select(users).where(users.c.username == username).with_for_update()))
        .mappings()
        .first()
    )
    return admins, row


def service_client_matches(clients: Mapping[str, str], client_id: str, secret: str) -> bool:
    expected = clients.get(client_id)
    # compare_digest even for unknown clients, so timing says nothing about which ids exist
    return hmac.compare_digest((expected or "\0").encode(), secret.encode()) and expected is not None


_DUMMY_HASH = _hasher.hash("not-a-real-password")
