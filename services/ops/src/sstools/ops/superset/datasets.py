"""Datasets: a physical table registered with one of the environment's databases."""

from pydantic import BaseModel

from sstools.ops.superset.client import SupersetClient


class DatasetOut(BaseModel):
    env_id: str
    id: int
    table_name: str
    schema_name: str | None
    database_id: int
    columns: list[str]


async def create(client: SupersetClient, database_id: int, table: str, schema: str | None) -> DatasetOut:
    body: dict[str, object] = {"database": database_id, "table_name": table}
    if schema:
        body["schema"] = schema
    created = await client.post("/api/v1/dataset/", body)
    data = created.get("data") or {}
    return DatasetOut(
        env_id=client.env_id,
        id=int(created["id"]),
        table_name=table,
        schema_name=schema,
        database_id=database_id,
        columns=[column["column_name"] for column in data.get("columns", [])],
    )
