"""Users, passwords and the tokens ops issues; the admin bootstrapped on first start; the
changes an admin makes to accounts.

Passwords are hashed with argon2id. A user's role is read from the database on every call, so
a demotion takes effect at once, whatever an older token says. Disabling a user also ends every
session they have (refresh tokens revoked, older access tokens refused), so enabling them again
does not bring old sessions back; so does resetting their password. Each account keeps how it
last signed in (password or single sign-on, when, from which address), for admins to see.
"""

import asyncio
import hmac
import secrets
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError
from sqlalchemy import ColumnElement, RowMapping, func, insert, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from sstools.common.catalogue import Role
from sstools.common.paging import BadCursor, decode_cursor, encode_cursor, substring_pattern
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
    # access tokens issued before this are refused (see sessions.revoke_sessions_of)
    sessions_valid_from: datetime | None = None


@dataclass(frozen=True)
class Account:
    username: str
    role: Role
    active: bool


@dataclass(frozen=True)
class ProviderSubject:
    """Who a single sign-on provider says a person is: its issuer and the subject (``sub``) it
    gives them, which it never gives anyone else (OpenID Connect Core §2). A name may change
    hands at the provider; this does not."""

    issuer: str
    subject: str

    @property
    def key(self) -> tuple[str, str]:
        return (self.issuer, self.subject)


SignInMethod = Literal["password", "sso"]


@dataclass(frozen=True)
class SignIn:
    """One sign-in, as kept for admins."""

    method: SignInMethod
    address: str  # the client's, as ops.api.clients.client_address reads it
    group: str | None = None  # sso: the group whose mapping gave the role (None: the default role)


@dataclass(frozen=True)
class LastSignIn:
    method: SignInMethod
    at: datetime
    address: str
    group: str | None


@dataclass(frozen=True)
class AccountDetail(Account):
    """An account as an admin sees it."""

    sso_only: bool
    last_sign_in: LastSignIn | None
    sso_subject: ProviderSubject | None = None


@dataclass(frozen=True)
class AccountSearch:
    """Which accounts a listing shows: ``text`` anywhere in the name (any case), and the role
    and whether active, when given."""

    text: str = ""
    role: Role | None = None
    active: bool | None = None


