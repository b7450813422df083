"""`sstools-ops users ...` against a real PostgreSQL: each command's effect in ops' tables, the
sessions it ends, its refusals (exit 2, one line, nothing changed), the last-admin guard, the
audit trail without passwords, and the console script run with DATABASE_URL alone."""

import asyncio
import io
import json
import os
import pwd
import sys
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from sstools.common.catalogue import Role
from sstools.devstack.testing import free_port
from sstools.ops.api.routes.accounts import NewAccount
from sstools.ops.store.sessions import RefreshRefused, RefreshTokens
from sstools.ops.store.users import (
    PASSWORD_MAX_CHARS,
    PASSWORD_MIN_CHARS,
    AccountChangeRefused,
    ProviderSubject,
    User,
    UserStore,
)
from sstools.ops.users_cli import USERNAME_MAX_CHARS, USERNAME_PATTERN, Console, run

ROOT_PASSWORD = "root-long-password"
ANNA_PASSWORD = "anna-long-password"
NEW_PASSWORD = "a-brand-new-password"
OPERATOR = "cli:tester"
SCRIPT = Path(sys.executable).parent / "sstools-ops"


@dataclass
class Ran:
    code: int
    out: str
    err: str
    prompts: list[str]


async def cli(
    database_url: str, *argv: str, typed: tuple[str, ...] = (), stdin: str = "", operator: str = OPERATOR
) -> Ran:
    """The command with ``typed`` as what is typed at each password prompt (none left: EOF, as
    with no terminal) and ``stdin`` on stdin."""
    answers, prompts = iter(typed), []

    def ask_secret(prompt: str) -> str:
        prompts.append(prompt)
        try:
            return next(answers)
        except StopIteration:
            raise EOFError from None

    out, err = io.StringIO(), io.StringIO()
    console = Console(
        stdin=io.StringIO(stdin), stdout=out, stderr=err, ask_secret=ask_secret, operator=operator
    )
    code = await run(argv, database_url, console)
    return Ran(code, out.getvalue(), err.getvalue(), prompts)


@pytest.fixture
async def users(emptied_engine: AsyncEngine) -> UserStore:
    """The admin ``root`` and the analyst ``anna``, nothing else."""
    store = UserStore(emptied_engine)
    await store.create("root", ROOT_PASSWORD, Role.ADMIN)
    await store.create("anna", ANNA_PASSWORD, Role.ANALYST)
    return store


@pytest.fixture
def sessions(emptied_engine: AsyncEngine) -> RefreshTokens:
    return RefreshTokens(emptied_engine, timedelta(hours=1))


async def audit_rows(engine: AsyncEngine) -> list[tuple[str, str, dict[str, Any]]]:
    async with engine.connect() as connection:
        rows = await connection.execute(
            text("SELECT username, action, detail FROM ops_audit ORDER BY at, action")
        )
        return [(row[0], row[1], row[2]) for row in rows]


async def whole_audit_text(engine: AsyncEngine) -> str:
    async with engine.connect() as connection:
        rows = await connection.execute(text("SELECT row_to_json(a)::text FROM ops_audit a"))
        return "\n".join(row[0] for row in rows)


async def refused_code(sessions: RefreshTokens, token: str) -> str | None:
    try:
        await sessions.renew(token)
    except RefreshRefused as refused:
        return refused.code
    return None


async def test_add_makes_an_active_user_with_the_password_typed_twice(
    users: UserStore, emptied_engine: AsyncEngine, module_database: str
) -> None:
    typed = ("nina-long-pass-1", "nina-long-pass-1")
    ran = await cli(module_database, "add", "nina", "--role", "operator", typed=typed)
    assert (ran.code, ran.out, ran.err) == (0, "added nina (operator)\n", "")
    assert len(ran.prompts) == 2
    assert await users.authenticate("nina", "nina-long-pass-1") == User("nina", Role.OPERATOR)
    assert await users.authenticate("nina", "nina-long-pass-2") is None

    piped = await cli(
        module_database, "add", "sam", "--role", "viewer", "--password-stdin", stdin="sam-long-password\n"
    )
    assert (piped.code, piped.out, piped.prompts) == (0, "added sam (viewer)\n", [])
    assert await users.authenticate("sam", "sam-long-password") == User("sam", Role.VIEWER)

    assert await audit_rows(emptied_engine) == [
        (OPERATOR, "user.add", {"username": "nina", "role": "operator", "active": True}),
        (OPERATOR, "user.add", {"username": "sam", "role": "viewer", "active": True}),
    ]
    trail = await whole_audit_text(emptied_engine)
    assert "nina-long-pass" not in trail
    assert "sam-long-password" not in trail


