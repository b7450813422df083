"""Every operation against two real Superset 6.1 instances (dev seeded with demo data, prod
empty but for the example database), through a real ops with PostgreSQL."""

import asyncio
import uuid
import zipfile
from collections.abc import AsyncIterator
from contextlib import ExitStack, asynccontextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import psycopg
from opentelemetry.sdk.trace import TracerProvider

from sstools.common.catalogue import Role
from sstools.common.db import create_engine
from sstools.devstack.confirming import UNCONFIRMED
from sstools.devstack.demo import ANALYST_ROLE, ANALYST_USER, PASSWORD_ENV, add_person, client, environments
from sstools.devstack.superset import Instance, default_home, prepare_instance, running
from sstools.devstack.testing import free_port
from sstools.ops import jobs
from sstools.ops.store.tasks import TaskStore
from sstools.ops.store.users import UserStore

from .conftest import OpsApi, running_ops


def _unique(prefix: str) -> str:
    return f"{prefix} {uuid.uuid4().hex[:8]}"


async def _search(ops: OpsApi, env_id: str, text: str, username: str = "vera") -> list[dict[str, Any]]:
    reply = await ops.http.get(
        f"/api/envs/{env_id}/dashboards", params={"query": text}, headers=ops.headers(username)
    )
    assert reply.status_code == 200, reply.text
    return list(reply.json()["dashboards"])


async def test_only_those_who_operate_them_see_where_the_instances_are(
    ops: OpsApi, supersets: dict[str, Instance]
) -> None:
    for username, sees in (("vera", False), ("anna", False), ("oleg", True), ("root", True)):
        listed = (await ops.http.get("/api/environments", headers=ops.headers(username))).json()
        urls = {env["id"]: env["url"] and env["url"].rstrip("/") for env in listed}
        expected = {
            env_id: instance.url.rstrip("/") if sees else None for env_id, instance in supersets.items()
        }
        assert urls == expected, username


async def test_search_finds_dashboards_by_title_and_owner_with_paging(ops: OpsApi) -> None:
    found = await _search(ops, "dev", "sales")
    assert [board["title"] for board in found] == ["Sales Overview"]
    assert found[0]["url"].endswith("/superset/dashboard/sales-overview/")
    page = await ops.http.get(
        "/api/envs/dev/dashboards", params={"owner": "admin", "page_size": 2}, headers=ops.headers("vera")
    )
    assert page.status_code == 200, page.text
    assert page.json()["count"] >= 3
    assert len(page.json()["dashboards"]) == 2
    nobody = await ops.http.get(
        "/api/envs/dev/dashboards", params={"owner": "no-such-person"}, headers=ops.headers("vera")
    )
    assert nobody.json()["count"] == 0


async def test_dashboards_are_named_by_id_in_their_own_environment(ops: OpsApi) -> None:
    (sales,) = await _search(ops, "dev", "Sales Overview")
    (legacy,) = await _search(ops, "dev", "Legacy KPIs")
    missing = 2**40
    reply = await ops.http.get(
        "/api/envs/dev/dashboards/titles",
        params={"dashboard_ids": [sales["id"], legacy["id"], missing]},
        headers=ops.headers("vera"),
    )
    assert reply.status_code == 200, reply.text
    # JSON keys are strings; one Superset does not have is left out
    assert reply.json() == {
        "env_id": "dev",
        "titles": {str(sales["id"]): "Sales Overview", str(legacy["id"]): "Legacy KPIs"},
    }
    too_many = await ops.http.get(
        "/api/envs/dev/dashboards/titles",
        params={"dashboard_ids": list(range(1, 22))},
        headers=ops.headers("vera"),
    )
    assert too_many.status_code == 422


async def test_search_by_tag(ops: OpsApi) -> None:
    reply = await ops.http.get(
        "/api/envs/dev/dashboards", params={"tag": "finance"}, headers=ops.headers("vera")
    )
    assert reply.status_code == 200, reply.text
    found = reply.json()["dashboards"]
    assert [(board["title"], board["tags"]) for board in found] == [("Sales Overview", ["finance"])]