@dataclass(frozen=True)
class AccountPage:
    items: list[AccountDetail]
    total: int  # every account the search matches, on all pages
    next_cursor: str | None


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

    async def find(self, search: AccountSearch, *, limit: int, cursor: str | None = None) -> AccountPage:
        """The accounts ``search`` matches, by name, ``limit`` from past the one ``cursor`` names."""
        conditions: list[ColumnElement[bool]] = []
        if search.text:
            conditions.append(users.c.username.ilike(substring_pattern(search.text), escape="\\"))
        if search.role is not None:
            conditions.append(users.c.role == search.role.value)
        if search.active is not None:
            conditions.append(users.c.is_active.is_(search.active))
        query = select(users).where(*conditions)
        if cursor:
            (after,) = decode_cursor(cursor, 1)
            if not isinstance(after, str):
                raise BadCursor("page token is not valid")
            query = query.where(users.c.username > after)
        async with self._engine.connect() as connection:
            total = await connection.scalar(select(func.count()).select_from(users).where(*conditions))
            rows = list(
                (await connection.execute(query.order_by(users.c.username).limit(limit + 1))).mappings()
            )
        shown = [_detail(row) for row in rows[:limit]]
        more = len(rows) > limit
        return AccountPage(shown, total or 0, encode_cursor(shown[-1].username) if more else None)

    async def account(self, username: str) -> AccountDetail | None:
        async with self._engine.connect() as connection:
            row = (
                (await connection.execute(select(users).where(users.c.username == username)))
                .mappings()
                .first()
            )
        return _detail(row) if row else None

    async def signed_in(self, username: str, sign_in: SignIn) -> None:
        """Keep ``sign_in`` as the user's last one."""
        async with self._engine.begin() as connection:
            await connection.execute(
                update(users)
                .where(users.c.username == username)
                .values(
                    last_sign_in_method=sign_in.method,
                    last_sign_in_at=func.now(),
                    last_sign_in_address=sign_in.address,
                    last_sign_in_group=sign_in.group,
                )
            )

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

    async def reset_password(self, username: str, password: str, *, refuse_sso_only: bool) -> Account:
        """Give the user a new password and end every session of theirs, in one transaction.
        Refused (:class:`AccountChangeRefused`): ``user_not_found`` for an unknown user and, when
        ``refuse_sso_only``, ``sso_only`` for an account only single sign-on lets in (a password
        would outlive their removal at the provider). Once given one, it is an account like any
        other."""
        password_hash = await asyncio.to_thread(_hasher.hash, password)  # tens of ms of CPU: off the loop
        async with self._engine.begin() as connection:
            row = (
                await connection.execute(
                    select(users.c.role, users.c.is_active, users.c.sso_only)
                    .where(users.c.username == username)
                    .with_for_update()
                )
            ).first()
            if row is None:
                raise AccountChangeRefused("user_not_found", f"no user named {username!r}")
            if refuse_sso_only and row.sso_only:
                raise AccountChangeRefused(
                    "sso_only", f"{username!r} signs in only through single sign-on: no password is set"
                )
            await connection.execute(
                update(users)
                .where(users.c.username == username)
                .values(password_hash=password_hash, sso_only=False)
            )
            await revoke_sessions_of(connection, username)
        return Account(username, Role(row.role), row.is_active)

    async def single_sign_on(self, name: str, role: Role, subject: ProviderSubject) -> Account:
        """The account the provider's ``subject`` is linked to, with the role the provider's
        groups give. Found by the subject alone (its name stays the account's, whatever the
        provider calls the person now); at a subject's first sign-in made under ``name`` (with a
        password hash nobody can match, so password sign-in never lets them in: ``sso_only``) —
        only if no account holds that name: a local account's name, or one linked to another
        subject, is never taken over by a sign-in (an admin links them: :meth:`link`).

        Refused (:class:`AccountChangeRefused`): ``name_taken`` for that, ``user_disabled`` for a
        disabled account (single sign-on does not enable it again), ``last_admin`` for a sign-in
        that would demote the last active admin (ops would be left with no admin: the mapping is
        fixed first)."""
        unusable = await asyncio.to_thread(_hasher.hash, secrets.token_urlsafe(32))
        for attempt in range(2):
            try:
                async with self._engine.begin() as connection:
                    linked = await connection.scalar(
                        select(users.c.username).where(
                            users.c.oidc_issuer == subject.issuer, users.c.oidc_subject == subject.subject
                        )
                    )
                    username = linked or name
                    admins, row = await _admins_and_user_locked(connection, username)
                    if row is None:
                        await connection.execute(
                            insert(users).values(
                                id=uuid.uuid4(),
                                username=username,
                                password_hash=unusable,
                                role=role.value,
                                sso_only=True,
                                oidc_issuer=subject.issuer,
                                oidc_subject=subject.subject,
                            )
                        )
                        return Account(username, role, True)
                    if linked is None or (row["oidc_issuer"], row["oidc_subject"]) != subject.key:
                        raise AccountChangeRefused(
                            "name_taken",
                            f"the name {username!r} belongs to an account this sign-in is not linked to",
                        )
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

    async def link(self, username: str, subject: ProviderSubject | None) -> Account:
        """Link the account to the provider's ``subject`` (its single sign-ons then are this
        account), or unlink it (None). Refused: ``user_not_found``; ``subject_linked`` when another
        account holds that subject."""
        issuer, sub = subject.key if subject else (None, None)
        try:
            async with self._engine.begin() as connection:
                row = (
                    await connection.execute(
                        update(users)
                        .where(users.c.username == username)
                        .values(oidc_issuer=issuer, oidc_subject=sub)
                        .returning(users.c.username, users.c.role, users.c.is_active)
                    )
                ).first()
        except IntegrityError:
            raise AccountChangeRefused(
                "subject_linked", "another account is already linked to that single sign-on subject"
            ) from None
        if row is None:
            raise AccountChangeRefused("user_not_found", f"no user named {username!r}")
        return Account(row.username, Role(row.role), row.is_active)

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
        return User(row["username"], Role(row["role"]), row["sessions_valid_from"]) if row else None

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


def _detail(row: RowMapping) -> AccountDetail:
    method = row["last_sign_in_method"]
    return AccountDetail(
        row["username"],
        Role(row["role"]),
        row["is_active"],
        sso_only=row["sso_only"],
        last_sign_in=LastSignIn(
            method, row["last_sign_in_at"], row["last_sign_in_address"] or "", row["last_sign_in_group"]
        )
        if method
        else None,
        sso_subject=ProviderSubject(row["oidc_issuer"], row["oidc_subject"]) if row["oidc_subject"] else None,
    )


def service_client_matches(clients: Mapping[str, str], client_id: str, secret: str) -> bool:
    expected = clients.get(client_id)
    # compare_digest even for unknown clients, so timing says nothing about which ids exist
    return hmac.compare_digest((expected or "\0").encode(), secret.encode()) and expected is not None


_DUMMY_HASH = _hasher.hash("not-a-real-password")
