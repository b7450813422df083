"""Single sign-on's one-time rows: sign-ins under way, and the hand-offs of finished ones.

A sign-in under way is keyed by its ``state`` (256 random bits) and holds what the callback
checks the provider's answer with: the nonce, the PKCE verifier, where the page wants to return,
and whether it was a silent (``prompt=none``) one. It lives :data:`LOGIN_TTL` and is deleted by
the callback that uses it, so a state works once. Their number is bounded: past ``limit`` rows
under way, a new sign-in is refused (anyone may start one).

A finished sign-in is handed to the page without a token in any URL: a random code (kept as
SHA-256 only) that the page posts within :data:`HANDOFF_TTL` for the session, once.
"""

import hashlib
import secrets
from dataclasses import dataclass
from datetime import timedelta

from sqlalchemy import Interval, delete, func, insert, literal, select
from sqlalchemy.ext.asyncio import AsyncEngine

from sstools.ops.store.tables import oidc_handoffs, oidc_logins

LOGIN_TTL = timedelta(minutes=10)
HANDOFF_TTL = timedelta(seconds=60)


@dataclass(frozen=True)
class PendingLogin:
    state: str
    nonce: str
    code_verifier: str
    return_to: str
    prompt_none: bool


class TooManyPending(Exception):
    """More sign-ins are under way than allowed; try again later."""


def _digest(code: str) -> str:
    return hashlib.sha256(code.encode()).hexdigest()


class SingleSignOnStore:
    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine

    async def begin(self, return_to: str, *, prompt_none: bool, limit: int) -> PendingLogin:
        """A new sign-in under way; :class:`TooManyPending` when ``limit`` are already."""
        login = PendingLogin(
            state=secrets.token_urlsafe(32),
            nonce=secrets.token_urlsafe(32),
            code_verifier=secrets.token_urlsafe(48),  # 64 characters: RFC 7636 asks 43-128
            return_to=return_to,
            prompt_none=prompt_none,
        )
        async with self._engine.begin() as connection:
            pending = await connection.scalar(
                select(func.count())
                .select_from(oidc_logins)
                .where(oidc_logins.c.created_at > func.now() - literal(LOGIN_TTL, Interval))
            )
            if (pending or 0) >= limit:
                raise TooManyPending(f"{pending} single sign-ins are under way")
            await connection.execute(
                insert(oidc_logins).values(
                    state=login.state,
                    nonce=login.nonce,
                    code_verifier=login.code_verifier,
                    return_to=login.return_to,
                    prompt_none=login.prompt_none,
                )
            )
        return login

    async def take(self, state: str) -> PendingLogin | None:
        """The sign-in ``state`` names, deleted as it is read; None if unknown, used or expired."""
        async with self._engine.begin() as connection:
            row = (
                (
                    await connection.execute(
                        delete(oidc_logins)
                        .where(oidc_logins.c.state == state)
                        .returning(
                            oidc_logins,
                            (oidc_logins.c.created_at > func.now() - literal(LOGIN_TTL, Interval)).label(
                                "live"
                            ),
                        )
                    )
                )
                .mappings()
                .first()
            )
        if row is None or not row["live"]:
            return None
        return PendingLogin(
            state=row["state"],
            nonce=row["nonce"],
            code_verifier=row["code_verifier"],
            return_to=row["return_to"],
            prompt_none=row["prompt_none"],
        )

    async def hand_off(self, username: str) -> str:
        """A one-time code the page exchanges for ``username``'s session within HANDOFF_TTL."""
        code = secrets.token_urlsafe(32)
        async with self._engine.begin() as connection:
            await connection.execute(
                insert(oidc_handoffs).values(
                    code_hash=_digest(code),
                    username=username,
                    expires_at=func.now() + literal(HANDOFF_TTL, Interval),
                )
            )
        return code

    async def redeem(self, code: str) -> str | None:
        """The username the code was handed off for, once; None if unknown, used or expired."""
        async with self._engine.begin() as connection:
            row = (
                await connection.execute(
                    delete(oidc_handoffs)
                    .where(oidc_handoffs.c.code_hash == _digest(code))
                    .returning(
                        oidc_handoffs.c.username, (oidc_handoffs.c.expires_at > func.now()).label("live")
                    )
                )
            ).first()
        if row is None or not row.live:
            return None
        return str(row.username)

    async def sweep(self) -> int:
        """Forget sign-ins that never came back and hand-offs never taken; how many went."""
        async with self._engine.begin() as connection:
            logins = await connection.execute(
                delete(oidc_logins).where(
                    oidc_logins.c.created_at <= func.now() - literal(LOGIN_TTL, Interval)
                )
            )
            handoffs = await connection.execute(
                delete(oidc_handoffs).where(oidc_handoffs.c.expires_at <= func.now())
            )
        return int(logins.rowcount or 0) + int(handoffs.rowcount or 0)
