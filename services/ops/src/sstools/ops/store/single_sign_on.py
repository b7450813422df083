"""Single sign-on's one-time rows: sign-ins under way, and the hand-offs of finished ones.

A sign-in under way is keyed by its ``state`` (256 random bits) and holds what the callback
checks the provider's answer with: the nonce, the PKCE verifier, where the page wants to return,
whether it was a silent (``prompt=none``) one, and the client address that started it. It lives
:data:`LOGIN_TTL` and is deleted by the callback that uses it, so a state works once. Their
number is bounded (anyone may start one): past ``limit`` rows under way, the oldest of the
address with the most gives way to a start from an address with fewer, and a start from the
heaviest address itself is refused — so no address, nor a few, can keep the rest out.

A finished sign-in is handed to the page without a token in any URL: a random code (kept as
SHA-256 only) that the page posts within :data:`HANDOFF_TTL` for the session, once, from the
browser that holds the hand-off's second secret (a cookie the callback set): a code carried to
another browser is refused (login CSRF).
"""

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from datetime import timedelta

from sqlalchemy import Interval, delete, desc, func, insert, literal, select, text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from sstools.ops.store.tables import oidc_handoffs, oidc_logins

LOGIN_TTL = timedelta(minutes=10)
HANDOFF_TTL = timedelta(seconds=60)
# A sign-in under way that has not yet outlived LOGIN_TTL (judged by the database's clock).
_LIVE = oidc_logins.c.created_at > func.now() - literal(LOGIN_TTL, Interval)


@dataclass(frozen=True)
class PendingLogin:
    state: str
    nonce: str
    code_verifier: str
    return_to: str
    prompt_none: bool


@dataclass(frozen=True)
class HandOff:
    """A finished sign-in's code for the page, and the secret its browser keeps beside it."""

    code: str
    browser_secret: str


@dataclass(frozen=True)
class Redeemed:
    """Whom a hand-off was for, and whether the browser redeeming it is the one it was given to."""

    username: str
    same_browser: bool


class TooManyPending(Exception):
    """More sign-ins are under way than allowed; try again later."""


def _digest(code: str) -> str:
    return hashlib.sha256(code.encode()).hexdigest()


class SingleSignOnStore:
    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine

    async def begin(self, return_to: str, *, prompt_none: bool, address: str, limit: int) -> PendingLogin:
        """A new sign-in under way from ``address``. When ``limit`` are already, the oldest of the
        address with the most under way makes room, unless that is ``address`` itself (or ties
        with it): then :class:`TooManyPending`."""
        login = PendingLogin(
            state=secrets.token_urlsafe(32),
            nonce=secrets.token_urlsafe(32),
            code_verifier=secrets.token_urlsafe(48),  # 64 characters: RFC 7636 asks 43-128
            return_to=return_to,
            prompt_none=prompt_none,
        )
        async with self._engine.begin() as connection:
            # one start at a time decides who gives way, so two cannot both take the last room
            await connection.execute(text("SELECT pg_advisory_xact_lock(hashtext('ops_oidc_logins'))"))
            pending = await connection.scalar(select(func.count()).select_from(oidc_logins).where(_LIVE))
            if (pending or 0) >= limit:
                await self._make_room(connection, address, pending or 0)
            await connection.execute(
                insert(oidc_logins).values(
                    state=login.state,
                    nonce=login.nonce,
                    code_verifier=login.code_verifier,
                    return_to=login.return_to,
                    prompt_none=login.prompt_none,
                    address=address,
                )
            )
        return login

    @staticmethod
    async def _make_room(connection: AsyncConnection, address: str, pending: int) -> None:
        count = func.count().label("started")
        heaviest = (
            await connection.execute(
                select(oidc_logins.c.address, count)
                .where(_LIVE)
                .group_by(oidc_logins.c.address)
                .order_by(desc(count))
                .limit(1)
            )
        ).first()
        own = await connection.scalar(
            select(func.count()).select_from(oidc_logins).where(_LIVE, oidc_logins.c.address == address)
        )
        if heaviest is None or heaviest.address == address or heaviest.started <= (own or 0):
            raise TooManyPending(f"{pending} single sign-ins are under way, {own} from this address")
        oldest = await connection.scalar(
            select(oidc_logins.c.state)
            .where(_LIVE, oidc_logins.c.address == heaviest.address)
            .order_by(oidc_logins.c.created_at)
            .limit(1)
        )
        await connection.execute(delete(oidc_logins).where(oidc_logins.c.state == oldest))

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
                            _LIVE.label("live"),
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

    async def hand_off(self, username: str) -> HandOff:
        """A one-time code the page exchanges for ``username``'s session within HANDOFF_TTL, with
        the secret the browser it is given to must show beside it."""
        handoff = HandOff(code=secrets.token_urlsafe(32), browser_secret=secrets.token_urlsafe(32))
        async with self._engine.begin() as connection:
            await connection.execute(
                insert(oidc_handoffs).values(
                    code_hash=_digest(handoff.code),
                    username=username,
                    browser_hash=_digest(handoff.browser_secret),
                    expires_at=func.now() + literal(HANDOFF_TTL, Interval),
                )
            )
        return handoff

    async def redeem(self, code: str, browser_secret: str | None) -> Redeemed | None:
        """Whom the code was handed off for, used up whoever redeems it; None if unknown, used or
        expired. ``same_browser`` only when ``browser_secret`` is the one handed out with it."""
        async with self._engine.begin() as connection:
            row = (
                await connection.execute(
                    delete(oidc_handoffs)
                    .where(oidc_handoffs.c.code_hash == _digest(code))
                    .returning(
                        oidc_handoffs.c.username,
                        oidc_handoffs.c.browser_hash,
                        (oidc_handoffs.c.expires_at > func.now()).label("live"),
                    )
                )
            ).first()
        if row is None or not row.live:
            return None
        same = (
            browser_secret is not None
            and row.browser_hash is not None
            and hmac.compare_digest(row.browser_hash, _digest(browser_secret))
        )
        return Redeemed(str(row.username), same)

    async def sweep(self) -> int:
        """Forget sign-ins that never came back and hand-offs never taken; how many went."""
        async with self._engine.begin() as connection:
            logins = await connection.execute(delete(oidc_logins).where(~_LIVE))
            handoffs = await connection.execute(
                delete(oidc_handoffs).where(oidc_handoffs.c.expires_at <= func.now())
            )
        return int(logins.rowcount or 0) + int(handoffs.rowcount or 0)
