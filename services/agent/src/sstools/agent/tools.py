"""The 24 tools the model may call: native LangChain tools whose names and descriptions come
from the catalogue, whose arguments are Pydantic models, and which act through ops.

Each tool's body is one ops call on behalf of the user in the run's config (``__user_token``),
with the tool call id as the Idempotency-Key; a read tool asks again (``tool_retry``) when ops
or Superset answered with a passing failure. What ops answers is the tool's result, as JSON;
what ops refuses raises :class:`OpsError`, which the graph turns into a ``tool_error``.
"""

import asyncio
import json
from collections.abc import Callable
from typing import Annotated, Any

from langchain_core.callbacks.manager import adispatch_custom_event
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, InjectedToolArg, InjectedToolCallId, StructuredTool
from pydantic import BaseModel, Field

from sstools.agent.clients.ops import OpsCall, OpsClient, OpsError
from sstools.common.catalogue import TOOLS, Tier, ToolSpec
from sstools.common.policy import decide_call

ENV = Field(description="Target environment id, e.g. dev, staging, prod.")
USER_TOKEN = "__user_token"  # in the run's config; "__" keeps it out of checkpoint metadata
RETRY_ATTEMPTS = 3


class ToolArgs(BaseModel):
    # Filled by LangChain from the tool call; never shown to the model.
    tool_call_id: Annotated[str, InjectedToolCallId]


class NoArgs(ToolArgs):
    pass


class EnvArgs(ToolArgs):
    env_id: str = ENV


class SearchArgs(EnvArgs):
    query: str | None = Field(default=None, description="Words of the title or slug.")
    owner: str | None = Field(default=None, description="Owner's username or name.")
    tag: str | None = Field(default=None, description="A tag the dashboards carry.")
    page: int = Field(default=0, ge=0)
    page_size: int = Field(default=25, ge=1, le=100)


class HealthArgs(EnvArgs):
    dashboard_ids: list[int] | None = Field(default=None, description="Only these dashboards (all if empty).")


class TaskArgs(ToolArgs):
    task_id: str = Field(description="The task id ops returned.")


class BranchArgs(ToolArgs):
    name: str = Field(description="New branch name.")
    start: str = Field(default="main", description="Branch to start from.")


class CommitArgs(EnvArgs):
    branch: str = Field(description="Branch to commit on.")
    dashboard_ids: list[int] = Field(description="Dashboards whose export is committed.")
    message: str = Field(description="Commit message.")


class DeployArgs(EnvArgs):
    dashboard_id: int = Field(description="The dashboard's id in the source environment.")
    source_env: str = Field(default="dev", description="Where the dashboard comes from.")


class MigrationArgs(EnvArgs):
    source_env: str = Field(description="Where the dashboards come from.")
    dashboard_ids: list[int] = Field(description="Dashboards to migrate.")
    database_mapping: dict[str, str] = Field(
        default_factory=dict, description="Source → target database names."
    )


class DashboardArgs(EnvArgs):
    dashboard_id: int = Field(description="Dashboard id.")


class MaintenanceListArgs(ToolArgs):
    env_id: str | None = Field(default=None, description="Only this environment.")


class MaintenanceArgs(EnvArgs):
    reason: str = Field(description="Why, shown to whoever is refused meanwhile.")


class SqlArgs(EnvArgs):
    database_id: int = Field(description="Superset database id.")
    sql: str = Field(description="One SQL statement.")
    schema_name: str | None = Field(default=None, alias="schema", description="Schema.")
    limit: int = Field(default=100, ge=1, le=10_000, description="Most rows returned.")
    # Set by the confirmation gate alone, once the person confirmed this call; hidden from the model.
    confirmed: Annotated[bool, InjectedToolArg] = False


class ExploreArgs(EnvArgs):
    database_id: int | None = Field(default=None, description="Database to look into (none: list databases).")
    schema_name: str | None = Field(default=None, alias="schema", description="Schema to list tables of.")
    table: str | None = Field(default=None, description="Table to list columns of.")


class AuditArgs(EnvArgs):
    dashboard_id: int | None = Field(default=None, description="Dashboard to audit.")
    dataset_id: int | None = Field(default=None, description="Dataset to audit.")


class CreateDashboardArgs(EnvArgs):
    title: str = Field(description="Dashboard title.")
    slug: str | None = Field(default=None, description="URL slug.")
    published: bool = False


