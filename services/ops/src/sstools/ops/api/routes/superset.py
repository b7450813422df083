"""Operations on one Superset environment: search, health, SQL, exploration, permission audit,
and creating dashboards and datasets. The environment is always in the path, so the guard
applies its policy (prod may need more) before anything reaches Superset."""

from typing import Annotated, Any

from fastapi import APIRouter, Header, HTTPException, Query, status
from pydantic import BaseModel, Field

from sstools.common.sql import SqlNotParsed, classify, format_sql
from sstools.ops.api.auth import Caller
from sstools.ops.api.context import OpsContext
from sstools.ops.api.guard import Guard
from sstools.ops.api.idempotency import once
from sstools.ops.api.routes.identity import EnvironmentChoice
from sstools.ops.store.tasks import Task
from sstools.ops.superset import dashboards, datasets, health, permissions, sqllab

IdempotencyKey = Annotated[str | None, Header(alias="Idempotency-Key", max_length=200)]


class EnvironmentOut(EnvironmentChoice):
    """What the list_environments tool tells: the choice, and where the instance is."""

    url: str


class SqlIn(BaseModel):
    sql: str = Field(min_length=1, max_length=100_000)
    dialect: str = Field(default="postgres", pattern=r"^[a-z0-9]+$")


class SqlFormatted(BaseModel):
    sql: str
    statements: int
    read_only: bool


class ExecuteIn(BaseModel):
    database_id: int = Field(ge=1)
    sql: str = Field(min_length=1, max_length=100_000)
    schema_name: str | None = Field(default=None, max_length=200, alias="schema")
    limit: int = Field(default=100, ge=1)
    # Set by the agent only after the person confirmed this very statement.
    confirmed: bool = False


class ValidationRun(BaseModel):
    task_id: str
    dashboard_id: int | None
    status: str
    valid: bool | None
    errors: int | None
    at: str


class HealthOut(health.HealthSummary):
    last_validations: list[ValidationRun]


class DashboardIn(BaseModel):
    title: str = Field(min_length=1, max_length=500)
    slug: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_-]{1,255}$")
    published: bool = False


class CopyIn(BaseModel):
    title: str = Field(min_length=1, max_length=500)
    duplicate_charts: bool = False


class DatasetIn(BaseModel):
    database_id: int = Field(ge=1)
    table_name: str = Field(min_length=1, max_length=250)
    schema_name: str | None = Field(default=None, max_length=250, alias="schema")


def _validation_run(task: Task) -> ValidationRun:
    result = task.result or {}
    return ValidationRun(
        task_id=str(task.id),
        dashboard_id=task.params.get("dashboard_id"),
        status=task.status.value,
        valid=result.get("valid"),
        errors=result.get("errors"),
        at=task.updated_at.isoformat(),
    )