async def test_health_summary_finds_the_broken_chart_and_its_dashboard(ops: OpsApi) -> None:
    reply = await ops.http.get("/api/envs/dev/health", headers=ops.headers("vera"))
    assert reply.status_code == 200, reply.text
    summary = reply.json()
    broken = {problem["chart_name"]: problem for problem in summary["broken_charts"]}
    assert set(broken) == {"Legacy uptime"}
    assert "no such table: legacy_kpis" in broken["Legacy uptime"]["error"]
    assert [board["title"] for board in summary["dashboards_with_problems"]] == ["Legacy KPIs"]
    assert summary["charts_checked"] >= 6
    assert summary["only"] == []  # the whole environment: none singled out
    (sales,) = await _search(ops, "dev", "Sales Overview")
    one = await ops.http.get(
        "/api/envs/dev/health", params={"dashboard_ids": [sales["id"]]}, headers=ops.headers("vera")
    )
    assert (one.json()["only"], one.json()["broken_charts"]) == (
        [{"dashboard_id": sales["id"], "title": "Sales Overview"}],
        [],
    )


async def test_the_health_of_a_dashboard_that_is_not_there_is_not_found_and_of_an_empty_one_checks_none(
    ops: OpsApi,
) -> None:
    """It once answered "all 0 charts work" with success for a dashboard id nobody had made."""
    (sales,) = await _search(ops, "dev", "Sales Overview")
    missing = await ops.http.get(
        "/api/envs/dev/health", params={"dashboard_ids": [sales["id"], 987654]}, headers=ops.headers("vera")
    )
    assert missing.status_code == 404, missing.text
    assert missing.json()["detail"]["code"] == "superset_not_found"
    assert "no dashboard 987654 in dev" in missing.json()["detail"]["message"]
    title = _unique("Empty board")
    created = await ops.http.post(
        "/api/envs/dev/dashboards", json={"title": title}, headers=ops.headers("anna")
    )
    empty = await ops.http.get(
        "/api/envs/dev/health", params={"dashboard_ids": [created.json()["id"]]}, headers=ops.headers("anna")
    )
    assert empty.status_code == 200, empty.text
    assert (empty.json()["charts_checked"], empty.json()["only"]) == (
        0,
        [{"dashboard_id": created.json()["id"], "title": title}],
    )
    # of two dashboards asked about, the one with no charts is said to be unchecked
    both = await ops.http.get(
        "/api/envs/dev/health",
        params={"dashboard_ids": [sales["id"], created.json()["id"]]},
        headers=ops.headers("anna"),
    )
    assert both.status_code == 200, both.text
    assert both.json()["charts_checked"] > 0
    assert both.json()["unchecked"] == [{"dashboard_id": created.json()["id"], "title": title}]


async def test_a_health_check_past_superset_s_cache_is_an_operators_to_ask_for(ops: OpsApi) -> None:
    """By default charts are asked for as a person opening them would (Superset's cache
    answers); re-running every query is load on prod's databases a viewer may not cause."""
    refused = await ops.http.get("/api/envs/dev/health", params={"force": True}, headers=ops.headers("vera"))
    assert refused.status_code == 403, refused.text
    assert (refused.json()["detail"]["code"], refused.json()["detail"]["required_role"]) == (
        "permission_denied",
        "operator",
    )
    forced = await ops.http.get("/api/envs/dev/health", params={"force": True}, headers=ops.headers("oleg"))
    assert forced.status_code == 200, forced.text
    assert {problem["chart_name"] for problem in forced.json()["broken_charts"]} == {"Legacy uptime"}


async def test_select_returns_rows_and_dml_is_refused_for_an_analyst(ops: OpsApi) -> None:
    select = await ops.http.post(
        "/api/envs/dev/sql",
        json={
            "database_id": 1,
            "sql": "SELECT region, COUNT(*) AS n FROM sales GROUP BY region ORDER BY region",
            "limit": 10,
        },
        headers=ops.headers("anna"),
    )
    assert select.status_code == 200, select.text
    assert select.json()["columns"] == ["region", "n"]
    assert [row["region"] for row in select.json()["rows"]] == ["East", "North", "South", "West"]

    for sql in ("DELETE FROM sales", "UPDATE sales SET amount = 0", "SELECT 1; DROP TABLE sales"):
        refused = await ops.http.post(
            "/api/envs/dev/sql",
            json={"database_id": 1, "sql": sql},
            headers=ops.headers("anna"),
        )
        assert refused.status_code == 403, refused.text
        assert refused.json()["detail"] == {
            "code": "permission_denied",
            "tool": "superset_execute_sql",
            "env": "dev",
            "required_role": "admin",
            "user_role": "analyst",
        }
    count = await ops.http.post(
        "/api/envs/dev/sql",
        json={"database_id": 1, "sql": "SELECT COUNT(*) AS n FROM sales"},
        headers=ops.headers("anna"),
    )
    assert count.json()["rows"] == [{"n": 400}]  # nothing was deleted