async def test_list_shows_every_user_as_a_table_or_as_json(users: UserStore, module_database: str) -> None:
    await users.add("zed", "zed-long-password", Role.OPERATOR)
    await users.change("zed", role=None, active=False)
    table = await cli(module_database, "list")
    assert table.code == 0
    assert [line.split() for line in table.out.splitlines()] == [
        ["USERNAME", "ROLE", "ACTIVE"],
        ["anna", "analyst", "yes"],
        ["root", "admin", "yes"],
        ["zed", "operator", "no"],
    ]
    as_json = await cli(module_database, "list", "--json")
    assert as_json.code == 0
    assert json.loads(as_json.out) == [
        {"username": "anna", "role": "analyst", "active": True},
        {"username": "root", "role": "admin", "active": True},
        {"username": "zed", "role": "operator", "active": False},
    ]


async def test_set_role_changes_the_role_at_once(
    users: UserStore, emptied_engine: AsyncEngine, module_database: str
) -> None:
    ran = await cli(module_database, "set-role", "anna", "operator")
    assert (ran.code, ran.out, ran.err) == (0, "anna is now operator\n", "")
    assert await users.active("anna") == User("anna", Role.OPERATOR)
    assert await audit_rows(emptied_engine) == [
        (OPERATOR, "user.change", {"username": "anna", "role": "operator", "active": True})
    ]


async def test_disable_ends_the_users_sessions_and_enable_brings_none_back(
    users: UserStore, sessions: RefreshTokens, emptied_engine: AsyncEngine, module_database: str
) -> None:
    anna_token, root_token = await sessions.issue("anna"), await sessions.issue("root")
    ran = await cli(module_database, "disable", "anna")
    assert (ran.code, ran.out, ran.err) == (0, "disabled anna; their sessions are ended\n", "")
    assert await users.authenticate("anna", ANNA_PASSWORD) is None
    assert await users.active("anna") is None
    assert await refused_code(sessions, anna_token) == "refresh_revoked"
    assert await refused_code(sessions, root_token) is None  # only hers

    again = await cli(module_database, "enable", "anna")
    assert (again.code, again.out) == (0, "enabled anna\n")
    assert await users.authenticate("anna", ANNA_PASSWORD) == User("anna", Role.ANALYST)
    assert await refused_code(sessions, anna_token) == "refresh_revoked"
    assert await audit_rows(emptied_engine) == [
        (OPERATOR, "user.change", {"username": "anna", "role": "analyst", "active": False}),
        (OPERATOR, "user.change", {"username": "anna", "role": "analyst", "active": True}),
    ]


async def test_reset_password_replaces_the_password_and_ends_the_users_sessions(
    users: UserStore, sessions: RefreshTokens, emptied_engine: AsyncEngine, module_database: str
) -> None:
    anna_token, root_token = await sessions.issue("anna"), await sessions.issue("root")
    ran = await cli(module_database, "reset-password", "anna", typed=(NEW_PASSWORD, NEW_PASSWORD))
    assert (ran.code, ran.out, ran.err) == (0, "new password for anna; their sessions are ended\n", "")
    assert await users.authenticate("anna", ANNA_PASSWORD) is None
    assert await users.authenticate("anna", NEW_PASSWORD) == User("anna", Role.ANALYST)
    assert await refused_code(sessions, anna_token) == "refresh_revoked"
    assert await refused_code(sessions, root_token) is None

    piped = await cli(
        module_database, "reset-password", "root", "--password-stdin", stdin="root-newer-password\n"
    )
    assert piped.code == 0
    assert await users.authenticate("root", "root-newer-password") == User("root", Role.ADMIN)

    assert await audit_rows(emptied_engine) == [
        (OPERATOR, "user.reset_password", {"username": "anna", "role": "analyst", "active": True}),
        (OPERATOR, "user.reset_password", {"username": "root", "role": "admin", "active": True}),
    ]
    trail = await whole_audit_text(emptied_engine)
    assert NEW_PASSWORD not in trail
    assert "root-newer-password" not in trail


async def test_a_disabled_users_password_can_be_reset_and_they_stay_disabled(
    users: UserStore, module_database: str
) -> None:
    await users.change("anna", role=None, active=False)
    ran = await cli(module_database, "reset-password", "anna", typed=(NEW_PASSWORD, NEW_PASSWORD))
    assert ran.code == 0
    assert await users.authenticate("anna", NEW_PASSWORD) is None
    await users.change("anna", role=None, active=True)
    assert await users.authenticate("anna", NEW_PASSWORD) == User("anna", Role.ANALYST)