class CopyArgs(DashboardArgs):
    title: str = Field(description="Title of the copy.")


class DatasetArgs(EnvArgs):
    database_id: int = Field(description="Superset database id.")
    table_name: str = Field(description="Table to register.")
    schema_name: str | None = Field(default=None, alias="schema", description="Schema.")


class FormatArgs(ToolArgs):
    sql: str = Field(description="SQL to format.")
    dialect: str = Field(default="postgres", description="SQL dialect.")


def _drop_none(values: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in values.items() if value is not None}


Route = Callable[[Any], OpsCall]

# Tool → (arguments, how its ops call is made). The paths are ops' routes.
ROUTES: dict[str, tuple[type[ToolArgs], Route]] = {
    "search_dashboards": (
        SearchArgs,
        lambda a: OpsCall(
            "GET",
            f"/api/envs/{a.env_id}/dashboards",
            _drop_none(
                {"q": a.query, "owner": a.owner, "tag": a.tag, "page": a.page, "page_size": a.page_size}
            ),
        ),
    ),
    "get_health_summary": (
        HealthArgs,
        lambda a: OpsCall("GET", f"/api/envs/{a.env_id}/health", {"dashboard_id": a.dashboard_ids or []}),
    ),
    "list_environments": (NoArgs, lambda a: OpsCall("GET", "/api/environments")),
    "get_task_status": (TaskArgs, lambda a: OpsCall("GET", f"/api/tasks/{a.task_id}")),
    "list_llm_providers": (NoArgs, lambda a: OpsCall("GET", "/api/llm/providers")),
    "get_llm_status": (NoArgs, lambda a: OpsCall("GET", "/api/llm/status")),
    "create_branch": (
        BranchArgs,
        lambda a: OpsCall("POST", "/api/git/branches", body={"name": a.name, "start": a.start}),
    ),
    "commit_changes": (
        CommitArgs,
        lambda a: OpsCall(
            "POST",
            "/api/git/commits",
            body={
                "branch": a.branch,
                "env_id": a.env_id,
                "dashboard_ids": a.dashboard_ids,
                "message": a.message,
            },
        ),
    ),
    "deploy_dashboard": (
        DeployArgs,
        lambda a: OpsCall(
            "POST",
            f"/api/envs/{a.env_id}/deployments",
            body={"dashboard_id": a.dashboard_id, "source_env": a.source_env},
        ),
    ),
    "execute_migration": (
        MigrationArgs,
        lambda a: OpsCall(
            "POST",
            f"/api/envs/{a.env_id}/migrations",
            body={
                "source_env": a.source_env,
                "dashboard_ids": a.dashboard_ids,
                "database_mapping": a.database_mapping,
            },
        ),
    ),
    "run_backup": (EnvArgs, lambda a: OpsCall("POST", f"/api/envs/{a.env_id}/backups")),
    "run_llm_validation": (
        DashboardArgs,
        lambda a: OpsCall("POST", f"/api/envs/{a.env_id}/dashboards/{a.dashboard_id}/validation"),
    ),
    "run_llm_documentation": (
        DashboardArgs,
        lambda a: OpsCall("POST", f"/api/envs/{a.env_id}/dashboards/{a.dashboard_id}/documentation"),
    ),
    "list_maintenance_events": (
        MaintenanceListArgs,
        lambda a: OpsCall("GET", "/api/maintenance", _drop_none({"env_id": a.env_id})),
    ),
    "start_maintenance": (
        MaintenanceArgs,
        lambda a: OpsCall("POST", f"/api/envs/{a.env_id}/maintenance", body={"reason": a.reason}),
    ),
    "end_maintenance": (EnvArgs, lambda a: OpsCall("POST", f"/api/envs/{a.env_id}/maintenance/end")),
    "superset_execute_sql": (
        SqlArgs,
        lambda a: OpsCall(
            "POST",
            f"/api/envs/{a.env_id}/sql",
            body={
                "database_id": a.database_id,
                "sql": a.sql,
                "schema": a.schema_name,
                "limit": a.limit,
                "confirmed": a.confirmed,
            },
        ),
    ),
    "superset_explore_database": (
        ExploreArgs,
        lambda a: OpsCall(
            "GET",
            f"/api/envs/{a.env_id}/databases",
            _drop_none({"database_id": a.database_id, "schema": a.schema_name, "table": a.table}),
        ),
    ),
    "superset_audit_permissions": (
        AuditArgs,
        lambda a: OpsCall(
            "GET",
            f"/api/envs/{a.env_id}/permissions",
            _drop_none({"dashboard_id": a.dashboard_id, "dataset_id": a.dataset_id}),
        ),
    ),
    "superset_create_dashboard": (
        CreateDashboardArgs,
        lambda a: OpsCall(
            "POST",
            f"/api/envs/{a.env_id}/dashboards",
            body=_drop_none({"title": a.title, "slug": a.slug, "published": a.published}),
        ),
    ),
    "superset_copy_dashboard": (
        CopyArgs,
        lambda a: OpsCall(
            "POST", f"/api/envs/{a.env_id}/dashboards/{a.dashboard_id}/copy", body={"title": a.title}
        ),
    ),
    "superset_create_dataset": (
        DatasetArgs,
        lambda a: OpsCall(
            "POST",
            f"/api/envs/{a.env_id}/datasets",
            body={"database_id": a.database_id, "table_name": a.table_name, "schema": a.schema_name},
        ),
    ),
    "superset_format_sql": (
        FormatArgs,
        lambda a: OpsCall("POST", "/api/sql/format", body={"sql": a.sql, "dialect": a.dialect}),
    ),
}


