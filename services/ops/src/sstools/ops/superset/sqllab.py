"""SQL through SQL Lab, and the catalogue of databases, schemas, tables and columns."""

from typing import Any

from pydantic import BaseModel

from sstools.ops.superset.client import SupersetClient, SupersetRejected


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
    if table is None:
        tables = await client.get(f"/api/v1/database/{database_id}/tables/", q={"schema_name": schema})
        return Catalogue(env_id=client.env_id, tables=[item["value"] for item in tables.get("result", [])])
    metadata = await client.get(
        f"/api/v1/database/{database_id}/table_metadata/", params={"name": table, "schema": schema}
    )
    columns = [
        {"name": column["name"], "type": column.get("type"), "comment": column.get("comment")}
        for column in metadata.get("columns", [])
    ]
    return Catalogue(env_id=client.env_id, columns=columns)
