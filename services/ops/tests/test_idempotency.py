"""``Idempotency-Key`` on ops' write endpoints (:mod:`sstools.ops.api.idempotency`), on a small app
of its own whose endpoints call ``once`` as ops' routes do, with the real ``IdempotencyStore`` on a
scratch database: the first request with a key runs, a repeat gets its answer without running
again, a key is one user's for one operation, a failed first attempt leaves the key free, a key
past its retention is a new request and is swept."""

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any

import httpx
import pytest
from fastapi import Depends, FastAPI, Header
from sqlalchemy import func, select, update
from sqlalchemy.ext.asyncio import AsyncEngine

from sstools.common.catalogue import ENDPOINTS
from sstools.common.tool_args import DashboardBody, MigrationBody
from sstools.ops.api.app import _operation_error
from sstools.ops.api.auth import Caller
from sstools.ops.api.idempotency import once
from sstools.ops.errors import Conflict, OperationError
from sstools.ops.store.idempotency import IdempotencyStore
from sstools.ops.store.tables import idempotency

from .conftest import USER_HEADER, named_caller

AT = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)  # in each answer, to be sent as JSON
AT_JSON = "2025-01-02T03:04:05+00:00"
RETENTION = timedelta(hours=1)
MIGRATION = {"source_env": "dev", "dashboard_ids": [3, 4], "database_mapping": {"a": "x", "b": "y"}}


@dataclass
class Actions:
    """What the endpoints' actions did, and how the test steers the next ones."""

    ran: list[tuple[str, str]] = field(default_factory=list)  # (operation, user) of each run
    started: asyncio.Event = field(default_factory=asyncio.Event)  # set when an action starts
    hold: asyncio.Event | None = None  # when given, an action waits for it before it answers
    failure: BaseException | None = None  # what the next actions raise, when given


def _app(store: IdempotencyStore, actions: Actions) -> FastAPI:
    """Endpoints that call ``once`` as ops' routes do (the same paths, bodies and operations)."""
    app = FastAPI()
    app.add_exception_handler(OperationError, _operation_error)
    IdempotencyKey = Annotated[str | None, Header(alias="Idempotency-Key")]  # noqa: N806
    caller_of = Depends(named_caller)

    async def act(operation: str, caller: Caller, code: int, answer: dict[str, Any]) -> tuple[int, Any]:
        actions.ran.append((operation, caller.username))
        actions.started.set()
        if actions.hold is not None:
            await actions.hold.wait()
        if actions.failure is not None:
            raise actions.failure
        return code, answer | {"run": len(actions.ran), "at": AT}

    @app.post(ENDPOINTS["execute_migration"].path)
    async def execute_migration(
        env_id: str,
        body: MigrationBody,
        caller: Annotated[Caller, caller_of],
        idempotency_key: IdempotencyKey = None,
    ) -> Any:
        async def run() -> tuple[int, Any]:
            return await act(f"migration:{env_id}", caller, 202, {"dashboards": body.dashboard_ids})

        return await once(store, caller, f"migration:{env_id}", idempotency_key, body, run)

    @app.post(ENDPOINTS["superset_create_dashboard"].path)
    async def create_dashboard(
        env_id: str,
        body: DashboardBody,
        caller: Annotated[Caller, caller_of],
        idempotency_key: IdempotencyKey = None,
    ) -> Any:
        async def run() -> tuple[int, Any]:
            return await act(f"create_dashboard:{env_id}", caller, 201, {"title": body.title})

        return await once(store, caller, f"create_dashboard:{env_id}", idempotency_key, body, run)

    return app


