"""Refresh tokens: how a signed-in person gets a new access token without typing the password.

A refresh token is 256 random bits, shown once and kept only as its SHA-256. Every use replaces
it with a new one of the same family; a used token presented again means someone kept a copy,
so the whole family is revoked — whoever holds it signs in again. Signing out revokes the
family; a user no longer active is refused whatever token they hold. Disabling a user, or giving
them a new password, ends all their sessions (:func:`revoke_sessions_of`).
"""

import hashlib
import secrets
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy import func, insert, select, update
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from sstools.ops.store.tables import refresh_tokens, users


class RefreshRefused(Exception):
    """No new tokens for this one; ``code`` says why."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class Renewed:
    username: str
    refresh_token: str


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


async def revoke_sessions_of(connection: AsyncConnection, username: str) -> None:
    """End every session of the user, in the caller's transaction (a user disabled, or given a
    new password): their refresh tokens are revoked, and the access tokens they hold are refused
    from now on (``sessions_valid_from``, which the authenticator reads at every call).

    ``iat`` is in whole seconds, of ops' clock: so is this mark, taken from the same clock and
    rounded down, so that a sign-in right after it still works (a token issued within the same
    second before it lives out its minutes)."""
    await connection.execute(
        update(refresh_tokens)
        .where(refresh_tokens.c.username == username, refresh_tokens.c.revoked_at.is_(None))
        .values(revoked_at=func.now())
    )
    await connection.execute(
        update(users)
        .where(users.c.username == username)
        .values(sessions_valid_from=datetime.now(UTC).replace(microsecond=0))
    )


class RefreshTokens:
    def __init__(self, engine: AsyncEngine, ttl: timedelta) -> None:
        self._engine = engine
        self.ttl = ttl

    async def issue(self, username: str) -> str:
        """The first refresh token of a new sign-in."""
        async with self._engine.begin() as connection:
            return await self._insert(connection, username, uuid.uuid4())

    async def renew(self, token: str) -> Renewed:
        """A new refresh token in place of ``token``; :class:`RefreshRefused` if there is none."""
        async with self._engine.connect() as connection:
            row = (
                (
                    await connection.execute(
                        select(
                            refresh_tokens,
                            users.c.is_active,
                            (refresh_tokens.c.expires_at <= func.now()).label("expired"),
                        )
                        .outerjoin(users, users.c.username == refresh_tokens.c.username)
                        .where(refresh_tokens.c.token_hash == _digest(token))
                        .with_for_update(of=refresh_tokens)
                    )
                )
                .mappings()
                .first()
            )
            refusal = None
            if row is None:
                refusal = RefreshRefused("refresh_invalid", "not a refresh token ops issued")
            elif row["revoked_at"] is not None:
                refusal = RefreshRefused("refresh_revoked", "this session was signed out or revoked")
            elif row["used_at"] is not None:
                await self._revoke_family(connection, row["family"])
                refusal = RefreshRefused(
                    "refresh_reused", "this refresh token was used already: the session is revoked"
                )
            elif not row["is_active"]:
                await self._revoke_family(connection, row["family"])
                refusal = RefreshRefused("user_inactive", "the user does not exist or is disabled")
            elif row["expired"]:
                refusal = RefreshRefused("refresh_expired", "the session has expired: sign in again")
            if refusal is None:
                assert row is not None
                await connection.execute(
                    update(refresh_tokens).where(refresh_tokens.c.id == row["id"]).values(used_at=func.now())
                )
                renewed = Renewed(
                    row["username"], await self._insert(connection, row["username"], row["family"])
                )
            await connection.commit()  # a revocation stands even when the call is refused
        if refusal is not None:
            raise refusal
        return renewed

    async def revoke(self, token: str) -> None:
        """Sign out: the token's whole family (unknown tokens are ignored)."""
        async with self._engine.begin() as connection:
            family = await connection.scalar(
                select(refresh_tokens.c.family).where(refresh_tokens.c.token_hash == _digest(token))
            )
            if family is not None:
                await self._revoke_family(connection, family)

    async def _insert(self, connection: AsyncConnection, username: str, family: uuid.UUID) -> str:
        token = secrets.token_urlsafe(32)
        await connection.execute(
            insert(refresh_tokens).values(
                id=uuid.uuid4(),
                family=family,
                username=username,
                token_hash=_digest(token),
                expires_at=func.now() + self.ttl,
            )
        )
        return token

    @staticmethod
    async def _revoke_family(connection: AsyncConnection, family: uuid.UUID) -> None:
        await connection.execute(
            update(refresh_tokens)
            .where(refresh_tokens.c.family == family, refresh_tokens.c.revoked_at.is_(None))
            .values(revoked_at=func.now())
        )