def router(ctx: OpsContext, guard: Guard) -> APIRouter:
    api = APIRouter(prefix="/api")
    supersets = ctx.supersets

    @api.get("/environments")
    async def list_environments(
        caller: Annotated[Caller, guard.permit("list_environments")],
    ) -> list[EnvironmentOut]:
        """list_environments: where ops can act; credentials never leave."""
        return [
            EnvironmentOut(**EnvironmentChoice.of(env).model_dump(), url=str(env.url))
            for env in supersets.environments.values()
        ]

    @api.post("/sql/format")
    async def format_statement(
        body: SqlIn, caller: Annotated[Caller, guard.permit("superset_format_sql")]
    ) -> SqlFormatted:
        """superset_format_sql: formatted locally, nothing is run."""
        try:
            formatted = format_sql(body.sql, body.dialect)
        except SqlNotParsed as error:
            raise HTTPException(
                status.HTTP_422_UNPROCESSABLE_CONTENT, {"code": "sql_not_parsed", "message": str(error)}
            ) from None
        shape = classify(body.sql, body.dialect)
        return SqlFormatted(sql=formatted, statements=shape.statements, read_only=shape.read_only)

    @api.get("/envs/{env_id}/dashboards")
    async def search_dashboards(
        env_id: str,
        caller: Annotated[Caller, guard.permit("search_dashboards")],
        q: Annotated[str | None, Query(max_length=200)] = None,
        owner: Annotated[str | None, Query(max_length=200)] = None,
        tag: Annotated[str | None, Query(max_length=200)] = None,
        page: Annotated[int, Query(ge=0, le=10_000)] = 0,
        page_size: Annotated[int, Query(ge=1, le=100)] = 25,
    ) -> dashboards.DashboardPage:
        """search_dashboards: by title or slug, owner, tag; paged."""
        client = supersets.client(env_id)
        return await dashboards.search(client, text=q, owner=owner, tag=tag, page=page, page_size=page_size)

    @api.get("/envs/{env_id}/health")
    async def health_summary(
        env_id: str,
        caller: Annotated[Caller, guard.permit("get_health_summary")],
        dashboard_id: Annotated[list[int] | None, Query()] = None,
    ) -> HealthOut:
        """get_health_summary: charts whose query fails, the dashboards holding them, and the
        latest validation runs."""
        summary = await health.summary(supersets.client(env_id), dashboard_id)
        runs = await ctx.tasks.latest("llm_validation", env_id, limit=10)
        return HealthOut(**summary.model_dump(), last_validations=[_validation_run(task) for task in runs])

    @api.post("/envs/{env_id}/sql")
    async def execute_sql(
        env_id: str,
        body: ExecuteIn,
        caller: Annotated[Caller, guard.permit("superset_execute_sql")],
        idempotency_key: IdempotencyKey = None,
    ) -> Any:
        """superset_execute_sql: one read-only statement for analysts; anything else only for
        the roles the policy names, and only once the person confirmed it."""
        shape = classify(body.sql)
        if not shape.read_only:
            await guard.check(caller, "superset_execute_sql", env_id, mutating_sql=True)
            if not body.confirmed:
                raise HTTPException(
                    status.HTTP_409_CONFLICT,
                    {
                        "code": "confirmation_required",
                        "message": "this statement changes data; confirm it first",
                    },
                )
        limit = min(body.limit, ctx.sql.max_rows)
        client = supersets.client(env_id)

        async def run() -> tuple[int, Any]:
            result = await sqllab.execute(
                client,
                body.database_id,
                body.sql,
                schema=body.schema_name,
                limit=limit,
                timeout_seconds=ctx.sql.timeout_seconds,
            )
            return 200, result

        if shape.read_only:
            return (await run())[1]
        return await once(ctx.idempotency, caller, f"sql:{env_id}", idempotency_key, body.model_dump(), run)

    @api.get("/envs/{env_id}/databases")
    async def explore_database(
        env_id: str,
        caller: Annotated[Caller, guard.permit("superset_explore_database")],
        database_id: Annotated[int | None, Query(ge=1)] = None,
        schema: Annotated[str | None, Query(max_length=250)] = None,
        table: Annotated[str | None, Query(max_length=250)] = None,
    ) -> sqllab.Catalogue:
        """superset_explore_database: databases; or a database's schemas; or a schema's tables;
        or a table's columns."""
        if (schema is not None and database_id is None) or (table is not None and schema is None):
            raise HTTPException(
                status.HTTP_422_UNPROCESSABLE_CONTENT,
                {"code": "invalid_request", "message": "a schema needs database_id; a table needs a schema"},
            )
        return await sqllab.explore(supersets.client(env_id), database_id, schema, table)

    @api.get("/envs/{env_id}/permissions")
    async def audit_permissions(
        env_id: str,
        caller: Annotated[Caller, guard.permit("superset_audit_permissions")],
        dashboard_id: Annotated[int | None, Query(ge=1)] = None,
        dataset_id: Annotated[int | None, Query(ge=1)] = None,
    ) -> permissions.AccessReport:
        """superset_audit_permissions: who sees a dashboard or a dataset, through which roles."""
        if (dashboard_id is None) == (dataset_id is None):
            raise HTTPException(
                status.HTTP_422_UNPROCESSABLE_CONTENT,
                {"code": "invalid_request", "message": "give exactly one of dashboard_id or dataset_id"},
            )
        client = supersets.client(env_id)
        if dashboard_id is not None:
            return await permissions.dashboard_access(client, dashboard_id)
        assert dataset_id is not None
        return await permissions.dataset_access(client, dataset_id)

    @api.post("/envs/{env_id}/dashboards", status_code=status.HTTP_201_CREATED)
    async def create_dashboard(
        env_id: str,
        body: DashboardIn,
        caller: Annotated[Caller, guard.permit("superset_create_dashboard")],
        idempotency_key: IdempotencyKey = None,
    ) -> Any:
        """superset_create_dashboard."""
        client = supersets.client(env_id)

        async def run() -> tuple[int, Any]:
            return 201, await dashboards.create(client, body.title, body.slug, body.published)

        return await once(ctx.idempotency, caller, f"create_dashboard:{env_id}", idempotency_key, body, run)

    @api.post("/envs/{env_id}/dashboards/{dashboard_id}/copy", status_code=status.HTTP_201_CREATED)
    async def copy_dashboard(
        env_id: str,
        dashboard_id: int,
        body: CopyIn,
        caller: Annotated[Caller, guard.permit("superset_copy_dashboard")],
        idempotency_key: IdempotencyKey = None,
    ) -> Any:
        """superset_copy_dashboard: a new dashboard with the original's layout."""
        client = supersets.client(env_id)

        async def run() -> tuple[int, Any]:
            return 201, await dashboards.copy(client, dashboard_id, body.title, body.duplicate_charts)

        request = {"dashboard_id": dashboard_id, **body.model_dump()}
        return await once(ctx.idempotency, caller, f"copy_dashboard:{env_id}", idempotency_key, request, run)

    @api.post("/envs/{env_id}/datasets", status_code=status.HTTP_201_CREATED)
    async def create_dataset(
        env_id: str,
        body: DatasetIn,
        caller: Annotated[Caller, guard.permit("superset_create_dataset")],
        idempotency_key: IdempotencyKey = None,
    ) -> Any:
        """superset_create_dataset: a physical table registered as a dataset."""
        client = supersets.client(env_id)

        async def run() -> tuple[int, Any]:
            return 201, await datasets.create(client, body.database_id, body.table_name, body.schema_name)

        return await once(ctx.idempotency, caller, f"create_dataset:{env_id}", idempotency_key, body, run)

    return api