async def test_dml_needs_the_admin_and_a_confirmation(ops: OpsApi) -> None:
    sql = "UPDATE sales SET amount = amount WHERE id = 1"
    unconfirmed = await ops.http.post(
        "/api/envs/dev/sql", json={"database_id": 1, "sql": sql}, headers=ops.headers("root", **UNCONFIRMED)
    )
    assert unconfirmed.status_code == 409
    assert unconfirmed.json()["detail"]["code"] == "confirmation_required"
    confirmed = await ops.http.post(
        "/api/envs/dev/sql", json={"database_id": 1, "sql": sql}, headers=ops.headers("root")
    )
    assert confirmed.status_code == 200, confirmed.text


async def test_row_limit_is_applied(ops: OpsApi) -> None:
    reply = await ops.http.post(
        "/api/envs/dev/sql",
        json={"database_id": 1, "sql": "SELECT id FROM events", "limit": 7},
        headers=ops.headers("anna"),
    )
    assert reply.status_code == 200, reply.text
    assert (reply.json()["row_count"], reply.json()["truncated"]) == (7, True)


# A read that takes SQLite seconds: longer than the wait below, well within the statement's time
# (4.6 s on a quick host, where 8 million rows took 0.9 s: inside the one-second wait).
SLOW_READ = (
    "WITH RECURSIVE c AS (SELECT 1 AS x UNION ALL SELECT x + 1 FROM c WHERE x < 40000000) "
    "SELECT count(*) AS n FROM c"
)


@asynccontextmanager
async def waiting_briefly(
    supersets: dict[str, Instance], database_url: str, tracer_provider: TracerProvider, state_dir: Path
) -> AsyncIterator[OpsApi]:
    """An ops whose SQL requests wait one second for their statement."""
    async with running_ops(
        database_url, tracer_provider, environments(supersets, PASSWORD_ENV), state_dir, read_wait_seconds=1.0
    ) as api:
        yield api


async def test_a_statement_longer_than_the_wait_goes_on_as_a_task_whose_result_is_its_rows(
    supersets: dict[str, Instance], fresh_database_url: str, tracer_provider: TracerProvider, tmp_path: Path
) -> None:
    async with waiting_briefly(supersets, fresh_database_url, tracer_provider, tmp_path) as ops:
        quick = await ops.http.post(
            "/api/envs/dev/sql",
            json={"database_id": 1, "sql": "SELECT COUNT(*) AS n FROM sales"},
            headers=ops.headers("anna"),
        )
        assert quick.status_code == 200, quick.text  # within the wait: its rows, as ever
        assert quick.json()["rows"] == [{"n": 400}]

        slow = await ops.http.post(
            "/api/envs/dev/sql", json={"database_id": 1, "sql": SLOW_READ}, headers=ops.headers("anna")
        )
        assert slow.status_code == 202, slow.text
        started = slow.json()
        assert (started["kind"], started["status"], started["created_by"]) == ("sql", "running", "anna")
        for other in ("vera", "oleg", "root"):  # nor an operator or admin: the rows are anna's to see
            others = await ops.http.get(f"/api/tasks/{started['id']}", headers=ops.headers(other))
            assert others.status_code == 404, (other, others.text)
        ended = await ops.wait_task(started["id"], "anna", within_seconds=60)
        assert ended["status"] == "success", ended
        assert (ended["result"]["columns"], ended["result"]["rows"]) == (["n"], [{"n": 40_000_000}])

        failing = await ops.http.post(
            "/api/envs/dev/sql",
            json={"database_id": 1, "sql": "SELECT no_such_column FROM sales"},
            headers=ops.headers("anna"),
        )
        assert failing.status_code == 502, failing.text  # within the wait: Superset's error, as ever
        assert failing.json()["detail"]["code"] == "superset_error"


async def test_a_health_check_longer_than_the_wait_goes_on_as_a_task_whose_result_is_the_report(
    supersets: dict[str, Instance], fresh_database_url: str, tracer_provider: TracerProvider, tmp_path: Path
) -> None:
    config = environments(supersets, PASSWORD_ENV)
    async with running_ops(
        fresh_database_url, tracer_provider, config, tmp_path, read_wait_seconds=0.01
    ) as ops:
        checked = await ops.http.get("/api/envs/dev/health", headers=ops.headers("vera"))
        assert checked.status_code == 202, checked.text  # no check of every chart ends in 10 ms
        assert (checked.json()["kind"], checked.json()["created_by"]) == ("health", "vera")
        ended = await ops.wait_task(checked.json()["id"], "vera", within_seconds=60)
        assert ended["status"] == "success", ended
        report = ended["result"]
        assert report["charts_checked"] > 0
        assert {problem["chart_name"] for problem in report["broken_charts"]} == {"Legacy uptime"}
        assert report["last_validations"] == []
        missing = await ops.http.get(
            "/api/envs/dev/health", params={"dashboard_ids": [999_999]}, headers=ops.headers("vera")
        )
        assert missing.status_code in (202, 404), missing.text
        if missing.status_code == 202:  # past the wait: the task says what the request would have
            failed = await ops.wait_task(missing.json()["id"], "vera", within_seconds=60)
            assert (failed["status"], failed["error"]["code"]) == ("failed", "superset_not_found"), failed


