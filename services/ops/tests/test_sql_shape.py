"""SQL judged in the target database's own dialect, against real Superset 6.1 (dev, whose
example database is SQLite): the shape endpoint the agent's gate asks, and execute_sql acting
on the very same judgement, sending Superset the statement as it was read, behind the
database's own read-only guard."""

import sqlite3

import pytest

from sstools.common.catalogue import Role
from sstools.devstack.confirming import UNCONFIRMED
from sstools.devstack.demo import PASSWORD_ENV, client
from sstools.devstack.superset import Instance

from .conftest import USERS, OpsApi

EXAMPLES = 1  # the dev instance's first database: the SQLite example data
# One SELECT of a string to PostgreSQL; a SELECT and a CREATE TABLE to SQLite (issue 17).
TWO_FACED = r"SELECT E'\' FROM (SELECT 1 AS E); CREATE TABLE two_faced AS SELECT 1; --'"


def _examples_tables(supersets: dict[str, Instance]) -> list[str]:
    path = supersets["dev"].folder.parent / "examples.db"
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as examples:
        return sorted(name for (name,) in examples.execute("SELECT name FROM sqlite_master"))


async def test_the_shape_is_judged_in_the_databases_own_dialect(ops: OpsApi) -> None:
    async def shape(sql: str) -> dict[str, object]:
        reply = await ops.http.post(
            "/api/envs/dev/sql/shape", json={"database_id": EXAMPLES, "sql": sql}, headers=ops.headers("anna")
        )
        assert reply.status_code == 200, reply.text
        return dict(reply.json())

    assert await shape(TWO_FACED) == {
        "env_id": "dev",
        "database_id": EXAMPLES,
        "backend": "sqlite",
        "dialect": "sqlite",
        "read_only": False,
        "statements": 2,
        "kinds": ["select", "create"],
        "reasons": ["several_statements", "ddl"],
    }
    read = await shape("SELECT region, COUNT(*) AS n FROM sales GROUP BY region")
    assert (read["read_only"], read["statements"], read["reasons"]) == (True, 1, [])
    udf = await shape("SELECT region FROM sales WHERE load_extension('/tmp/x') IS NULL")
    assert (udf["read_only"], udf["reasons"]) == (False, ["function:load_extension"])


async def test_the_shape_of_an_unknown_database_is_a_typed_404_and_viewers_may_not_ask(ops: OpsApi) -> None:
    body = {"database_id": 987654, "sql": "SELECT 1"}
    unknown = await ops.http.post("/api/envs/dev/sql/shape", json=body, headers=ops.headers("anna"))
    assert unknown.status_code == 404, unknown.text
    assert unknown.json()["detail"]["code"] == "superset_not_found"
    viewer = await ops.http.post(
        "/api/envs/dev/sql/shape", json={**body, "database_id": EXAMPLES}, headers=ops.headers("vera")
    )
    assert viewer.status_code == 403
    assert viewer.json()["detail"]["code"] == "permission_denied"


@pytest.mark.parametrize("env_id", ["dev", "prod"])
async def test_statements_that_change_data_are_for_the_admin_alone(ops: OpsApi, env_id: str) -> None:
    body = {"database_id": EXAMPLES, "sql": "DELETE FROM sales"}
    for username, role in USERS.items():
        headers = ops.headers(username, **UNCONFIRMED)  # a confirmed one would delete the sales
        reply = await ops.http.post(f"/api/envs/{env_id}/sql", json=body, headers=headers)
        if role is Role.ADMIN:
            assert reply.json()["detail"]["code"] == "confirmation_required"
        else:
            assert reply.status_code == 403, reply.text
            # A viewer may run no SQL at all: that is the first thing the refusal says.
            expected = "analyst" if role is Role.VIEWER else "admin"
            assert reply.json()["detail"]["required_role"] == expected


async def test_what_sqlite_reads_as_two_statements_is_refused_to_an_analyst(
    ops: OpsApi, supersets: dict[str, Instance]
) -> None:
    refused = await ops.http.post(
        "/api/envs/dev/sql",
        json={"database_id": EXAMPLES, "sql": TWO_FACED},
        headers=ops.headers("anna"),
    )
    assert refused.status_code == 403, refused.text
    assert refused.json()["detail"]["required_role"] == "admin"
    assert "two_faced" not in _examples_tables(supersets)


async def test_what_cannot_be_sent_faithfully_is_not_sent_even_for_an_admin(ops: OpsApi) -> None:
    # SQLite has no SELECT INTO; sqlglot would write it as CREATE TABLE, so it is not sent at all.
    reply = await ops.http.post(
        "/api/envs/dev/sql",
        json={"database_id": EXAMPLES, "sql": "SELECT * INTO sales_copy FROM sales"},
        headers=ops.headers("root"),
    )
    assert reply.status_code == 422, reply.text
    assert reply.json()["detail"]["code"] == "sql_not_parsed"


async def test_superset_is_sent_the_rendered_statement_behind_the_read_only_guard(
    ops: OpsApi, supersets: dict[str, Instance]
) -> None:
    sql = "select region /* a comment */, count(*) as n from sales -- trailing\ngroup by region order by 1"
    reply = await ops.http.post(
        "/api/envs/dev/sql", json={"database_id": EXAMPLES, "sql": sql}, headers=ops.headers("anna")
    )
    assert reply.status_code == 200, reply.text
    assert [row["region"] for row in reply.json()["rows"]] == ["East", "North", "South", "West"]
    superset = client(supersets["dev"], PASSWORD_ENV)
    try:
        latest = await superset.get(
            "/api/v1/query/",
            q={"columns": ["sql"], "order_column": "changed_on", "order_direction": "desc", "page_size": 1},
        )
    finally:
        await superset.aclose()
    assert latest["result"][0]["sql"] == (
        "PRAGMA query_only = 1;\nSELECT region, COUNT(*) AS n FROM sales GROUP BY region ORDER BY 1"
    )
