"""An environment's outline as one person sees it: its databases, their tables across every
schema that is not the database's own bookkeeping, each table's columns, and the values of each
text column that holds only a few.

Everything is read as the person, so Superset's permissions decide what it holds. A table's
values are read with one statement, built as a tree and sent through the same path as
``superset_execute_sql``'s reads: judged in the database's dialect, rendered again, behind the
backend's read-only guard. What cannot be read — a database, a table, a table's values — is left
out with a note; only a failure to list the databases fails the outline.
"""

import asyncio
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from sqlglot import exp
from sqlglot.errors import SqlglotError

from sstools.common.outline import (
    OUTLINE_DATABASES,
    OUTLINE_TABLES,
    OUTLINE_VALUES,
    EnvOutline,
    OutlineColumn,
    OutlineDatabase,
    OutlineTable,
)
from sstools.common.sql import SqlNotParsed, dialect_for_backend
from sstools.ops.superset import sqllab
from sstools.ops.superset.client import SupersetClient, SupersetError

# Schemas a database keeps for itself (PostgreSQL reserves every name starting with pg_).
SYSTEM_SCHEMA = re.compile(r"information_schema|performance_schema|mysql|sys|pg_\w*", re.IGNORECASE)

# Superset calls one outline has under way at once: a person's outline must not crowd out the
# instance's other users.
CONCURRENCY = 4
_RETRY_PAUSE_SECONDS = 0.5

_T = TypeVar("_T")


def is_system_schema(name: str) -> bool:
    return SYSTEM_SCHEMA.fullmatch(name) is not None


def is_text_type(type_name: str | None, dialect: str | None) -> bool:
    """Whether a column of this type (as Superset names it) holds text, read in the dialect."""
    if not type_name or dialect is None:
        return False
    try:
        built = exp.DataType.build(type_name, dialect=dialect)
    except (SqlglotError, ValueError):  # a type of the database's own sqlglot does not know
        return False
    return built.is_type(*exp.DataType.TEXT_TYPES)


def values_statement(schema: str, table: str, columns: list[str], dialect: str) -> str:
    """One read of up to ``OUTLINE_VALUES + 1`` distinct non-null values of each column, as
    rows of (the column's index, the value as text): one more than listed says "more"."""
    reads = []
    for index, name in enumerate(columns):
        column = exp.column(name, quoted=True)
        distinct = (
            exp.select(column)
            .distinct()
            .from_(exp.table_(table, db=schema, quoted=True))
            .where(exp.not_(column.is_(exp.null())))
            .limit(OUTLINE_VALUES + 1)
        )
        reads.append(
            exp.select(
                exp.alias_(exp.Literal.number(index), "c"),
                exp.alias_(exp.cast(column, exp.DataType.Type.TEXT), "v"),
            ).from_(distinct.subquery(f"d{index}"))
        )
    statement: exp.Query = reads[0]
    for read in reads[1:]:
        statement = exp.union(statement, read, distinct=False)
    return statement.sql(dialect)