async def test_a_statement_whose_ops_died_is_read_again_but_never_changed_again(
    supersets: dict[str, Instance], fresh_database_url: str, tracer_provider: TracerProvider, tmp_path: Path
) -> None:
    """A statement's task left running by an ops that died is claimed by the next: a read is
    run again; a change is not (it may have run) and fails saying so."""
    async with waiting_briefly(supersets, fresh_database_url, tracer_provider, tmp_path) as ops:
        before = await ops.http.post(
            "/api/envs/dev/sql",
            json={"database_id": 1, "sql": "SELECT amount FROM sales WHERE id = 1"},
            headers=ops.headers("root"),
        )
        assert before.status_code == 200, before.text
        engine = create_engine(fresh_database_url)
        try:
            store = TaskStore(engine)
            statements = {
                "read": ("PRAGMA query_only = 1;\nSELECT amount FROM sales WHERE id = 1", True),
                "change": ("UPDATE sales SET amount = amount + 1000 WHERE id = 1", False),
            }
            orphans = {
                name: await store.start(
                    jobs.SQL,
                    "dev",
                    {"database_id": 1, "script": script, "schema": None, "limit": 10, "read_only": read_only},
                    "root",
                    timedelta(0),  # its ops died at once: nothing renews it
                )
                for name, (script, read_only) in statements.items()
            }
        finally:
            await engine.dispose()
        read = await ops.wait_task(str(orphans["read"].id), within_seconds=60)
        assert read["status"] == "success", read
        assert read["result"]["rows"] == before.json()["rows"]
        change = await ops.wait_task(str(orphans["change"].id), within_seconds=60)
        assert change["status"] == "failed", change
        assert change["error"]["code"] == "sql_interrupted"
        after = await ops.http.post(
            "/api/envs/dev/sql",
            json={"database_id": 1, "sql": "SELECT amount FROM sales WHERE id = 1"},
            headers=ops.headers("root"),
        )
        assert after.json()["rows"] == before.json()["rows"]  # the change did not run again


async def test_database_exploration_walks_databases_schemas_tables_columns(ops: OpsApi) -> None:
    headers = ops.headers("anna")
    databases = (await ops.http.get("/api/envs/dev/databases", headers=headers)).json()["databases"]
    examples = next(database for database in databases if database["name"] == "examples")
    schemas = (
        await ops.http.get("/api/envs/dev/databases", params={"database_id": examples["id"]}, headers=headers)
    ).json()
    assert schemas["schemas"] == ["main"]
    tables = await ops.http.get(
        "/api/envs/dev/databases", params={"database_id": examples["id"], "schema": "main"}, headers=headers
    )
    assert {"sales", "orders", "events"} <= set(tables.json()["tables"])
    columns = await ops.http.get(
        "/api/envs/dev/databases",
        params={"database_id": examples["id"], "schema": "main", "table": "sales"},
        headers=headers,
    )
    assert [column["name"] for column in columns.json()["columns"]] == [
        "id",
        "day",
        "region",
        "product",
        "amount",
    ]


