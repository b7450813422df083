"""Users, passwords and the tokens ops issues; the admin bootstrapped on first start; the
changes an admin makes to accounts.

Passwords are hashed with argon2id. A user's role is read from the database on every call, so
a demotion takes effect at once, whatever an older token says. Disabling a user also revokes
every refresh token they hold, so enabling them again does not bring old sessions back.
"""

import asyncio
import hmac
import uuid
from collections.abc import Mapping
from dataclasses import dataclass

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError
from sqlalchemy import func, insert, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine

from sstools.common.catalogue import Role
from sstools.ops.store.sessions import revoke_sessions_of
from sstools.ops.store.tables import users

_hasher = PasswordHasher()


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
            # Every active admin's row is locked first, so two admins demoting each other at once
            # are judged one after the other.
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
                (
                    await connection.execute(
                        select(users).where(users.c.username == username).with_for_update()
                    )
                )
                .mappings()
                .first()
            )
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


def service_client_matches(clients: Mapping[str, str], client_id: str, secret: str) -> bool:
    expected = clients.get(client_id)
    # compare_digest even for unknown clients, so timing says nothing about which ids exist
    return hmac.compare_digest((expected or "\0").encode(), secret.encode()) and expected is not None


_DUMMY_HASH = _hasher.hash("not-a-real-password")
