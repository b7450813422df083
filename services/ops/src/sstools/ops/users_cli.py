"""`sstools-ops users ...`: user accounts from a shell inside the ops pod, straight to ops'
PostgreSQL (no HTTP, no signed-in admin), beside the admin API (``/api/admin/users``).

    sstools-ops users add NAME --role ROLE [--password-stdin]
    sstools-ops users list [--json]
    sstools-ops users set-role NAME ROLE
    sstools-ops users disable NAME
    sstools-ops users enable NAME
    sstools-ops users reset-password NAME [--password-stdin]
    sstools-ops users link NAME --issuer URL --subject SUB
    sstools-ops users unlink NAME

A password is asked twice on the terminal, or read from stdin with ``--password-stdin``; never
from the command line, where ``ps`` and shell history would keep it. Only ``DATABASE_URL`` is
read. The rules are the API's: the same roles and password length, no change that leaves no
active admin, disabling and resetting a password end the user's sessions; every change is in
ops' audit trail as ``cli:<OS user>``. Exit status: 0 done, 2 refused or misused, 1 the database
could not be used.
"""

import argparse
import asyncio
import getpass
import json
import os
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import NoReturn, TextIO

from pydantic_settings import SettingsConfigDict
from sqlalchemy import make_url
from sqlalchemy.exc import DBAPIError, OperationalError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
from sqlalchemy.pool import NullPool

from sstools.common.catalogue import Role
from sstools.common.db import DatabaseUrlError, async_url
from sstools.common.settings import DatabaseSettings
from sstools.ops.store.audit import AuditLog
from sstools.ops.store.users import (
    PASSWORD_MAX_CHARS,
    PASSWORD_MIN_CHARS,
    Account,
    AccountChangeRefused,
    ProviderSubject,
    UserStore,
)

PROG = "sstools-ops users"
# What the admin API accepts as a name (its NewAccount model): no spaces, no slash, 1-200 characters.
USERNAME_PATTERN = re.compile(r"^[^\s/]+$")
USERNAME_MAX_CHARS = 200
CONNECT_TIMEOUT_SECONDS = 10

DONE, FAILED, REFUSED = 0, 1, 2


class UsersCliSettings(DatabaseSettings):
    """All the command reads: ``DATABASE_URL`` (no keys, no secrets, no ports)."""

    model_config = SettingsConfigDict(extra="ignore", frozen=True, populate_by_name=True)


class Refused(Exception):
    """What was asked cannot be done; the message says why, in one line."""


class _Parser(argparse.ArgumentParser):
    """Usage errors as :class:`Refused` (one line, exit 2), not argparse's usage and exit."""

    def error(self, message: str) -> NoReturn:
        # not echoed: they may be a password (`--password s3cret`, `--password-stdin=s3cret`)
        if message.startswith("unrecognized arguments:") or "ignored explicit argument" in message:
            message = "unexpected arguments (a password is never taken from the command line)"
        raise Refused(f"{message} (see `{self.prog} --help`)")


def _os_user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # a pod's uid with no passwd entry and no LOGNAME/USER
        return str(os.getuid())


@dataclass
class Console:
    """Where the command reads and writes; tests pass their own."""

    stdin: TextIO = field(default_factory=lambda: sys.stdin)
    stdout: TextIO = field(default_factory=lambda: sys.stdout)
    stderr: TextIO = field(default_factory=lambda: sys.stderr)
    ask_secret: Callable[[str], str] = getpass.getpass  # prompts on the terminal, echoes nothing
    operator: str = field(default_factory=lambda: f"cli:{_os_user()}")


def parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog=PROG,
        description="User accounts of ops, straight in its database (DATABASE_URL).",
        allow_abbrev=False,  # options spelt out in full: `--pass` is not `--password-stdin`
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=_Parser)
    stdin_help = "read the password from stdin (one line) instead of asking twice on the terminal"

    add = commands.add_parser("add", help="add an active user", allow_abbrev=False)
    add.add_argument("username", metavar="NAME")
    add.add_argument("--role", required=True, help=", ".join(role.value for role in Role))
    add.add_argument("--password-stdin", action="store_true", help=stdin_help)

    listing = commands.add_parser("list", help="every user: name, role, active", allow_abbrev=False)
    listing.add_argument("--json", action="store_true", help="a JSON list instead of a table")

    set_role = commands.add_parser("set-role", help="change a user's role", allow_abbrev=False)
    set_role.add_argument("username", metavar="NAME")
    set_role.add_argument("role", metavar="ROLE", help=", ".join(role.value for role in Role))

    for name, text in (
        ("disable", "disable a user and end their sessions"),
        ("enable", "enable a user again (they sign in anew)"),
    ):
        commands.add_parser(name, help=text, allow_abbrev=False).add_argument("username", metavar="NAME")

    reset = commands.add_parser(
        "reset-password", help="set a new password and end the user's sessions", allow_abbrev=False
    )
    reset.add_argument("username", metavar="NAME")
    reset.add_argument("--password-stdin", action="store_true", help=stdin_help)

    link = commands.add_parser(
        "link",
        help="single sign-ons of this provider subject are this account",
        allow_abbrev=False,
    )
    link.add_argument("username", metavar="NAME")
    link.add_argument("--issuer", required=True, help="the provider's issuer, as OPS_OIDC_ISSUER names it")
    link.add_argument("--subject", required=True, help="the sub claim the provider gives the person")
    commands.add_parser(
        "unlink", help="no single sign-on is this account any more", allow_abbrev=False
    ).add_argument("username", metavar="NAME")
    return parser


def role_named(value: str) -> Role:
    try:
        return Role(value)
    except ValueError:
        raise Refused(f"no role {value!r}: one of {', '.join(role.value for role in Role)}") from None


def checked_username(value: str) -> str:
    if len(value) > USERNAME_MAX_CHARS or not USERNAME_PATTERN.match(value):
        raise Refused(f"{value!r} is not a user name: 1-{USERNAME_MAX_CHARS} characters, no spaces or '/'")
    return value


def checked_password(password: str) -> str:
    if len(password) < PASSWORD_MIN_CHARS:
        raise Refused(f"the password is too short: at least {PASSWORD_MIN_CHARS} characters")
    if len(password) > PASSWORD_MAX_CHARS:
        raise Refused(f"the password is too long: at most {PASSWORD_MAX_CHARS} characters")
    return password


def read_password(console: Console, from_stdin: bool) -> str:
    """The new password: stdin's first line, or asked twice on the terminal (both must match)."""
    if from_stdin:
        line = console.stdin.readline()
        return checked_password(line.removesuffix("\n").removesuffix("\r"))
    try:
        first = console.ask_secret("New password: ")
        checked_password(first)
        second = console.ask_secret("Same password again: ")
    except EOFError:
        raise Refused("no password given (no terminal? use --password-stdin)") from None
    if first != second:
        raise Refused("the two passwords differ; nothing changed")
    return first


def engine_for(database_url: str) -> AsyncEngine:
    """One connection, given up at the end; a server that does not answer is given up on too."""
    url = async_url(database_url)
    connect_args = {} if "connect_timeout" in url.query else {"connect_timeout": CONNECT_TIMEOUT_SECONDS}
    return create_async_engine(url, poolclass=NullPool, connect_args=connect_args)


def _table(accounts: list[Account]) -> str:
    rows = [("USERNAME", "ROLE", "ACTIVE")] + [
        (account.username, account.role.value, "yes" if account.active else "no") for account in accounts
    ]
    widths = [max(len(row[column]) for row in rows) for column in range(2)]
    return "\n".join(
        f"{row[0].ljust(widths[0])}  {row[1].ljust(widths[1])}  {row[2]}".rstrip() for row in rows
    )