SHORT = "x" * (PASSWORD_MIN_CHARS - 1)


async def test_link_makes_a_provider_subject_an_account_s_and_unlink_undoes_it(
    users: UserStore, emptied_engine: AsyncEngine, module_database: str
) -> None:
    issuer = "https://idp.example"
    ran = await cli(module_database, "link", "anna", "--issuer", issuer, "--subject", "u-17")
    assert (ran.code, ran.err) == (0, "")
    subject = ProviderSubject(issuer, "u-17")
    account = await users.single_sign_on("someone-else", Role.VIEWER, subject)  # the provider's name now
    assert (account.username, account.role) == ("anna", Role.VIEWER)
    taken = await cli(module_database, "link", "root", "--issuer", issuer, "--subject", "u-17")
    assert (taken.code, taken.out) == (2, "")
    assert "already linked" in taken.err
    assert (await cli(module_database, "unlink", "anna")).code == 0
    with pytest.raises(AccountChangeRefused) as refused:  # unlinked: the name is anna's, not the subject's
        await users.single_sign_on("anna", Role.VIEWER, subject)
    assert refused.value.code == "name_taken"
    assert [(action, detail.get("subject")) for _, action, detail in await audit_rows(emptied_engine)] == [
        ("user.sso_link", "u-17"),
        ("user.sso_unlink", None),
    ]


@pytest.mark.parametrize(
    ("argv", "typed", "stdin", "says"),
    [
        (("add", "anna", "--role", "viewer"), ("anna-other-pass",) * 2, "", "a user named 'anna' exists"),
        (("add", "nina", "--role", "owner"), ("nina-long-pass-1",) * 2, "", "no role 'owner'"),
        (("set-role", "anna", "owner"), (), "", "no role 'owner'"),
        (("set-role", "nobody", "admin"), (), "", "no user named 'nobody'"),
        (("disable", "nobody"), (), "", "no user named 'nobody'"),
        (("enable", "nobody"), (), "", "no user named 'nobody'"),
        (("reset-password", "nobody"), (NEW_PASSWORD,) * 2, "", "no user named 'nobody'"),
        (("add", "nina", "--role", "viewer"), (SHORT, SHORT), "", "too short"),
        (("add", "nina", "--role", "viewer", "--password-stdin"), (), SHORT + "\n", "too short"),
        (("reset-password", "anna"), (SHORT, SHORT), "", "too short"),
        (("add", "nina", "--role", "viewer"), ("nina-long-pass-1", "nina-long-pass-2"), "", "differ"),
        (("reset-password", "anna"), (NEW_PASSWORD, NEW_PASSWORD + "!"), "", "differ"),
        (("add", "nina", "--role", "viewer"), (), "", "no password given"),
        (("add", "two words", "--role", "viewer"), ("nina-long-pass-1",) * 2, "", "not a user name"),
        (("add", "a/b", "--role", "viewer"), ("nina-long-pass-1",) * 2, "", "not a user name"),
        (("add", "nina"), ("nina-long-pass-1",) * 2, "", "--role"),
        (("promote", "anna"), (), "", "invalid choice"),
    ],
)
async def test_a_refusal_says_why_in_one_line_exits_2_and_changes_nothing(
    users: UserStore,
    emptied_engine: AsyncEngine,
    module_database: str,
    argv: tuple[str, ...],
    typed: tuple[str, ...],
    stdin: str,
    says: str,
) -> None:
    before = await users.accounts()
    ran = await cli(module_database, *argv, typed=typed, stdin=stdin)
    assert (ran.code, ran.out) == (2, "")
    assert ran.err.startswith("sstools-ops users: ")
    assert says in ran.err
    assert ran.err.count("\n") == 1
    assert "Traceback" not in ran.err
    assert await users.accounts() == before
    assert await users.authenticate("anna", ANNA_PASSWORD) == User("anna", Role.ANALYST)
    assert await audit_rows(emptied_engine) == []


async def test_the_last_active_admin_can_be_neither_disabled_nor_demoted(
    users: UserStore, module_database: str
) -> None:
    for argv in (("disable", "root"), ("set-role", "root", "operator")):
        ran = await cli(module_database, *argv)
        assert (ran.code, ran.err) == (2, "sstools-ops users: this would leave no active admin\n")
        assert await users.active("root") == User("root", Role.ADMIN)

    assert (await cli(module_database, "set-role", "anna", "admin")).code == 0
    assert (await cli(module_database, "disable", "root")).code == 0  # anna is an admin now
    ran = await cli(module_database, "set-role", "anna", "viewer")
    assert (ran.code, ran.err) == (2, "sstools-ops users: this would leave no active admin\n")
    assert await users.active("anna") == User("anna", Role.ADMIN)


