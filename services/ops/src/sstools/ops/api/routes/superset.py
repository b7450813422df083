"""Operations on one Superset environment: search, health, SQL, exploration and the outline,
permission audit, and creating dashboards and datasets. The environment is always in the path,
so the guard applies its policy (prod may need more) before anything reaches Superset."""

import asyncio
from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Query, Request, status
from fastapi.encoders import jsonable_encoder
from fastapi.responses import JSONResponse
from pydantic import BaseModel

from sstools.common.catalogue import ENDPOINTS, Role
from sstools.common.outline import OUTLINE, EnvOutline
from sstools.common.sql import SqlNotParsed, classify, format_sql
from sstools.common.tool_args import (
    DASHBOARD_TITLES,
    FORCED_HEALTH_ROLE,
    SQL_SHAPE,
    AuditQuery,
    CopyBody,
    DashboardBody,
    DashboardSearch,
    DashboardTitlesQuery,
    DatasetBody,
    EnvId,
    ExploreQuery,
    FormatBody,
    HealthQuery,
    ObjectId,
    SqlBody,
    SqlStatement,
)
from sstools.ops import jobs
from sstools.ops.api.auth import Caller
from sstools.ops.api.context import OpsContext
from sstools.ops.api.guard import Guard
from sstools.ops.api.idempotency import once
from sstools.ops.api.routes.identity import EnvironmentNamed
from sstools.ops.api.shapes import IdempotencyKey, TaskOut
from sstools.ops.superset import dashboards, datasets, outline, permissions, sqllab


class EnvironmentOut(EnvironmentNamed):
    """What the list_environments tool tells: the environment, and where the instance is (to
    those who see internal addresses)."""

    url: str | None


class SqlFormatted(BaseModel):
    sql: str
    statements: int
    read_only: bool


class DashboardTitlesOut(BaseModel):
    env_id: str
    titles: dict[int, str]


class SqlShapeOut(BaseModel):
    """How ops judges a statement for one database: the judgement execute_sql acts on."""

    env_id: str
    database_id: int
    backend: str | None
    dialect: str | None
    read_only: bool
    statements: int
    kinds: list[str]
    reasons: list[str]