async def execute(args: argparse.Namespace, engine: AsyncEngine, console: Console) -> str:
    """Do the command; what to print on success. Raises :class:`Refused` or
    :class:`AccountChangeRefused` for what cannot be done, before anything changed."""
    users = UserStore(engine)
    linked: dict[str, str] = {}
    if args.command == "list":
        accounts = await users.accounts()
        if args.json:
            return json.dumps(
                [{"username": a.username, "role": a.role.value, "active": a.active} for a in accounts],
                indent=2,
            )
        return _table(accounts)

    username: str = args.username
    if args.command == "add":
        checked_username(username)
        role = role_named(args.role)
        if await _account(users, username) is not None:  # before asking for a password in vain
            raise AccountChangeRefused("user_exists", f"a user named {username!r} exists")
        account = await users.add(username, read_password(console, args.password_stdin), role)
        action, said = "user.add", f"added {username} ({role.value})"
    elif args.command == "set-role":
        role = role_named(args.role)
        account = await users.change(username, role=role, active=None)
        action, said = "user.change", f"{username} is now {role.value}"
    elif args.command in ("disable", "enable"):
        active = args.command == "enable"
        account = await users.change(username, role=None, active=active)
        action = "user.change"
        said = f"enabled {username}" if active else f"disabled {username}; their sessions are ended"
    elif args.command == "reset-password":
        if await _account(users, username) is None:  # before asking for a password in vain
            raise AccountChangeRefused("user_not_found", f"no user named {username!r}")
        # the way in when nothing else works: an account only single sign-on let in may be given
        # a password here (the admin API refuses that)
        account = await users.reset_password(
            username, read_password(console, args.password_stdin), refuse_sso_only=False
        )
        action, said = "user.reset_password", f"new password for {username}; their sessions are ended"
    elif args.command == "link":
        if not args.issuer or not args.subject:
            raise Refused("the issuer and the subject may not be empty")
        account = await users.link(username, ProviderSubject(args.issuer, args.subject))
        action, said = "user.sso_link", f"single sign-ons of {args.subject!r} at {args.issuer} are {username}"
        linked = {"issuer": args.issuer, "subject": args.subject}
    elif args.command == "unlink":
        account = await users.link(username, None)
        action, said = "user.sso_unlink", f"no single sign-on is {username} any more"
    else:  # pragma: no cover — argparse allows only the commands above
        raise Refused(f"unknown command {args.command!r}")
    await AuditLog(engine).record(
        service="",
        username=console.operator,
        action=action,
        target_env="",
        outcome="done",
        detail={"username": account.username, "role": account.role.value, "active": account.active, **linked},
    )
    return said


async def _account(users: UserStore, username: str) -> Account | None:
    return next((account for account in await users.accounts() if account.username == username), None)


def _database_problem(error: DBAPIError, database_url: str) -> str:
    reason = str(error.orig or error).strip().splitlines()
    where = make_url(database_url).render_as_string(hide_password=True)
    if isinstance(error, OperationalError):
        return f"cannot reach the database {where}: {reason[0] if reason else 'no reason given'}"
    return (
        f"the database {where} refused: {reason[0] if reason else 'no reason given'}"
        " (is it migrated? `sstools-ops migrate`)"
    )


async def run(argv: Sequence[str], database_url: str, console: Console | None = None) -> int:
    """The command in ``argv`` (what follows ``users``) against ``database_url``: its exit status."""
    console = console or Console()
    try:
        args = parser().parse_args(list(argv))
        engine = engine_for(database_url)
    except Refused as refused:
        print(f"{PROG}: {refused}", file=console.stderr)
        return REFUSED
    except DatabaseUrlError as error:
        print(f"{PROG}: {error}", file=console.stderr)
        return FAILED
    except SystemExit as done:  # --help printed
        return done.code if isinstance(done.code, int) else REFUSED
    try:
        said = await execute(args, engine, console)
    except (Refused, AccountChangeRefused) as refused:
        print(f"{PROG}: {refused}", file=console.stderr)
        return REFUSED
    except DBAPIError as error:
        print(f"{PROG}: {_database_problem(error, database_url)}", file=console.stderr)
        return FAILED
    except OSError as error:
        print(f"{PROG}: cannot reach the database: {error}", file=console.stderr)
        return FAILED
    finally:
        await engine.dispose()
    print(said, file=console.stdout)
    return DONE


def main(argv: Sequence[str] | None = None) -> int:
    """``sstools-ops users ...``: reads ``DATABASE_URL`` and nothing else; the exit status."""
    database_url = UsersCliSettings().database_url
    try:
        return asyncio.run(run(sys.argv[2:] if argv is None else argv, database_url))
    except KeyboardInterrupt:
        print(file=sys.stderr)
        return 130