@dataclass
class Api:
    http: httpx.AsyncClient
    engine: AsyncEngine
    actions: Actions
    store: IdempotencyStore  # the one the endpoints use

    async def migrate(
        self,
        user: str = "oleg",
        key: str | None = "call-1",
        env: str = "dev",
        body: dict[str, Any] = MIGRATION,
    ) -> httpx.Response:
        headers = {USER_HEADER: user} | ({"Idempotency-Key": key} if key is not None else {})
        return await self.http.post(f"/api/envs/{env}/migrations", json=body, headers=headers)

    async def age(self, key: str, by: timedelta) -> None:
        """Makes the key's row as old as if it had been claimed ``by`` earlier."""
        async with self.engine.begin() as connection:
            await connection.execute(
                update(idempotency)
                .where(idempotency.c.key == key)
                .values(created_at=idempotency.c.created_at - by)
            )

    async def keys_kept(self) -> int:
        async with self.engine.connect() as connection:
            return int((await connection.execute(select(func.count()).select_from(idempotency))).scalar_one())


@pytest.fixture
async def api(emptied_engine: AsyncEngine) -> AsyncIterator[Api]:
    actions = Actions()
    store = IdempotencyStore(emptied_engine, RETENTION)
    transport = httpx.ASGITransport(_app(store, actions))
    async with httpx.AsyncClient(transport=transport, base_url="http://ops") as http:
        yield Api(http, emptied_engine, actions, store)


def _answer(run: int, dashboards: list[int] | None = None) -> dict[str, Any]:
    """The migration endpoint's answer of its ``run``-th run, as JSON."""
    return {"dashboards": dashboards or [3, 4], "run": run, "at": AT_JSON}


def _refused(reply: httpx.Response) -> tuple[int, str, list[str]]:
    """A refusal's status, code and shape (as every other: a code, a message for the person)."""
    detail = reply.json()["detail"]
    return reply.status_code, detail["code"], sorted(detail)


def _replayed(reply: httpx.Response) -> str | None:
    header: str | None = reply.headers.get("Idempotent-Replayed")
    return header


async def test_without_a_key_the_action_runs_every_time(api: Api) -> None:
    first, second = await api.migrate(key=None), await api.migrate(key=None)
    assert (first.status_code, first.json(), _replayed(first)) == (202, _answer(1), None)
    assert (second.status_code, second.json(), _replayed(second)) == (202, _answer(2), None)
    assert api.actions.ran == [("migration:dev", "oleg")] * 2
    assert await api.keys_kept() == 0


async def test_a_repeat_with_the_same_key_gets_the_first_answer_without_running_again(api: Api) -> None:
    first = await api.migrate()
    assert (first.status_code, first.json(), _replayed(first)) == (202, _answer(1), None)
    for _ in range(2):
        again = await api.migrate()
        assert (again.status_code, again.json(), _replayed(again)) == (202, _answer(1), "true")
    assert api.actions.ran == [("migration:dev", "oleg")]


async def test_the_same_key_for_another_request_is_refused(api: Api) -> None:
    await api.migrate()
    reused = await api.migrate(body=MIGRATION | {"dashboard_ids": [5]})
    assert _refused(reused) == (422, "idempotency_key_reused", ["code", "message"])
    # the refusal leaves the first call's answer as it was
    again = await api.migrate()
    assert (again.status_code, again.json(), _replayed(again)) == (202, _answer(1), "true")
    assert api.actions.ran == [("migration:dev", "oleg")]


async def test_the_request_is_the_same_whatever_the_order_of_its_keys(api: Api) -> None:
    await api.migrate()
    reordered = {"database_mapping": {"b": "y", "a": "x"}, "dashboard_ids": [3, 4], "source_env": "dev"}
    again = await api.migrate(body=reordered)
    assert (again.status_code, again.json(), _replayed(again)) == (202, _answer(1), "true")
    remapped = await api.migrate(body=MIGRATION | {"database_mapping": {"b": "y", "a": "z"}})
    assert _refused(remapped) == (422, "idempotency_key_reused", ["code", "message"])
    assert api.actions.ran == [("migration:dev", "oleg")]