def capabilities() -> str:
    """show_capabilities answers from the catalogue itself, without ops."""
    lines = [f"- {spec.name}: {spec.description_en} / {spec.description_ru}" for spec in TOOLS]
    return "\n".join(lines)


def _unfinished_task(result: Any) -> str | None:
    if isinstance(result, dict) and {"id", "kind", "status"} <= set(result):
        return str(result["id"]) if result["status"] in ("queued", "running") else None
    return None


def _transient(error: OpsError) -> bool:
    return error.status in (502, 503, 504) and error.code != "superset_auth_failed"


def _ops_tool(
    spec: ToolSpec, ops: OpsClient, task_wait_seconds: float, retry_backoff_seconds: float
) -> BaseTool:
    schema, route = ROUTES[spec.name]

    async def run(config: RunnableConfig, **values: Any) -> str:
        arguments = schema.model_validate(values)
        user_token = str((config.get("configurable") or {})[USER_TOKEN])
        # A read may be asked again when ops or Superset stumbled; a write is never re-sent here
        # (ops' idempotency key would answer a replay, but a timeout's fate is not ours to guess).
        attempts = RETRY_ATTEMPTS if decide_call(spec.name, values).tier is Tier.READ else 1
        for attempt in range(1, attempts + 1):
            try:
                result = await ops.call(route(arguments), user_token, idempotency_key=arguments.tool_call_id)
                break
            except OpsError as error:
                if attempt == attempts or not _transient(error):
                    raise
                retry = {
                    "type": "tool_retry",
                    "tool": spec.name,
                    "attempt": attempt + 1,
                    "max_attempts": attempts,
                    "error": error.code,
                }
                await adispatch_custom_event("tool_retry", retry, config=config)
                await asyncio.sleep(retry_backoff_seconds * 2 ** (attempt - 1))
        # A long operation is an ops task: wait a little for its end, so a quick one reports
        # its result; a slow one is reported as started, with its id.
        deadline = asyncio.get_running_loop().time() + task_wait_seconds
        while (task_id := _unfinished_task(result)) and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.5)
            result = await ops.call(OpsCall("GET", f"/api/tasks/{task_id}"), user_token)
        return json.dumps(result, ensure_ascii=False)

    return StructuredTool.from_function(
        coroutine=run,
        name=spec.name,
        description=f"{spec.description_en} {spec.description_ru}",
        args_schema=schema,
    )


def build_tools(
    ops: OpsClient, task_wait_seconds: float, retry_backoff_seconds: float = 0.5
) -> dict[str, BaseTool]:
    tools: dict[str, BaseTool] = {}
    for spec in TOOLS:
        if spec.name == "show_capabilities":

            async def show(config: RunnableConfig, **values: Any) -> str:
                return capabilities()

            tools[spec.name] = StructuredTool.from_function(
                coroutine=show, name=spec.name, description=spec.description_en, args_schema=NoArgs
            )
        else:
            tools[spec.name] = _ops_tool(spec, ops, task_wait_seconds, retry_backoff_seconds)
    return tools
