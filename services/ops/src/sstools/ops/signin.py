"""Sign-in under limits: who may try a password or a client secret now, and how many are checked
at once.

A password check costs an argon2 hash (tens of milliseconds of several cores): a flood of
logins must not take ops' CPU. So attempts are counted and blocked per user name and per client
address (:mod:`sstools.ops.store.limits`, shared by replicas), and the hashes themselves run a
few at a time in worker threads, with a bounded queue in which an attempt whose name and
address have no recent failures — most likely a person — goes ahead of suspect ones.
"""

import asyncio
import heapq
import itertools
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import timedelta

from sstools.ops.store.limits import Attempt, Backoff, Limits
from sstools.ops.store.users import User, UserStore, service_client_matches


class SignInRefused(Exception):
    """Not now: ``code`` says why (too many attempts, or too many checks waiting)."""

    def __init__(self, code: str, message: str, retry_after: int) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.retry_after = retry_after


def _busy() -> SignInRefused:
    return SignInRefused("sign_in_busy", "too many sign-ins are being checked; try again", 1)


class PasswordChecks:
    """At most ``at_once`` password checks run; ``waiting`` more may queue, clean ones first.

    A full queue refuses a suspect attempt; a clean one takes the place of the newest suspect.
    """

    def __init__(self, at_once: int, waiting: int) -> None:
        self._free = at_once
        self._waiting = waiting
        self._queue: list[tuple[bool, int, asyncio.Future[None]]] = []  # (suspect, order, turn)
        self._order = itertools.count()

    @asynccontextmanager
    async def slot(self, *, suspect: bool) -> AsyncIterator[None]:
        await self._acquire(suspect)
        try:
            yield
        finally:
            self._release()

    async def _acquire(self, suspect: bool) -> None:
        if self._free and not self._queue:
            self._free -= 1
            return
        if len(self._queue) >= self._waiting:
            self._make_room(suspect)
        turn = asyncio.get_running_loop().create_future()
        entry = (suspect, next(self._order), turn)
        heapq.heappush(self._queue, entry)
        try:
            await turn
        except asyncio.CancelledError:
            if turn.done() and not turn.cancelled() and turn.exception() is None:
                self._release()  # the slot was handed over as the caller left: pass it on
            elif entry in self._queue:
                self._queue.remove(entry)
                heapq.heapify(self._queue)
            raise

    def _make_room(self, suspect: bool) -> None:
        suspects = [entry for entry in self._queue if entry[0]]
        if suspect or not suspects:
            raise _busy()
        newest = max(suspects, key=lambda entry: entry[1])
        self._queue.remove(newest)
        heapq.heapify(self._queue)
        newest[2].set_exception(_busy())

    def _release(self) -> None:
        while self._queue:
            _, _, turn = heapq.heappop(self._queue)
            if not turn.done():
                turn.set_result(None)
                return
        self._free += 1


# Failures on a name or address before its attempts wait behind others.
SUSPECT_AFTER = 1


@dataclass(frozen=True)
class SignInPolicy:
    per_user: Backoff
    per_address: Backoff
    service_tokens_per_minute: int


@dataclass
class SignIns:
    users: UserStore
    limits: Limits
    checks: PasswordChecks
    policy: SignInPolicy
    service_clients: Mapping[str, str] = field(default_factory=dict)

    async def password(self, username: str, password: str, address: str) -> User | None:
        """The user if the password is theirs; None if not; :class:`SignInRefused` if not now."""
        user_key = f"login:user:{username.casefold()}"
        address_key = f"login:address:{address}"
        attempt = await self._attempt({user_key: self.policy.per_user, address_key: self.policy.per_address})
        try:
            async with self.checks.slot(suspect=attempt.failures_before >= SUSPECT_AFTER):
                user = await self.users.authenticate(username, password)
        except SignInRefused:
            await self.limits.refund(user_key, address_key)  # the check never ran: not a failure
            raise
        if user is not None:
            # they proved who they are: their count starts over; the address may be shared (an
            # office), so only this attempt is taken back from it
            await self.limits.clear(user_key)
            await self.limits.refund(address_key)
        return user

    async def service(self, client_id: str, secret: str, address: str) -> bool:
        """Whether the client's secret is right. Failures count per address only: client ids are
        no secret, and blocking one would let anyone cut the agent off from ops. A right secret
        counts against the client's issuance rate instead."""
        address_key = f"service:address:{address}"
        await self._attempt({address_key: self.policy.per_address})
        if not service_client_matches(self.service_clients, client_id, secret):
            return False
        await self.limits.refund(address_key)
        wait = await self.limits.hit(
            f"service:issued:{client_id}", self.policy.service_tokens_per_minute, timedelta(minutes=1)
        )
        if wait is not None:
            raise SignInRefused("too_many_tokens", "too many service tokens asked for", wait)
        return True

    async def _attempt(self, keys: dict[str, Backoff]) -> Attempt:
        attempt = await self.limits.attempt(keys)
        if attempt.retry_after is not None:
            raise SignInRefused("too_many_attempts", "too many failed sign-ins", attempt.retry_after)
        return attempt