@dataclass
class _Reader:
    client: SupersetClient
    facts: sqllab.DatabaseFacts
    max_rows: int
    timeout_seconds: float
    gate: asyncio.Semaphore = field(default_factory=lambda: asyncio.Semaphore(CONCURRENCY))
    notes: list[str] = field(default_factory=list)

    async def bounded(self, call: Callable[[], Awaitable[_T]]) -> _T:
        async with self.gate:
            return await call()

    async def get(self, path: str, **kwargs: Any) -> Any:
        return await self.bounded(lambda: self.client.get(path, **kwargs))

    async def database(self, item: dict[str, Any]) -> OutlineDatabase | None:
        database_id, name = int(item["id"]), str(item.get("database_name") or "")
        backend = item.get("backend")
        try:
            names = await self.table_names(database_id)
        except SupersetError as error:
            self.notes.append(f"database {database_id} {name!r} not read: {error.code}")
            return None
        if len(names) > OUTLINE_TABLES:
            self.notes.append(f"database {database_id} {name!r}: the first {OUTLINE_TABLES} tables")
        dialect = dialect_for_backend(backend)
        tables = await asyncio.gather(
            *(self.table(database_id, dialect, schema, table) for schema, table in names[:OUTLINE_TABLES])
        )
        return OutlineDatabase(
            id=database_id,
            name=name,
            backend=str(backend) if backend else None,
            tables=[table for table in tables if table is not None],
        )

    async def table_names(self, database_id: int) -> list[tuple[str, str]]:
        """(schema, table) of every table and view outside the system schemas, schema by schema."""
        listed = await self.get(f"/api/v1/database/{database_id}/schemas/")
        schemas = [str(schema) for schema in listed.get("result") or [] if not is_system_schema(str(schema))]
        found = await asyncio.gather(
            *(
                self.get(f"/api/v1/database/{database_id}/tables/", q={"schema_name": schema})
                for schema in schemas
            )
        )
        return [
            (schema, str(item["value"]))
            for schema, tables in zip(schemas, found, strict=True)
            for item in tables.get("result") or []
        ]

    async def table(
        self, database_id: int, dialect: str | None, schema: str, name: str
    ) -> OutlineTable | None:
        try:
            metadata = await self.get(
                f"/api/v1/database/{database_id}/table_metadata/", params={"name": name, "schema": schema}
            )
        except SupersetError as error:
            self.notes.append(f"table {schema}.{name} of database {database_id} not read: {error.code}")
            return None
        columns = [
            OutlineColumn(name=str(column["name"]), type=column.get("type"))
            for column in metadata.get("columns") or []
        ]
        # as many text columns as one statement's rows can answer for whole
        texts = [column for column in columns if is_text_type(column.type, dialect)]
        texts = texts[: self.max_rows // (OUTLINE_VALUES + 1)]
        if texts and dialect is not None:
            values = await self.values(database_id, dialect, schema, name, [column.name for column in texts])
            for column in texts:
                column.values = values.get(column.name)
        return OutlineTable(schema_name=schema, name=name, columns=columns)

    async def values(
        self, database_id: int, dialect: str, schema: str, table: str, columns: list[str]
    ) -> dict[str, list[str] | None]:
        """Each column's distinct values, None for one with more than OUTLINE_VALUES; nothing
        (with a note) when the statement cannot be read as a read or fails."""
        where = f"table {schema}.{table} of database {database_id}"
        sql = values_statement(schema, table, columns, dialect)
        try:
            judged = await sqllab.judge(self.client, self.facts, database_id, sql)
            if not judged.shape.read_only:  # an unvetted dialect: nothing is sent that is not a read
                self.notes.append(f"{where}: values not read ({', '.join(judged.shape.reasons)})")
                return {}
            script = sqllab.script(sql, judged, self.timeout_seconds)
            limit = len(columns) * (OUTLINE_VALUES + 1)

            async def run() -> sqllab.SqlResult:
                return await sqllab.execute(
                    self.client,
                    database_id,
                    script,
                    schema=None,  # the table is named with its schema; Superset writes this one as text
                    limit=limit,
                    timeout_seconds=self.timeout_seconds,
                )

            try:
                result = await self.bounded(run)
            except SupersetError:  # once more: SQL Lab's own store may have been busy with the others
                await asyncio.sleep(_RETRY_PAUSE_SECONDS)
                result = await self.bounded(run)
        except SupersetError as error:
            self.notes.append(f"{where}: values not read ({error.code})")
            return {}
        except SqlNotParsed:
            self.notes.append(f"{where}: values not read (sql_not_parsed)")
            return {}
        held: dict[str, list[str]] = {name: [] for name in columns}
        for row in result.rows:
            # the statement's two columns, by the names the database gave them
            position, text = (row.get(key) for key in result.columns[:2])
            if isinstance(position, int) and 0 <= position < len(columns) and text is not None:
                held[columns[position]].append(str(text))
        return {name: sorted(found) if len(found) <= OUTLINE_VALUES else None for name, found in held.items()}


async def read(
    client: SupersetClient, facts: sqllab.DatabaseFacts, *, max_rows: int, timeout_seconds: float
) -> EnvOutline:
    """The outline of the client's environment as its person sees it."""
    reader = _Reader(client, facts, max_rows, timeout_seconds)
    listing = await reader.get(
        "/api/v1/database/",
        q={
            "columns": ["id", "database_name", "backend"],
            "order_column": "database_name",
            "order_direction": "asc",
            "page_size": OUTLINE_DATABASES,
        },
    )
    if int(listing.get("count") or 0) > OUTLINE_DATABASES:
        reader.notes.append(f"the first {OUTLINE_DATABASES} databases of {listing['count']}")
    databases = await asyncio.gather(*(reader.database(item) for item in listing.get("result") or []))
    return EnvOutline(
        env_id=client.env_id,
        databases=[database for database in databases if database is not None],
        notes=reader.notes,
    )
