"""An ops under test: started in-process on free ports against a scratch database, with one user
of each role and the agent's service client, called with both identities like the agent does —
and, for every call that changes something, with the confirmation the agent's gate signs once a
person confirmed it (:mod:`sstools.devstack.confirming`)."""

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import httpx
import pytest
from fastapi import Header
from opentelemetry.sdk.trace import TracerProvider
from sqlalchemy.ext.asyncio import AsyncEngine

from sstools.common.catalogue import Role
from sstools.common.db import create_engine
from sstools.devstack.confirming import confirming
from sstools.devstack.demo import PASSWORD_ENV, environments
from sstools.devstack.keys import PRIVATE_KEY, PUBLIC_KEYS
from sstools.devstack.superset import Instance
from sstools.devstack.testing import scratch_database, started_service
from sstools.ops.api.auth import Caller
from sstools.ops.main import assemble
from sstools.ops.settings import OpsSettings
from sstools.ops.store import MIGRATIONS, metadata
from sstools.ops.store.users import UserStore

CONFIRMATION_SECRET = "ops-test-confirmations-" + "c" * 32
AGENT_SECRET = "agent-client-secret-123"
ADMIN_PASSWORD = "admin-pass-123"
# One user per role; "root" is the bootstrapped admin.
USERS = {"vera": Role.VIEWER, "anna": Role.ANALYST, "oleg": Role.OPERATOR, "root": Role.ADMIN}


def password(username: str) -> str:
    return ADMIN_PASSWORD if username == "root" else f"{username}-pass-123"


# The header naming the user of a call to a test's own app (see ``named_caller``).
USER_HEADER = "X-Test-User"


async def named_caller(username: Annotated[str, Header(alias=USER_HEADER)]) -> Caller:
    """A stand-in for ``agent_for_user`` (:func:`sstools.ops.api.auth.dependencies`) in a test's
    own app: the agent's call for the user of ``USERS`` named in ``X-Test-User``, with that
    user's role — what the real one returns once both tokens are verified (that is tested in
    test_identity.py and the RBAC matrix); the code under test only uses the ``Caller``."""
    return Caller("agent", username, USERS[username])


@dataclass
class OpsApi:
    http: httpx.AsyncClient
    service_token: str
    user_tokens: dict[str, str]
    database_url: str

    def headers(self, username: str, **extra: str) -> dict[str, str]:
        """The agent's call on behalf of ``username``."""
        return {
            "Authorization": f"Bearer {self.service_token}",
            "X-User-Authorization": f"Bearer {self.user_tokens[username]}",
            **extra,
        }

    async def wait_task(
        self, task_id: str, username: str = "root", within_seconds: float = 120
    ) -> dict[str, Any]:
        deadline = asyncio.get_running_loop().time() + within_seconds
        while True:
            reply = await self.http.get(f"/api/tasks/{task_id}", headers=self.headers(username))
            assert reply.status_code == 200, reply.text
            task: dict[str, Any] = reply.json()
            if task["status"] in ("success", "failed"):
                return task
            assert asyncio.get_running_loop().time() < deadline, f"task {task_id} still {task['status']}"
            await asyncio.sleep(0.2)


def ops_settings(database_url: str, **settings: Any) -> OpsSettings:
    """An ops on free ports, with the test secrets, the admin ``root`` and the agent's client."""
    return OpsSettings(
        **{
            "http_port": 0,
            "metrics_port": 0,
            "database_url": database_url,
            "jwt_private_key": PRIVATE_KEY,
            "jwt_public_keys": PUBLIC_KEYS,
            "confirmation_secret": CONFIRMATION_SECRET,
            "admin_username": "root",
            "admin_password": ADMIN_PASSWORD,
            "service_clients": f"agent:{AGENT_SECRET}",
            **settings,
        }
    )


async def admin_bootstrapped(users: UserStore, username: str) -> None:
    """Wait for ops to create its admin (in the background, once no user exists), reading the
    table: signing in to find out would count failures against the sign-in limits."""
    for _ in range(200):
        if await users.active(username) is not None:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"ops did not create its admin {username!r}")


