"""SQL through SQL Lab, and the catalogue of databases, schemas, tables and columns.

A statement is judged in the dialect of the database it is for, which Superset names (its
``backend``), and SQL Lab is sent the statement as the parser read it, written again in that
dialect (``sstools.common.sql.render``), never the text that came in. A read also carries, where
the backend has one, a guard that makes the database itself refuse writes; each was checked
against a real Superset 6.1, which runs a script's statements one after another on one fresh
connection (NullPool), so the guard covers the query and ends with it:

- PostgreSQL: ``SET TRANSACTION READ ONLY`` — writes, ``nextval()``, SELECT INTO and writing
  functions fail with "cannot execute ... in a read-only transaction" — and
  ``SET LOCAL statement_timeout``, so a read the parser let through cannot run on in the
  database after ops stopped waiting for it ("canceling statement due to statement timeout").
- SQLite: ``PRAGMA query_only = 1`` — writes fail with "attempt to write a readonly database"
  (Superset's own parser does not read ``= ON``).

Other backends have the parser's judgement alone.

Superset also puts a schema into SQL as text (PostgreSQL's pre-query
``set search_path = "{schema}"``, run before the guard on the same connection), so a schema,
like a table, is an identifier (``sstools.common.tool_args.SqlIdentifier``) and must be one the
database lists (:func:`known_schema`, :func:`known_table`) before anything else is sent.
"""

import time
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from sstools.common.sql import SqlNotParsed, SqlShape, classify, dialect_for_backend, render
from sstools.ops.errors import NotFound
from sstools.ops.superset.client import SupersetClient, SupersetRejected


def read_guard(dialect: str, timeout_seconds: float) -> str | None:
    """What runs before a read in ``dialect``, on its connection; None where the backend has none."""
    if dialect == "postgres":
        milliseconds = max(int(timeout_seconds * 1000), 1)
        return f"SET TRANSACTION READ ONLY;\nSET LOCAL statement_timeout = {milliseconds}"
    if dialect == "sqlite":
        return "PRAGMA query_only = 1"
    return None


# How long a database's backend is trusted before Superset is asked again.
BACKEND_CACHE_SECONDS = 60.0


@dataclass(frozen=True)
class Judgement:
    """A statement judged in its database's dialect (none when the backend is not one we know)."""

    backend: str | None
    dialect: str | None
    shape: SqlShape


class Backends:
    """Each database's backend, as Superset names it, remembered briefly per environment: every
    SQL call needs it, and it changes only when someone edits the database's connection."""

    def __init__(self, ttl_seconds: float = BACKEND_CACHE_SECONDS) -> None:
        self._ttl = ttl_seconds
        self._known: dict[tuple[str, int], tuple[str | None, float]] = {}

    async def backend(self, client: SupersetClient, database_id: int) -> str | None:
        """``SupersetNotFound`` (404) for a database Superset does not know."""
        key = (client.env_id, database_id)
        now = time.monotonic()
        known = self._known.get(key)
        if known is not None and known[1] > now:
            return known[0]
        database = await client.get(f"/api/v1/database/{database_id}")
        backend = database.get("result", {}).get("backend")
        self._known[key] = (str(backend) if backend else None, now + self._ttl)
        return self._known[key][0]


async def judge(client: SupersetClient, backends: Backends, database_id: int, sql: str) -> Judgement:
    backend = await backends.backend(client, database_id)
    dialect = dialect_for_backend(backend)
    if dialect is None:
        shape = SqlShape(statements=0, read_only=False, kinds=[], reasons=["unknown_backend"])
    else:
        shape = classify(sql, dialect)
    return Judgement(backend, dialect, shape)


def script(sql: str, judgement: Judgement, timeout_seconds: float) -> str:
    """What SQL Lab is sent: the statement rendered in its dialect, after the read-only guard
    when it is a read. ``SqlNotParsed`` when it cannot be rendered (or the backend is unknown)."""
    if judgement.dialect is None:
        raise SqlNotParsed(f"no SQL dialect is known for the backend {judgement.backend!r}")
    rendered = render(sql, judgement.dialect)
    guard = read_guard(judgement.dialect, timeout_seconds) if judgement.shape.read_only else None
    return f"{guard};\n{rendered}" if guard else rendered