def router(ctx: OpsContext, guard: Guard) -> APIRouter:
    api = APIRouter()
    supersets = ctx.supersets
    facts = sqllab.DatabaseFacts()

    async def started(caller: Caller, kind: str, env_id: str, params: dict[str, Any]) -> tuple[int, Any]:
        """A slow read as a task from the start, run here at once: its answer if it ends within
        the wait (or the error it failed with, raised), else 202 and the task, which goes on and
        which a restart of ops does not lose."""
        task, job = await ctx.worker.start_here(kind, env_id, params, caller.username)
        await asyncio.wait({job}, timeout=ctx.read_wait_seconds)
        if job.done():
            return status.HTTP_200_OK, job.result()
        return status.HTTP_202_ACCEPTED, TaskOut.of(task)  # running: the page and agent follow it

    async def followed(caller: Caller, kind: str, env_id: str, params: dict[str, Any]) -> JSONResponse:
        code, answer = await started(caller, kind, env_id, params)
        return JSONResponse(jsonable_encoder(answer), status_code=code)

    @api.get(ENDPOINTS["list_environments"].path)
    async def list_environments(
        caller: Annotated[Caller, guard.permit("list_environments")],
    ) -> list[EnvironmentOut]:
        """list_environments: where ops can act; credentials never leave."""
        return [
            EnvironmentOut(
                **EnvironmentNamed.fields(env), url=str(env.url) if caller.sees_addresses else None
            )
            for env in supersets.environments.values()
        ]

    @api.post(ENDPOINTS["superset_format_sql"].path)
    async def format_statement(
        body: FormatBody, caller: Annotated[Caller, guard.permit("superset_format_sql")]
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

    @api.get(ENDPOINTS["search_dashboards"].path)
    async def search_dashboards(
        env_id: EnvId,
        search: Annotated[DashboardSearch, Query()],
        caller: Annotated[Caller, guard.permit("search_dashboards")],
    ) -> dashboards.DashboardPage:
        """search_dashboards: by title or slug, owner, tag; paged."""
        client = supersets.as_person(env_id, caller.username)
        return await dashboards.search(
            client,
            text=search.query,
            owner=search.owner,
            tag=search.tag,
            page=search.page,
            page_size=search.page_size,
        )

    @api.get(DASHBOARD_TITLES.path)
    async def dashboard_titles(
        env_id: EnvId,
        named: Annotated[DashboardTitlesQuery, Query()],
        caller: Annotated[Caller, guard.permit("search_dashboards", audited_as="dashboard_titles")],
    ) -> DashboardTitlesOut:
        """The titles of some dashboards by id: what a confirmation card names its object by."""
        found = await dashboards.titles(supersets.as_person(env_id, caller.username), named.dashboard_ids)
        return DashboardTitlesOut(env_id=env_id, titles=found)

    @api.get(ENDPOINTS["get_health_summary"].path)
    async def health_summary(
        env_id: EnvId,
        only: Annotated[HealthQuery, Query()],
        caller: Annotated[Caller, guard.permit("get_health_summary")],
    ) -> JSONResponse:
        """get_health_summary: charts whose query fails, the dashboards holding them, and the
        latest validation runs (a HealthReport; or, past the wait, its task). Past Superset's
        cache only for an operator or admin."""
        if only.force and not caller.role.at_least(Role(FORCED_HEALTH_ROLE)):
            raise HTTPException(
                status.HTTP_403_FORBIDDEN,
                {
                    "code": "permission_denied",
                    "message": f"only the {FORCED_HEALTH_ROLE} role and above may re-run every chart's query",
                    "required_role": FORCED_HEALTH_ROLE,
                    "user_role": caller.role.value,
                },
            )
        checked = {"dashboard_ids": only.dashboard_ids, "force": only.force}
        return await followed(caller, jobs.HEALTH, env_id, checked)

    @api.post(SQL_SHAPE.path)
    async def sql_shape(
        env_id: EnvId,
        body: SqlStatement,
        caller: Annotated[Caller, guard.permit("superset_execute_sql", audited_as="sql_shape")],
    ) -> SqlShapeOut:
        """Whether a statement only reads, judged in its database's dialect: the agent asks
        before it decides on a card and a role, and gets the very judgement execute_sql uses."""
        judged = await sqllab.judge(
            supersets.as_person(env_id, caller.username), facts, body.database_id, body.sql, body.schema_name
        )
        return SqlShapeOut(
            env_id=env_id,
            database_id=body.database_id,
            backend=judged.backend,
            dialect=judged.dialect,
            read_only=judged.shape.read_only,
            statements=judged.shape.statements,
            kinds=judged.shape.kinds,
            reasons=judged.shape.reasons,
        )

    @api.post(ENDPOINTS["superset_execute_sql"].path)
    async def execute_sql(
        request: Request,
        env_id: EnvId,
        body: SqlBody,
        caller: Annotated[Caller, guard.permit("superset_execute_sql")],
        idempotency_key: IdempotencyKey = None,
    ) -> Any:
        """superset_execute_sql: one read-only statement for analysts; anything else only for
        the roles the policy names, and only once the person confirmed it. SQL Lab is sent the
        statement as it was judged, rendered again in the database's dialect. Its rows, or —
        when it runs longer than the wait — its task (202), whose result they will be."""
        client = supersets.as_person(env_id, caller.username)
        if body.schema_name is not None:  # Superset writes the schema into SQL of its own
            await sqllab.known_schema(client, body.database_id, body.schema_name)
        judged = await sqllab.judge(client, facts, body.database_id, body.sql, body.schema_name)
        read_only = judged.shape.read_only
        if not read_only:
            await guard.admit(request, caller, "superset_execute_sql", env_id, mutating_sql=True)
        try:
            text = sqllab.script(body.sql, judged, ctx.sql.timeout_seconds)
        except SqlNotParsed as error:
            raise HTTPException(
                status.HTTP_422_UNPROCESSABLE_CONTENT, {"code": "sql_not_parsed", "message": str(error)}
            ) from None
        statement = {
            "database_id": body.database_id,
            "script": text,
            "schema": body.schema_name,
            "limit": min(body.limit, ctx.sql.max_rows),
            "read_only": read_only,
        }

        if read_only:
            return await followed(caller, jobs.SQL, env_id, statement)

        async def run() -> tuple[int, Any]:
            return await started(caller, jobs.SQL, env_id, statement)

        return await once(ctx.idempotency, caller, f"sql:{env_id}", idempotency_key, body.model_dump(), run)

    @api.get(ENDPOINTS["superset_explore_database"].path)
    async def explore_database(
        env_id: EnvId,
        where: Annotated[ExploreQuery, Query()],
        caller: Annotated[Caller, guard.permit("superset_explore_database")],
    ) -> sqllab.Catalogue:
        """superset_explore_database: databases; or a database's schemas; or a schema's tables;
        or a table's columns."""
        database_id, schema, table = where.database_id, where.schema_name, where.table
        if (schema is not None and database_id is None) or (table is not None and schema is None):
            raise HTTPException(
                status.HTTP_422_UNPROCESSABLE_CONTENT,
                {"code": "invalid_request", "message": "a schema needs database_id; a table needs a schema"},
            )
        return await sqllab.explore(supersets.as_person(env_id, caller.username), database_id, schema, table)

    @api.get(OUTLINE.path)
    async def env_outline(
        env_id: EnvId,
        caller: Annotated[
            Caller, guard.permit("superset_explore_database", audited_as="env_outline", heavy=True)
        ],
    ) -> EnvOutline:
        """The environment's databases, tables, columns and few-valued text columns' values, as
        the person sees them: exploration's policy, and one heavy read for all of it."""
        client = supersets.as_person(env_id, caller.username)
        return await outline.read(
            client, facts, max_rows=ctx.sql.max_rows, timeout_seconds=ctx.sql.timeout_seconds
        )

    @api.get(ENDPOINTS["superset_audit_permissions"].path)
    async def audit_permissions(
        env_id: EnvId,
        subject: Annotated[AuditQuery, Query()],
        caller: Annotated[Caller, guard.permit("superset_audit_permissions")],
    ) -> permissions.AccessReport:
        """superset_audit_permissions: who sees a dashboard or a dataset, through which roles."""
        dashboard_id, dataset_id = subject.dashboard_id, subject.dataset_id
        if sum(getattr(subject, name) is not None for name in AuditQuery.ONE_OF) != 1:
            raise HTTPException(
                status.HTTP_422_UNPROCESSABLE_CONTENT,
                {
                    "code": "invalid_request",
                    "message": f"give exactly one of {' or '.join(AuditQuery.ONE_OF)}",
                },
            )
        client = supersets.as_person(env_id, caller.username)
        if dashboard_id is not None:
            return await permissions.dashboard_access(client, dashboard_id)
        assert dataset_id is not None
        return await permissions.dataset_access(client, dataset_id)

    @api.post(ENDPOINTS["superset_create_dashboard"].path, status_code=status.HTTP_201_CREATED)
    async def create_dashboard(
        env_id: EnvId,
        body: DashboardBody,
        caller: Annotated[Caller, guard.permit("superset_create_dashboard")],
        idempotency_key: IdempotencyKey = None,
    ) -> Any:
        """superset_create_dashboard."""
        client = supersets.as_person(env_id, caller.username)

        async def run() -> tuple[int, Any]:
            return 201, await dashboards.create(client, body.title, body.slug, body.published)

        return await once(ctx.idempotency, caller, f"create_dashboard:{env_id}", idempotency_key, body, run)

    @api.post(ENDPOINTS["superset_copy_dashboard"].path, status_code=status.HTTP_201_CREATED)
    async def copy_dashboard(
        env_id: EnvId,
        dashboard_id: ObjectId,
        body: CopyBody,
        caller: Annotated[Caller, guard.permit("superset_copy_dashboard")],
        idempotency_key: IdempotencyKey = None,
    ) -> Any:
        """superset_copy_dashboard: a new dashboard with the original's layout."""
        client = supersets.as_person(env_id, caller.username)

        async def run() -> tuple[int, Any]:
            return 201, await dashboards.copy(client, dashboard_id, body.title, body.duplicate_charts)

        request = {"dashboard_id": dashboard_id, **body.model_dump()}
        return await once(ctx.idempotency, caller, f"copy_dashboard:{env_id}", idempotency_key, request, run)

    @api.post(ENDPOINTS["superset_create_dataset"].path, status_code=status.HTTP_201_CREATED)
    async def create_dataset(
        env_id: EnvId,
        body: DatasetBody,
        caller: Annotated[Caller, guard.permit("superset_create_dataset")],
        idempotency_key: IdempotencyKey = None,
    ) -> Any:
        """superset_create_dataset: a physical table registered as a dataset."""
        client = supersets.as_person(env_id, caller.username)
        if body.schema_name is not None:
            await sqllab.known_schema(client, body.database_id, body.schema_name)
            await sqllab.known_table(client, body.database_id, body.schema_name, body.table_name)

        async def run() -> tuple[int, Any]:
            return 201, await datasets.create(client, body.database_id, body.table_name, body.schema_name)

        return await once(ctx.idempotency, caller, f"create_dataset:{env_id}", idempotency_key, body, run)

    return api