async def test_a_repeat_while_the_first_is_still_running_is_told_so(api: Api) -> None:
    api.actions.hold = asyncio.Event()
    first = asyncio.create_task(api.migrate())
    await api.actions.started.wait()
    meanwhile = await api.migrate()
    assert _refused(meanwhile) == (409, "idempotency_in_progress", ["code", "message"])
    api.actions.hold.set()
    answered = await first
    assert (answered.status_code, answered.json(), _replayed(answered)) == (202, _answer(1), None)
    again = await api.migrate()
    assert (again.status_code, again.json(), _replayed(again)) == (202, _answer(1), "true")
    assert api.actions.ran == [("migration:dev", "oleg")]


async def test_a_failed_first_attempt_leaves_the_key_free_for_a_retry(api: Api) -> None:
    api.actions.failure = Conflict("the environment is busy")
    failed = await api.migrate()
    busy = {"code": "conflict", "message": "the environment is busy"}
    assert (failed.status_code, failed.json()) == (409, {"detail": busy})
    assert await api.keys_kept() == 0
    api.actions.failure = None
    retried = await api.migrate()
    assert (retried.status_code, retried.json(), _replayed(retried)) == (202, _answer(2), None)
    again = await api.migrate()
    assert (again.status_code, again.json(), _replayed(again)) == (202, _answer(2), "true")
    assert api.actions.ran == [("migration:dev", "oleg")] * 2


async def test_a_first_attempt_cancelled_midway_leaves_the_key_free(api: Api) -> None:
    api.actions.hold = asyncio.Event()
    first = asyncio.create_task(api.migrate())
    await api.actions.started.wait()
    first.cancel()  # the caller went away while the action ran
    with pytest.raises(asyncio.CancelledError):
        await first
    assert await api.keys_kept() == 0
    api.actions.hold = None
    retried = await api.migrate()
    assert (retried.status_code, retried.json(), _replayed(retried)) == (202, _answer(2), None)


async def test_a_key_is_one_user_s_for_one_operation(api: Api) -> None:
    replies = [
        await api.migrate(),
        await api.migrate(user="root"),  # another user
        await api.migrate(env="live"),  # another operation: a migration into another environment
        await api.http.post(
            "/api/envs/dev/dashboards",
            json={"title": "Sales"},
            headers={USER_HEADER: "oleg", "Idempotency-Key": "call-1"},
        ),
    ]
    answers = [(reply.status_code, reply.json(), _replayed(reply)) for reply in replies]
    created = {"title": "Sales", "run": 4, "at": AT_JSON}
    assert answers == [
        (202, _answer(1), None),
        (202, _answer(2), None),
        (202, _answer(3), None),
        (201, created, None),
    ]
    assert api.actions.ran == [
        ("migration:dev", "oleg"),
        ("migration:dev", "root"),
        ("migration:live", "oleg"),
        ("create_dashboard:dev", "oleg"),
    ]
    # and each repeats its own answer
    assert (await api.migrate(user="root")).json() == _answer(2)
    assert (await api.migrate(env="live")).json() == _answer(3)


async def test_a_key_past_its_retention_is_a_new_request(api: Api) -> None:
    await api.migrate()
    await api.age("call-1", RETENTION - timedelta(minutes=1))
    kept = await api.migrate()
    assert (kept.json(), _replayed(kept)) == (_answer(1), "true")  # within the retention: a repeat
    await api.age("call-1", timedelta(minutes=2))
    later = await api.migrate()
    assert (later.status_code, later.json(), _replayed(later)) == (202, _answer(2), None)
    again = await api.migrate()
    assert (again.json(), _replayed(again)) == (_answer(2), "true")  # the new answer is the one kept
    assert api.actions.ran == [("migration:dev", "oleg")] * 2


async def test_the_sweep_forgets_only_keys_past_their_retention(api: Api) -> None:
    await api.migrate(key="old")
    await api.migrate(key="new")
    await api.age("old", RETENTION + timedelta(seconds=5))
    await api.age("new", RETENTION - timedelta(minutes=1))
    assert await api.store.sweep() == 1
    assert await api.keys_kept() == 1
    kept = await api.migrate(key="new")
    assert (kept.json(), _replayed(kept)) == (_answer(2), "true")