class UnknownSchema(NotFound):
    code = "unknown_schema"


class UnknownTable(NotFound):
    code = "unknown_table"


async def known_schema(client: SupersetClient, database_id: int, schema: str) -> None:
    """``UnknownSchema`` unless Superset lists ``schema`` for the database (as the person sees it)."""
    schemas = await client.get(f"/api/v1/database/{database_id}/schemas/")
    if schema not in (schemas.get("result") or []):
        raise UnknownSchema(
            f"database {database_id} has no schema {schema!r}", database_id=database_id, schema=schema
        )


async def known_table(client: SupersetClient, database_id: int, schema: str, table: str) -> None:
    """``UnknownTable`` unless Superset lists ``table`` in the schema."""
    tables = await client.get(f"/api/v1/database/{database_id}/tables/", q={"schema_name": schema})
    if table not in [item.get("value") for item in tables.get("result") or []]:
        raise UnknownTable(
            f"database {database_id} has no table {table!r} in schema {schema!r}",
            database_id=database_id,
            schema=schema,
            table=table,
        )


class SqlResult(BaseModel):
    env_id: str
    database_id: int
    status: str
    columns: list[str]
    rows: list[dict[str, Any]]
    row_count: int
    limit: int
    truncated: bool


async def execute(
    client: SupersetClient,
    database_id: int,
    sql: str,
    *,
    schema: str | None,
    limit: int,
    timeout_seconds: float,
) -> SqlResult:
    body = {
        "database_id": database_id,
        "sql": sql,
        "schema": schema,
        "runAsync": False,
        "select_as_cta": False,
        "ctas_method": "TABLE",
        "tab": "sstools",
        "queryLimit": limit,
        "expand_data": False,
    }
    result = await client.post("/api/v1/sqllab/execute/", body, timeout_seconds=timeout_seconds)
    if result.get("status") not in ("success", None):
        raise SupersetRejected(client.env_id, str(result.get("error") or result.get("status")))
    rows = list(result.get("data") or [])
    columns = [column.get("column_name") or column.get("name") for column in result.get("columns") or []]
    return SqlResult(
        env_id=client.env_id,
        database_id=database_id,
        status=str(result.get("status", "success")),
        columns=[str(column) for column in columns],
        rows=rows[:limit],
        row_count=min(len(rows), limit),
        limit=limit,
        truncated=len(rows) >= limit,
    )


class DatabaseInfo(BaseModel):
    id: int
    name: str
    backend: str | None
    allow_dml: bool


class Catalogue(BaseModel):
    """What one step of exploration found: databases, or a database's schemas, or a schema's
    tables, or a table's columns."""

    env_id: str
    databases: list[DatabaseInfo] | None = None
    schemas: list[str] | None = None
    tables: list[str] | None = None
    columns: list[dict[str, Any]] | None = None


async def explore(
    client: SupersetClient, database_id: int | None, schema: str | None, table: str | None
) -> Catalogue:
    if database_id is None:
        listing = await client.get(
            "/api/v1/database/",
            q={"columns": ["id", "database_name", "backend", "allow_dml"], "page_size": 100},
        )
        databases = [
            DatabaseInfo(
                id=item["id"],
                name=item["database_name"],
                backend=item.get("backend"),
                allow_dml=bool(item.get("allow_dml")),
            )
            for item in listing.get("result", [])
        ]
        return Catalogue(env_id=client.env_id, databases=databases)
    if schema is None:
        schemas = await client.get(f"/api/v1/database/{database_id}/schemas/")
        return Catalogue(env_id=client.env_id, schemas=list(schemas.get("result", [])))
    await known_schema(client, database_id, schema)
    if table is None:
        tables = await client.get(f"/api/v1/database/{database_id}/tables/", q={"schema_name": schema})
        return Catalogue(env_id=client.env_id, tables=[item["value"] for item in tables.get("result", [])])
    await known_table(client, database_id, schema, table)
    metadata = await client.get(
        f"/api/v1/database/{database_id}/table_metadata/", params={"name": table, "schema": schema}
    )
    columns = [
        {"name": column["name"], "type": column.get("type"), "comment": column.get("comment")}
        for column in metadata.get("columns", [])
    ]
    return Catalogue(env_id=client.env_id, columns=columns)
