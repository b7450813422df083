"""Users, passwords and the tokens ops issues; the admin bootstrapped on first start.

Passwords are hashed with argon2id. A user's role is read from the database on every call, so
a demotion takes effect at once, whatever an older token says.
"""

import asyncio
import hmac
import uuid
from collections.abc import Mapping
from dataclasses import dataclass

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError
from sqlalchemy import func, insert, select
from sqlalchemy.ext.asyncio import AsyncEngine

from sstools.common.catalogue import Role
from sstools.ops.store.tables import users

_hasher = PasswordHasher()


@dataclass(frozen=True)
class User:
    username: str
    role: Role


class UserStore:
    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine

    async def create(self, username: str, password: str, role: Role) -> User:
        async with self._engine.begin() as connection:
            await connection.execute(
                insert(users).values(
                    id=uuid.uuid4(), username=username, password_hash=_hasher.hash(password), role=role.value
                )
            )
        return User(username, role)

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