async def test_permission_audit_lists_the_roles_that_see_a_dashboard(ops: OpsApi) -> None:
    board = (await _search(ops, "dev", "Sales Overview"))[0]
    # one object at a time, as AuditQuery.ONE_OF declares (the planner asks when none is named)
    for both_or_neither in ({}, {"dashboard_id": board["id"], "dataset_id": 1}):
        refused = await ops.http.get(
            "/api/envs/dev/permissions", params=both_or_neither, headers=ops.headers("oleg")
        )
        assert refused.status_code == 422, refused.text
        assert refused.json()["detail"] == {
            "code": "invalid_request",
            "message": "give exactly one of dashboard_id or dataset_id",
        }
    reply = await ops.http.get(
        "/api/envs/dev/permissions", params={"dashboard_id": board["id"]}, headers=ops.headers("oleg")
    )
    assert reply.status_code == 200, reply.text
    report = reply.json()
    roles = {role["role"]: role for role in report["roles"]}
    assert {"Admin", "Alpha", ANALYST_ROLE} <= set(roles)
    assert "Gamma" not in roles  # Gamma reads dashboards but no data
    assert roles[ANALYST_ROLE]["users"] == [ANALYST_USER]
    assert roles[ANALYST_ROLE]["sufficient_alone"] is False
    assert any("[examples].[sales]" in reason for reason in roles[ANALYST_ROLE]["reasons"])
    users = {user["username"]: user["through_roles"] for user in report["users"]}
    assert set(users[ANALYST_USER]) == {"Gamma", ANALYST_ROLE}
    assert "Admin" in users["admin"]

    orders_board = (await _search(ops, "dev", "Orders and Events"))[0]
    other = await ops.http.get(
        "/api/envs/dev/permissions", params={"dashboard_id": orders_board["id"]}, headers=ops.headers("oleg")
    )
    assert ANALYST_USER not in {user["username"] for user in other.json()["users"]}  # no access to orders


async def test_copy_creates_a_new_dashboard(ops: OpsApi) -> None:
    original = (await _search(ops, "dev", "Sales Overview"))[0]
    title = _unique("Sales copy")
    reply = await ops.http.post(
        f"/api/envs/dev/dashboards/{original['id']}/copy", json={"title": title}, headers=ops.headers("anna")
    )
    assert reply.status_code == 201, reply.text
    assert reply.json()["id"] != original["id"]
    assert reply.json()["title"] == title
    # a copy is a draft: Superset shows it to its owner (and admins), not to every reader
    assert [board["id"] for board in await _search(ops, "dev", title, "anna")] == [reply.json()["id"]]
    assert await _search(ops, "dev", title, "vera") == []


async def test_create_dashboard_and_dataset(ops: OpsApi) -> None:
    title = _unique("Fresh board")
    created = await ops.http.post(
        "/api/envs/dev/dashboards", json={"title": title}, headers=ops.headers("anna")
    )
    assert created.status_code == 201, created.text
    assert (await _search(ops, "dev", title, "anna"))[0]["id"] == created.json()["id"]

    databases = (await ops.http.get("/api/envs/prod/databases", headers=ops.headers("oleg"))).json()[
        "databases"
    ]
    examples = next(database for database in databases if database["name"] == "examples")
    dataset = await ops.http.post(
        "/api/envs/prod/datasets",
        json={"database_id": examples["id"], "table_name": "orders", "schema": "main"},
        headers=ops.headers("oleg"),
    )
    assert dataset.status_code == 201, dataset.text
    assert {"status", "total"} <= set(dataset.json()["columns"])
    again = await ops.http.post(
        "/api/envs/prod/datasets",
        json={"database_id": examples["id"], "table_name": "orders", "schema": "main"},
        headers=ops.headers("oleg"),
    )
    assert again.status_code == 422
    assert again.json()["detail"]["code"] == "superset_rejected"


async def _backups(ops: OpsApi, env_id: str) -> list[dict[str, Any]]:
    reply = await ops.http.get(f"/api/envs/{env_id}/backups", headers=ops.headers("oleg"))
    assert reply.status_code == 200, reply.text
    return list(reply.json())


async def test_deploy_dev_to_prod_creates_the_dashboard_and_imports_once_per_key(ops: OpsApi) -> None:
    source = (await _search(ops, "dev", "Orders and Events"))[0]
    key = f"call_{uuid.uuid4().hex}"
    headers = ops.headers("root", **{"Idempotency-Key": key})
    body = {"dashboard_id": source["id"], "source_env": "dev"}
    first = await ops.http.post("/api/envs/prod/deployments", json=body, headers=headers)
    assert first.status_code == 202, first.text
    task = await ops.wait_task(first.json()["id"])
    assert task["status"] == "success", task
    deployed = task["result"]["dashboards"]
    assert [board["title"] for board in deployed] == ["Orders and Events"]
    in_prod = await _search(ops, "prod", "Orders and Events")
    assert [board["id"] for board in in_prod] == [deployed[0]["id"]]
    assert task["result"]["backup_id"] in {backup["id"] for backup in await _backups(ops, "prod")}

    repeat = await ops.http.post("/api/envs/prod/deployments", json=body, headers=headers)
    assert repeat.status_code == 202
    assert repeat.headers["Idempotent-Replayed"] == "true"
    assert repeat.json()["id"] == first.json()["id"]
    assert len(await _backups(ops, "prod")) == 1  # the import (and its backup) ran once

    reused = await ops.http.post(
        "/api/envs/prod/deployments",
        json={"dashboard_id": source["id"] + 1000, "source_env": "dev"},
        headers=headers,
    )
    assert reused.status_code == 422
    assert reused.json()["detail"]["code"] == "idempotency_key_reused"

    health = await ops.http.get("/api/envs/prod/health", headers=ops.headers("vera"))
    assert health.json()["broken_charts"] == []  # the deployed charts work against prod's database