@asynccontextmanager
async def running_ops(
    database_url: str,
    tracer_provider: TracerProvider,
    environments: list[dict[str, Any]] | str,
    state_dir: Path,
    **settings: Any,
) -> AsyncIterator[OpsApi]:
    await asyncio.to_thread(MIGRATIONS.upgrade, database_url)
    config = ops_settings(
        database_url,
        environments=environments if isinstance(environments, str) else json.dumps(environments),
        backup_dir=state_dir / "backups",
        git_repo=state_dir / "exports",
        **settings,
    )
    async with (
        started_service(config, assemble, tracer_provider) as service,
        httpx.AsyncClient(
            base_url=f"http://127.0.0.1:{service.ports['api']}",
            timeout=120,
            event_hooks={"request": [confirming(CONFIRMATION_SECRET)]},
        ) as http,
    ):

        async def login(username: str) -> httpx.Response:
            return await http.post(
                "/api/auth/login", json={"username": username, "password": password(username)}
            )

        engine = create_engine(database_url)
        try:
            store = UserStore(engine)
            await admin_bootstrapped(store, "root")
            for username, role in USERS.items():
                if role is not Role.ADMIN:
                    await store.create(username, password(username), role)
        finally:
            await engine.dispose()
        tokens = {}
        for username in USERS:
            reply = await login(username)
            assert reply.status_code == 200, reply.text
            tokens[username] = reply.json()["access_token"]
        reply = await http.post(
            "/api/auth/service-token", json={"client_id": "agent", "client_secret": AGENT_SECRET}
        )
        assert reply.status_code == 200, reply.text
        yield OpsApi(http, reply.json()["access_token"], tokens, database_url)


@pytest.fixture
async def ops(
    supersets: dict[str, Instance], fresh_database_url: str, tracer_provider: TracerProvider, tmp_path: Path
) -> AsyncIterator[OpsApi]:
    """ops over the session's real dev and prod Superset instances (a module that needs another
    ops — a closed port, an LLM — declares its own ``ops``)."""
    async with running_ops(
        fresh_database_url, tracer_provider, environments(supersets, PASSWORD_ENV), tmp_path
    ) as api:
        yield api


@pytest.fixture
async def database(fresh_database_url: str) -> str:
    await asyncio.to_thread(MIGRATIONS.upgrade, fresh_database_url)
    return fresh_database_url


@pytest.fixture(scope="module")
def module_database(database_url: str) -> Iterator[str]:
    """A scratch database with ops' schema for one test module: quicker than one per test, which
    matters to tests run again for every mutant. Use it through ``emptied_engine``."""
    with scratch_database(database_url) as url:
        MIGRATIONS.upgrade(url)
        yield url


@pytest.fixture
async def emptied_engine(module_database: str) -> AsyncIterator[AsyncEngine]:
    """An engine on the module's database with every ops table emptied: each test starts from
    nothing, whatever the tests before it left."""
    engine = create_engine(module_database)
    async with engine.begin() as connection:
        # DELETE, not TRUNCATE: on tables this small it is many times quicker
        for table in reversed(metadata.sorted_tables):
            await connection.execute(table.delete())
    try:
        yield engine
    finally:
        await engine.dispose()


@asynccontextmanager
async def ops_on(
    database_url: str, tracer_provider: TracerProvider, **settings: Any
) -> AsyncIterator[httpx.AsyncClient]:
    """An ops on ``database_url`` (another one on the same database is another replica), with
    its admin ``root`` and the analyst ``anna``."""
    config = ops_settings(database_url, **settings)
    async with (
        started_service(config, assemble, tracer_provider) as service,
        httpx.AsyncClient(base_url=f"http://127.0.0.1:{service.ports['api']}", timeout=30) as client,
    ):
        engine = create_engine(database_url)
        try:
            users = UserStore(engine)
            await admin_bootstrapped(users, "root")
            if await users.active("anna") is None:
                await users.create("anna", password("anna"), Role.ANALYST)
        finally:
            await engine.dispose()
        yield client