@pytest.mark.parametrize(
    "argv",
    [
        ("add", "nina", "--role", "viewer", "--password", "nina-long-pass-1"),
        ("add", "nina", "--role", "viewer", "--password=nina-long-pass-1"),
        ("add", "nina", "--role", "viewer", "--pass", "nina-long-pass-1"),
        ("add", "nina", "--role", "viewer", "-p", "nina-long-pass-1"),
        ("add", "nina", "nina-long-pass-1", "--role", "viewer"),
        ("reset-password", "anna", "nina-long-pass-1"),
        ("reset-password", "anna", "--password-stdin=nina-long-pass-1"),
    ],
)
async def test_a_password_is_never_taken_from_the_command_line(
    users: UserStore, module_database: str, argv: tuple[str, ...]
) -> None:
    # what the prompts would give is valid too: only refusing the command line makes this fail
    ran = await cli(module_database, *argv, typed=("nina-long-pass-1",) * 2)
    assert (ran.code, ran.out, ran.prompts) == (2, "", [])
    assert "nina-long-pass-1" not in ran.err
    assert await users.authenticate("nina", "nina-long-pass-1") is None
    assert await users.authenticate("anna", ANNA_PASSWORD) == User("anna", Role.ANALYST)


async def test_a_database_that_cannot_be_used_is_one_line_and_exit_1(fresh_database_url: str) -> None:
    closed = f"postgresql://postgres:hunter2-secret@127.0.0.1:{free_port()}/sstools"
    ran = await cli(closed, "list")
    assert (ran.code, ran.out) == (1, "")
    assert ran.err.startswith("sstools-ops users: cannot reach the database ")
    assert ran.err.count("\n") == 1
    assert "hunter2-secret" not in ran.err

    not_postgres = await cli("mysql://root@127.0.0.1/ops", "list")
    assert (not_postgres.code, not_postgres.err.count("\n")) == (1, 1)
    assert "PostgreSQL" in not_postgres.err

    ran = await cli(fresh_database_url, "list")  # a database without ops' tables
    assert (ran.code, ran.err.count("\n")) == (1, 1)
    assert "sstools-ops migrate" in ran.err


def test_the_cli_checks_names_and_passwords_as_the_admin_api_does() -> None:
    rules = {type(rule).__name__: rule for rule in NewAccount.model_fields["username"].metadata}
    assert rules["_PydanticGeneralMetadata"].pattern == USERNAME_PATTERN.pattern
    assert rules["MaxLen"].max_length == USERNAME_MAX_CHARS
    password_rules = {type(rule).__name__: rule for rule in NewAccount.model_fields["password"].metadata}
    assert password_rules["MinLen"].min_length == PASSWORD_MIN_CHARS == 12
    assert password_rules["MaxLen"].max_length == PASSWORD_MAX_CHARS


async def script(*argv: str, env: dict[str, str], stdin: str = "") -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        str(SCRIPT),
        *argv,
        env=env,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(stdin.encode()), 120)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def test_the_console_script_runs_with_database_url_alone(
    users: UserStore, emptied_engine: AsyncEngine, module_database: str
) -> None:
    env = {"DATABASE_URL": module_database}  # no JWT keys, no secrets, no PATH, no USER
    code, out, err = await script(
        "users", "add", "vic", "--role", "viewer", "--password-stdin", env=env, stdin="vic-long-password\n"
    )
    assert (code, out, err) == (0, "added vic (viewer)\n", "")
    assert await users.authenticate("vic", "vic-long-password") == User("vic", Role.VIEWER)
    operator = f"cli:{pwd.getpwuid(os.getuid()).pw_name}"
    assert await audit_rows(emptied_engine) == [
        (operator, "user.add", {"username": "vic", "role": "viewer", "active": True})
    ]

    code, out, err = await script("users", "list", env=env)
    assert (code, err) == (0, "")
    assert [line.split() for line in out.splitlines()][1:] == [
        ["anna", "analyst", "yes"],
        ["root", "admin", "yes"],
        ["vic", "viewer", "yes"],
    ]

    code, out, err = await script("users", "disable", "nobody", env=env)
    assert (code, out, err) == (2, "", "sstools-ops users: no user named 'nobody'\n")

    # the service's own commands are still the service's
    code, _, err = await script("serve-everything", env=env)
    assert code == 2
    assert "invalid choice: 'serve-everything' (choose from 'serve', 'migrate')" in err