async def test_deploying_to_prod_needs_an_admin(ops: OpsApi) -> None:
    body = {"dashboard_id": 1, "source_env": "dev"}
    refused = await ops.http.post("/api/envs/prod/deployments", json=body, headers=ops.headers("oleg"))
    assert refused.status_code == 403
    assert refused.json()["detail"]["required_role"] == "admin"
    async with await psycopg.AsyncConnection.connect(ops.database_url) as connection:
        rows = await (
            await connection.execute(
                "SELECT service, username, action, target_env, outcome, detail FROM ops_audit "
                "WHERE action = 'deploy_dashboard'"
            )
        ).fetchall()
    assert rows == [("agent", "oleg", "deploy_dashboard", "prod", "denied", {"required_role": "admin"})]


async def test_a_backup_zip_imports_into_the_other_instance(ops: OpsApi, tmp_path: Path) -> None:
    started = await ops.http.post("/api/envs/dev/backups", headers=ops.headers("oleg"))
    assert started.status_code == 202, started.text
    task = await ops.wait_task(started.json()["id"], "oleg")
    assert task["status"] == "success", task
    backup_id = task["result"]["backup_id"]
    archive = tmp_path / "backups" / task["result"]["file_name"]
    with zipfile.ZipFile(archive) as bundle:
        titles = [name for name in bundle.namelist() if "/dashboards/" in name]
    assert len(titles) == task["result"]["dashboards"] >= 3
    assert backup_id in {backup["id"] for backup in await _backups(ops, "dev")}

    restore = await ops.http.post(
        "/api/envs/prod/restores", json={"backup_id": backup_id}, headers=ops.headers("root")
    )
    assert restore.status_code == 202, restore.text
    restored = await ops.wait_task(restore.json()["id"])
    assert restored["status"] == "success", restored
    assert "Sales Overview" in restored["result"]["dashboards"]
    assert [board["title"] for board in await _search(ops, "prod", "Sales Overview")] == ["Sales Overview"]


async def test_the_page_follows_a_task_with_the_persons_own_token_and_sees_only_its_own(ops: OpsApi) -> None:
    started = await ops.http.post("/api/envs/dev/backups", headers=ops.headers("oleg"))
    assert started.status_code == 202, started.text
    path = f"/api/my/tasks/{started.json()['id']}"

    async def read(**headers: str) -> httpx.Response:
        return await ops.http.get(path, headers=headers)

    def alone(username: str) -> str:
        return f"Bearer {ops.user_tokens[username]}"

    own = await read(Authorization=alone("oleg"))
    assert (own.status_code, own.json()["id"]) == (200, started.json()["id"])
    assert (await read(Authorization=alone("root"))).status_code == 200  # an admin sees everyone's
    other = await read(Authorization=alone("anna"))  # someone else's is not there for her
    assert (other.status_code, other.json()["detail"]["code"]) == (404, "task_not_found")
    assert (await read()).status_code == 401
    assert (
        await read(Authorization=f"Bearer {ops.service_token}")
    ).status_code == 401  # a person's, not the agent's
    assert (await ops.wait_task(started.json()["id"], "oleg"))["status"] == "success"


async def test_maintenance_refuses_deploys_with_the_reason(ops: OpsApi) -> None:
    started = await ops.http.post(
        "/api/envs/prod/maintenance", json={"reason": "database upgrade"}, headers=ops.headers("root")
    )
    assert started.status_code == 201, started.text
    try:
        twice = await ops.http.post(
            "/api/envs/prod/maintenance", json={"reason": "again"}, headers=ops.headers("root")
        )
        assert twice.status_code == 409
        assert twice.json()["detail"]["code"] == "already_under_maintenance"
        refused = await ops.http.post(
            "/api/envs/prod/deployments",
            json={"dashboard_id": 1, "source_env": "dev"},
            headers=ops.headers("root"),
        )
        assert refused.status_code == 409, refused.text
        detail = refused.json()["detail"]
        assert (detail["code"], detail["reason"], detail["env_id"]) == (
            "env_under_maintenance",
            "database upgrade",
            "prod",
        )
        assert "database upgrade" in detail["message"]
        events = await ops.http.get("/api/maintenance", headers=ops.headers("vera"))
        assert [(event["env_id"], event["active"]) for event in events.json()] == [("prod", True)]
    finally:
        ended = await ops.http.post("/api/envs/prod/maintenance/end", headers=ops.headers("root"))
        assert ended.status_code == 200, ended.text
    assert (
        await ops.http.post("/api/envs/prod/maintenance/end", headers=ops.headers("root"))
    ).status_code == 409


