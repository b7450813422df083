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

PostgreSQL reads a qualified name that is not a column of its table as a call of a function over
the table's row (``t.f`` is ``f(t)``), which no allow-list judged: a read whose qualified names
only the stored tables can answer for is a read only once Superset's description of each table
lists them (:class:`DatabaseFacts`, ``sstools.common.sql_columns``).
"""

import re
import time
from dataclasses import dataclass, replace
from typing import Any

from pydantic import BaseModel

from sstools.common.sql import SqlNotParsed, SqlShape, classify, dialect_for_backend, render
from sstools.common.sql_columns import TableRef
from sstools.common.tool_args import IDENTIFIER_PATTERN
from sstools.ops.errors import Conflict, NotFound
from sstools.ops.superset.client import SupersetClient, SupersetError, SupersetRejected


def read_guard(dialect: str, timeout_seconds: float) -> str | None:
    """What runs before a read in ``dialect``, on its connection; None where the backend has none."""
    if dialect == "postgres":
        milliseconds = max(int(timeout_seconds * 1000), 1)
        return f"SET TRANSACTION READ ONLY;\nSET LOCAL statement_timeout = {milliseconds}"
    if dialect == "sqlite":
        return "PRAGMA query_only = 1"
    return None


_IDENTIFIER = re.compile(IDENTIFIER_PATTERN)

# How long what a database is (its backend, its tables' columns) is trusted before Superset is
# asked again.
FACTS_CACHE_SECONDS = 60.0


@dataclass(frozen=True)
class Judgement:
    """A statement judged in its database's dialect (none when the backend is not one we know)."""

    backend: str | None
    dialect: str | None
    shape: SqlShape


class DatabaseFacts:
    """Each database's backend, and the columns of the tables SQL names, as Superset describes
    them to the person asking, remembered briefly per environment and person: every SQL call
    needs them, they change only when someone edits the database's connection or a table, and
    what one person may see of a database is no answer for another."""

    def __init__(self, ttl_seconds: float = FACTS_CACHE_SECONDS) -> None:
        self._ttl = ttl_seconds
        self._backends: dict[tuple[str, str | None, int], tuple[str | None, float]] = {}
        self._columns: dict[tuple[str, str | None, int, str | None, str], tuple[list[str], float]] = {}

    async def backend(self, client: SupersetClient, database_id: int) -> str | None:
        """``SupersetNotFound`` (404) for a database Superset does not know."""
        key = (client.env_id, client.person, database_id)
        now = time.monotonic()
        known = self._backends.get(key)
        if known is not None and known[1] > now:
            return known[0]
        database = await client.get(f"/api/v1/database/{database_id}")
        backend = database.get("result", {}).get("backend")
        self._backends[key] = (str(backend) if backend else None, now + self._ttl)
        return self._backends[key][0]

    async def columns(self, client: SupersetClient, database_id: int, table: TableRef) -> list[str] | None:
        """The table's column names in order; None when Superset cannot describe it (no such
        table, or none the person may see: Superset answers both alike), and without asking
        when a name is not an identifier: the names come from the statement, and Superset
        writes the schema into ``set search_path = "{schema}"`` on the inspector's connection."""
        if not all(_IDENTIFIER.fullmatch(name) for name in (table.schema or "_", table.name)):
            return None
        key = (client.env_id, client.person, database_id, table.schema, table.name)
        now = time.monotonic()
        known = self._columns.get(key)
        if known is not None and known[1] > now:
            return known[0]
        params = {"name": table.name, **({"schema": table.schema} if table.schema else {})}
        try:
            metadata = await client.get(f"/api/v1/database/{database_id}/table_metadata/", params=params)
        except SupersetError:  # 500 for a missing table, 404 for a hidden one
            return None
        names = [str(column["name"]) for column in metadata.get("columns") or []]
        self._columns[key] = (names, now + self._ttl)
        return names


async def _qualified_names_found(
    client: SupersetClient, facts: DatabaseFacts, database_id: int, schema: str | None, shape: SqlShape
) -> SqlShape:
    """The read's shape once each qualified name is found among its tables' columns; a name
    that is not one would run as a function over the row (attribute notation): not a read."""
    reasons: list[str] = []
    for need in shape.column_needs:
        found = False
        for table in need.tables:
            # an unqualified table is looked for where SQL Lab's search_path puts it
            named = table if table.schema or schema is None else replace(table, schema=schema)
            columns = await facts.columns(client, database_id, named)
            if columns is None:
                reasons.append(f"unknown_table:{named.name}")
            elif need.name in table.visible(columns):
                found = True
                break
        if not found:
            reasons.append(f"not_a_column:{need.reference}")
    if not reasons:
        return shape
    return replace(shape, read_only=False, reasons=list(dict.fromkeys([*shape.reasons, *reasons])))


async def judge(
    client: SupersetClient, facts: DatabaseFacts, database_id: int, sql: str, schema: str | None = None
) -> Judgement:
    """The statement judged for the database; ``schema`` is the one SQL Lab is to run it in."""
    backend = await facts.backend(client, database_id)
    dialect = dialect_for_backend(backend)
    if dialect is None:
        shape = SqlShape(statements=0, read_only=False, kinds=[], reasons=["unknown_backend"])
    else:
        shape = classify(sql, dialect)
    if shape.read_only and shape.column_needs:
        shape = await _qualified_names_found(client, facts, database_id, schema, shape)
    return Judgement(backend, dialect, shape)


def script(sql: str, judgement: Judgement, timeout_seconds: float) -> str:
    """What SQL Lab is sent: the statement rendered in its dialect, after the read-only guard
    when it is a read. ``SqlNotParsed`` when it cannot be rendered (or the backend is unknown)."""
    if judgement.dialect is None:
        raise SqlNotParsed(f"no SQL dialect is known for the backend {judgement.backend!r}")
    rendered = render(sql, judgement.dialect)
    guard = read_guard(judgement.dialect, timeout_seconds) if judgement.shape.read_only else None
    return f"{guard};\n{rendered}" if guard else rendered


class StatementInterrupted(Conflict):
    code = "sql_interrupted"


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
