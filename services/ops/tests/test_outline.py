"""An environment's outline, read as the person from the real dev Superset (a SQLite examples
database and the PostgreSQL demo), through a real ops: what it holds, what it leaves out, and
what it costs of the person's budget of heavy reads."""

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from opentelemetry.sdk.trace import TracerProvider
from psycopg import sql
from sqlalchemy.engine import make_url

from sstools.common.outline import EnvOutline, OutlineDatabase, OutlineTable
from sstools.devstack.demo import PASSWORD_ENV, POSTGRES_DATABASE, environments
from sstools.devstack.superset import Instance

from .conftest import OpsApi, running_ops

# A schema of the PostgreSQL demo whose table Superset's connection may list but not read.
HIDDEN_SCHEMA = "outline_hidden"


async def _outline(ops: OpsApi, username: str = "anna", env_id: str = "dev") -> EnvOutline:
    reply = await ops.http.get(f"/api/envs/{env_id}/outline", headers=ops.headers(username))
    assert reply.status_code == 200, reply.text
    return EnvOutline.model_validate(reply.json())


def _database(outline: EnvOutline, name: str) -> OutlineDatabase:
    return next(database for database in outline.databases if database.name == name)


def _table(database: OutlineDatabase, schema: str, name: str) -> OutlineTable:
    return next(table for table in database.tables if (table.schema_name, table.name) == (schema, name))


def _values(table: OutlineTable) -> dict[str, list[str] | None]:
    return {column.name: column.values for column in table.columns}


async def test_the_outline_holds_each_database_s_tables_columns_and_few_values(ops: OpsApi) -> None:
    outline = await _outline(ops)
    assert outline.env_id == "dev"

    examples = _database(outline, "examples")
    assert examples.backend == "sqlite"
    assert {"sales", "orders", "events"} <= {table.name for table in examples.tables}
    sales = _table(examples, "main", "sales")
    assert [(column.name, column.type) for column in sales.columns] == [
        ("id", "INTEGER"),
        ("day", "TEXT"),
        ("region", "TEXT"),
        ("product", "TEXT"),
        ("amount", "REAL"),
    ]
    # a text column of few values lists them; one of many (300 days), or not text, does not
    assert _values(sales) == {
        "id": None,
        "day": None,
        "region": ["East", "North", "South", "West"],
        "product": ["Gadget", "Gizmo", "Widget"],
        "amount": None,
    }
    orders = _values(_table(examples, "main", "orders"))
    assert (orders["customer"], orders["status"]) == (None, ["cancelled", "new", "paid", "shipped"]), (
        outline.notes
    )

    demo = _database(outline, POSTGRES_DATABASE)
    assert demo.backend == "postgresql"
    assert {("public", "accounts"), ("public", "invoices"), ("reports", "monthly_revenue")} <= {
        (table.schema_name, table.name) for table in demo.tables
    }
    accounts = _values(_table(demo, "public", "accounts"))
    assert accounts["plan"] == ["enterprise", "free", "team"]
    assert accounts["since"] is None  # a date
    assert _values(_table(demo, "public", "invoices"))["status"] == ["open", "overdue", "paid"]
    assert _values(_table(demo, "reports", "monthly_revenue"))["region"] == ["North", "South"]


async def test_the_outline_leaves_out_the_schemas_a_database_keeps_for_itself(ops: OpsApi) -> None:
    outline = await _outline(ops)
    demo = _database(outline, POSTGRES_DATABASE)
    listed = await ops.http.get(
        "/api/envs/dev/databases", params={"database_id": demo.id}, headers=ops.headers("anna")
    )
    assert "information_schema" in listed.json()["schemas"]  # Superset lists it
    assert {table.schema_name for table in demo.tables} == {"public", "reports"}
    assert {table.schema_name for table in _database(outline, "examples").tables} == {"main"}


@pytest.fixture
def hidden_table(database_url: str, demo_postgres: str) -> Iterator[None]:
    """A table in the PostgreSQL demo that Superset's connection (the demo's owner) sees in the
    catalogue but may not read."""
    demo = make_url(demo_postgres).database
    as_superuser = make_url(database_url).set(drivername="postgresql", database=demo)
    schema = sql.Identifier(HIDDEN_SCHEMA)
    with psycopg.connect(as_superuser.render_as_string(hide_password=False), autocommit=True) as connection:
        connection.execute(sql.SQL("CREATE SCHEMA {}").format(schema))
        connection.execute(sql.SQL("CREATE TABLE {}.secrets (id int, label text)").format(schema))
        connection.execute(sql.SQL("INSERT INTO {}.secrets VALUES (1, 'a')").format(schema))
        try:
            yield
        finally:
            connection.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(schema))


async def test_a_table_whose_values_cannot_be_read_keeps_its_columns_with_a_note(
    ops: OpsApi, hidden_table: None
) -> None:
    outline = await _outline(ops)
    demo = _database(outline, POSTGRES_DATABASE)
    hidden = _table(demo, HIDDEN_SCHEMA, "secrets")
    assert _values(hidden) == {"id": None, "label": None}
    assert any(f"{HIDDEN_SCHEMA}.secrets" in note and "values not read" in note for note in outline.notes)
    # the rest of the outline is whole
    assert _values(_table(demo, "public", "accounts"))["plan"] == ["enterprise", "free", "team"]


async def test_a_viewer_may_not_read_an_outline(ops: OpsApi) -> None:
    reply = await ops.http.get("/api/envs/dev/outline", headers=ops.headers("vera"))
    assert reply.status_code == 403
    assert reply.json()["detail"] == {
        "code": "permission_denied",
        "tool": "superset_explore_database",
        "env": "dev",
        "required_role": "analyst",
        "user_role": "viewer",
    }


@pytest.fixture
async def ops_of_two_heavy_reads(
    supersets: dict[str, Instance], fresh_database_url: str, tracer_provider: TracerProvider, tmp_path: Path
) -> AsyncIterator[OpsApi]:
    async with running_ops(
        fresh_database_url,
        tracer_provider,
        environments(supersets, PASSWORD_ENV),
        tmp_path,
        heavy_reads_per_minute=2,
    ) as api:
        yield api


async def test_an_outline_is_one_heavy_read_whatever_it_ran(ops_of_two_heavy_reads: OpsApi) -> None:
    ops = ops_of_two_heavy_reads
    # each outline ran a statement per table and more; each cost one of the two a minute
    for _ in range(2):
        await _outline(ops)
    over = await ops.http.get("/api/envs/dev/outline", headers=ops.headers("anna"))
    detail: dict[str, Any] = over.json()["detail"]
    assert (over.status_code, detail["code"]) == (429, "read_budget_exceeded")
    assert int(over.headers["Retry-After"]) == detail["retry_after"]
    # another person's budget is their own
    assert (await ops.http.get("/api/envs/dev/outline", headers=ops.headers("oleg"))).status_code == 200