async def test_migration_maps_databases_onto_the_target(ops: OpsApi) -> None:
    boards = [(await _search(ops, "dev", title))[0]["id"] for title in ("Sales Overview", "Legacy KPIs")]
    listed = (await ops.http.get("/api/envs/prod/databases", headers=ops.headers("root"))).json()["databases"]
    wrong = await ops.http.post(
        "/api/envs/prod/migrations",
        json={"source_env": "dev", "dashboard_ids": boards, "database_mapping": {"examples": "no-such-db"}},
        headers=ops.headers("root"),
    )
    task = await ops.wait_task(wrong.json()["id"])
    assert (task["status"], task["error"]["code"]) == ("failed", "bundle_not_importable")
    assert "no-such-db" in task["error"]["message"]

    right = await ops.http.post(
        "/api/envs/prod/migrations",
        json={"source_env": "dev", "dashboard_ids": boards, "database_mapping": {"examples": "examples"}},
        headers=ops.headers("root"),
    )
    task = await ops.wait_task(right.json()["id"])
    assert task["status"] == "success", task
    assert sorted(board["title"] for board in task["result"]["dashboards"]) == [
        "Legacy KPIs",
        "Sales Overview",
    ]
    databases = (await ops.http.get("/api/envs/prod/databases", headers=ops.headers("root"))).json()[
        "databases"
    ]
    assert databases == listed  # mapped, not duplicated


async def test_a_change_of_what_superset_hides_from_the_person_leaves_no_backup_and_no_task(
    ops: OpsApi,
) -> None:
    """alice is an admin of ops, but Superset shows her no "Orders and Events": a migration or
    a deploy of it is refused as Superset refuses her (the same code for both), before a backup
    of prod or a task exists."""
    board = (await _search(ops, "dev", "Orders and Events", username="root"))[0]["id"]
    engine = create_engine(ops.database_url)
    try:
        await UserStore(engine).create(ANALYST_USER, "alice-pass-1234", Role.ADMIN)
    finally:
        await engine.dispose()
    login = await ops.http.post(
        "/api/auth/login", json={"username": ANALYST_USER, "password": "alice-pass-1234"}
    )
    ops.user_tokens[ANALYST_USER] = login.json()["access_token"]
    refusals = []
    for path, body in (
        ("migrations", {"source_env": "dev", "dashboard_ids": [board]}),
        ("deployments", {"source_env": "dev", "dashboard_id": board}),
    ):
        reply = await ops.http.post(f"/api/envs/prod/{path}", json=body, headers=ops.headers(ANALYST_USER))
        refusals.append((reply.status_code, reply.json()["detail"]["code"]))
    assert refusals == [(404, "superset_not_found")] * 2
    assert await _backups(ops, "prod") == []
    async with await psycopg.AsyncConnection.connect(ops.database_url) as connection:
        assert await (await connection.execute("SELECT kind FROM ops_tasks")).fetchall() == []


async def test_branches_and_commits_of_dashboard_exports(ops: OpsApi, tmp_path: Path) -> None:
    branch = f"feature/{uuid.uuid4().hex[:8]}"
    created = await ops.http.post("/api/git/branches", json={"name": branch}, headers=ops.headers("oleg"))
    assert created.status_code == 201, created.text
    again = await ops.http.post("/api/git/branches", json={"name": branch}, headers=ops.headers("oleg"))
    assert again.status_code == 409
    bad = await ops.http.post("/api/git/branches", json={"name": "no..good"}, headers=ops.headers("oleg"))
    assert bad.status_code == 422  # revision syntax is no branch name: refused before git is asked
    assert [error["loc"] for error in bad.json()["detail"]] == [["body", "name"]]

    board = (await _search(ops, "dev", "Sales Overview"))[0]
    body = {
        "branch": branch,
        "env_id": "dev",
        "dashboard_ids": [board["id"]],
        "message": "Sales Overview from dev",
    }
    commit = await ops.http.post("/api/git/commits", json=body, headers=ops.headers("oleg"))
    assert commit.status_code == 201, commit.text
    assert commit.json()["committed"] is True
    changed = " ".join(commit.json()["changed"])
    assert "environments/dev/dashboards/" in changed
    assert "environments/dev/charts/" in changed
    assert (tmp_path / "exports" / ".git").is_dir()

    unchanged = await ops.http.post("/api/git/commits", json=body, headers=ops.headers("oleg"))
    assert unchanged.json()["committed"] is False  # nothing moved in Superset: nothing to commit
    missing = await ops.http.post(
        "/api/git/commits", json={**body, "branch": "nope"}, headers=ops.headers("oleg")
    )
    assert missing.status_code == 404


async def test_validation_and_documentation_run_as_tasks(ops: OpsApi) -> None:
    legacy = (await _search(ops, "dev", "Legacy KPIs"))[0]
    started = await ops.http.post(
        f"/api/envs/dev/dashboards/{legacy['id']}/validation", headers=ops.headers("anna")
    )
    assert started.status_code == 202, started.text
    task = await ops.wait_task(started.json()["id"], "anna")
    assert task["status"] == "success", task
    report = task["result"]
    assert report["valid"] is False
    assert report["provider"] == "offline"
    assert any("no such table" in finding["message"] for finding in report["findings"])
    health = (await ops.http.get("/api/envs/dev/health", headers=ops.headers("vera"))).json()
    assert task["id"] in {run["task_id"] for run in health["last_validations"]}

    sales = (await _search(ops, "dev", "Sales Overview"))[0]
    documented = await ops.http.post(
        f"/api/envs/dev/dashboards/{sales['id']}/documentation", headers=ops.headers("anna")
    )
    task = await ops.wait_task(documented.json()["id"], "anna")
    # in Superset, an Alpha changes only the charts they own: these are the admin's
    assert task["status"] == "failed", task
    assert task["error"]["code"] == "superset_forbidden", task
    documented = await ops.http.post(
        f"/api/envs/dev/dashboards/{sales['id']}/documentation", headers=ops.headers("oleg")
    )
    task = await ops.wait_task(documented.json()["id"], "oleg")
    assert task["status"] == "success", task
    written = {item["chart_id"]: item["description"] for item in task["result"]["charts_documented"]}
    assert len(written) == 3
    assert any("region" in text for text in written.values())
    providers = (await ops.http.get("/api/llm/providers", headers=ops.headers("vera"))).json()
    assert [provider["id"] for provider in providers] == ["offline"]


async def test_a_stopped_superset_is_a_typed_503_and_the_other_environment_still_works(
    supersets: dict[str, Instance],
    ops_jwks_url: str,
    fresh_database_url: str,
    tracer_provider: TracerProvider,
    tmp_path: Path,
) -> None:
    home = default_home()
    staging = prepare_instance(home, tmp_path / "staging", "staging", free_port(), ops_jwks_url=ops_jwks_url)
    listed = {**supersets, "staging": staging}
    with ExitStack() as superset_running:
        await asyncio.to_thread(superset_running.enter_context, running(home, [staging]))
        admin = client(staging, PASSWORD_ENV)
        try:
            await add_person(admin, "vera", ("Gamma",))
        finally:
            await admin.aclose()
        async with running_ops(
            fresh_database_url,
            tracer_provider,
            environments(listed, PASSWORD_ENV),
            tmp_path,
            superset_read_retries=1,
        ) as ops:
            before = await ops.http.get("/api/envs/staging/dashboards", headers=ops.headers("vera"))
            assert before.status_code == 200, before.text
            await asyncio.to_thread(superset_running.close)  # Superset stops under a running ops

            reply = await ops.http.get("/api/envs/staging/dashboards", headers=ops.headers("vera"))
            assert reply.status_code == 503, reply.text
            detail = reply.json()["detail"]
            assert (detail["code"], detail["env_id"]) == ("superset_unavailable", "staging")
            assert "Traceback" not in reply.text
            health = await ops.http.get("/api/envs/staging/health", headers=ops.headers("vera"))
            assert health.status_code == 503
            assert health.json()["detail"]["env_id"] == "staging"
            assert (
                await ops.http.get("/api/envs/dev/dashboards", headers=ops.headers("vera"))
            ).status_code == 200
            unknown = await ops.http.get("/api/envs/nowhere/dashboards", headers=ops.headers("vera"))
            assert unknown.status_code == 404
            assert unknown.json()["detail"]["code"] == "invalid_environment"
