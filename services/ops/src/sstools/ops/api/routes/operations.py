"""Long operations, run as tasks: deploy, migration, backup and restore, LLM validation and
documentation; their status; maintenance windows; LLM providers; the exports repository."""

import uuid
from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Query, status
from pydantic import BaseModel

from sstools.common.catalogue import ENDPOINTS, Role
from sstools.common.tool_args import (
    BranchBody,
    CommitBody,
    DeployBody,
    EnvId,
    MaintenanceBody,
    MaintenanceQuery,
    MigrationBody,
    ObjectId,
)
from sstools.ops import jobs
from sstools.ops.api.auth import Caller
from sstools.ops.api.context import OpsContext
from sstools.ops.api.guard import Guard
from sstools.ops.api.idempotency import once
from sstools.ops.api.shapes import IdempotencyKey, TaskOut
from sstools.ops.gitrepo import export_files
from sstools.ops.llm import Provider, ProviderStatus
from sstools.ops.store.maintenance import AlreadyUnderMaintenance, Window
from sstools.ops.superset import dashboards


class RestoreIn(BaseModel):
    backup_id: uuid.UUID


class BackupOut(BaseModel):
    id: str
    env_id: str
    file_name: str
    dashboards: int
    size_bytes: int
    created_by: str
    created_at: datetime


class WindowOut(BaseModel):
    id: str
    env_id: str
    reason: str
    started_by: str
    started_at: datetime
    ended_by: str | None
    ended_at: datetime | None
    active: bool

    @classmethod
    def of(cls, window: Window) -> "WindowOut":
        return cls(
            id=str(window.id),
            env_id=window.env_id,
            reason=window.reason,
            started_by=window.started_by,
            started_at=window.started_at,
            ended_by=window.ended_by,
            ended_at=window.ended_at,
            active=window.ended_at is None,
        )


# Not a tool: the page follows a task the chat started, with the person's own token alone.
MY_TASK_PATH = "/api/my/tasks/{task_id}"


def router(ctx: OpsContext, guard: Guard, user_only: object) -> APIRouter:
    api = APIRouter()

    async def visible(task_id: uuid.UUID, caller: Caller) -> TaskOut:
        """One's own tasks; operators and admins see everyone's operations — not the result of
        another person's read (rows, a report: what Superset let that person see)."""
        task = await ctx.tasks.get(task_id)
        others = task is not None and task.created_by != caller.username
        if task is None or (others and (task.kind in jobs.READS or not caller.role.at_least(Role.OPERATOR))):
            raise HTTPException(
                status.HTTP_404_NOT_FOUND, {"code": "task_not_found", "task_id": str(task_id)}
            )
        return TaskOut.of(task)

    async def submit(caller: Caller, kind: str, env_id: str, params: dict[str, Any]) -> tuple[int, TaskOut]:
        task = await ctx.tasks.submit(kind, env_id, params, caller.username)
        ctx.worker.wake()
        return status.HTTP_202_ACCEPTED, TaskOut.of(task)

    @api.get(ENDPOINTS["get_task_status"].path)
    async def get_task_status(
        task_id: uuid.UUID, caller: Annotated[Caller, guard.permit("get_task_status")]
    ) -> TaskOut:
        """get_task_status: one's own tasks; operators and admins see everyone's."""
        return await visible(task_id, caller)

    @api.get(MY_TASK_PATH)
    async def my_task(task_id: uuid.UUID, caller: Annotated[Caller, user_only]) -> TaskOut:
        """The same, asked by the page with the person's token (a chat's task, followed to its end)."""
        return await visible(task_id, caller)

    @api.post(ENDPOINTS["deploy_dashboard"].path, status_code=status.HTTP_202_ACCEPTED)
    async def deploy_dashboard(
        env_id: EnvId,
        body: DeployBody,
        caller: Annotated[Caller, guard.permit("deploy_dashboard")],
        idempotency_key: IdempotencyKey = None,
    ) -> Any:
        """deploy_dashboard: import one dashboard from ``source_env`` into this environment,
        backing it up first. Answers with the task."""

        async def run() -> tuple[int, Any]:
            await ctx.deployments.ensure_open(env_id)
            ctx.supersets.environment(env_id)
            await dashboards.get(ctx.supersets.as_person(body.source_env, caller.username), body.dashboard_id)
            return await submit(caller, jobs.DEPLOY, env_id, body.model_dump())

        return await once(ctx.idempotency, caller, f"deploy:{env_id}", idempotency_key, body, run)

    @api.post(ENDPOINTS["execute_migration"].path, status_code=status.HTTP_202_ACCEPTED)
    async def execute_migration(
        env_id: EnvId,
        body: MigrationBody,
        caller: Annotated[Caller, guard.permit("execute_migration")],
        idempotency_key: IdempotencyKey = None,
    ) -> Any:
        """execute_migration: dashboards from ``source_env`` into this environment, with their
        databases mapped onto this environment's."""

        async def run() -> tuple[int, Any]:
            await ctx.deployments.ensure_open(env_id)
            ctx.supersets.environment(env_id)
            source = ctx.supersets.as_person(body.source_env, caller.username)
            for dashboard_id in body.dashboard_ids:  # as the person, before a backup or a task exists
                await dashboards.get(source, dashboard_id)
            return await submit(caller, jobs.MIGRATION, env_id, body.model_dump())

        return await once(ctx.idempotency, caller, f"migration:{env_id}", idempotency_key, body, run)

    @api.post(ENDPOINTS["run_backup"].path, status_code=status.HTTP_202_ACCEPTED)
    async def run_backup(
        env_id: EnvId,
        caller: Annotated[Caller, guard.permit("run_backup")],
        idempotency_key: IdempotencyKey = None,
    ) -> Any:
        """run_backup: every dashboard of the environment into a timestamped zip."""

        async def run() -> tuple[int, Any]:
            ctx.supersets.environment(env_id)
            return await submit(caller, jobs.BACKUP, env_id, {})

        return await once(ctx.idempotency, caller, f"backup:{env_id}", idempotency_key, {}, run)

    @api.get(ENDPOINTS["run_backup"].path)
    async def list_backups(
        env_id: str, caller: Annotated[Caller, guard.permit("run_backup")]
    ) -> list[BackupOut]:
        return [
            BackupOut(
                id=str(item.id),
                env_id=item.env_id,
                file_name=item.file_name,
                dashboards=item.dashboards,
                size_bytes=item.size_bytes,
                created_by=item.created_by,
                created_at=item.created_at,
            )
            for item in await ctx.backups.list(env_id)
        ]

    @api.post("/api/envs/{env_id}/restores", status_code=status.HTTP_202_ACCEPTED)
    async def restore_backup(
        env_id: EnvId,
        body: RestoreIn,
        caller: Annotated[Caller, guard.permit("deploy_dashboard")],
        idempotency_key: IdempotencyKey = None,
    ) -> Any:
        """Restore a backup into this environment: an import like a deploy, under its policy."""

        async def run() -> tuple[int, Any]:
            await ctx.deployments.ensure_open(env_id)
            await ctx.backups.read(body.backup_id)  # fail now if it is missing or damaged
            return await submit(caller, jobs.RESTORE, env_id, {"backup_id": str(body.backup_id)})

        return await once(ctx.idempotency, caller, f"restore:{env_id}", idempotency_key, body, run)

    @api.post(ENDPOINTS["run_llm_validation"].path, status_code=status.HTTP_202_ACCEPTED)
    async def run_llm_validation(
        env_id: EnvId,
        dashboard_id: ObjectId,
        caller: Annotated[Caller, guard.permit("run_llm_validation")],
        idempotency_key: IdempotencyKey = None,
    ) -> Any:
        """run_llm_validation: a report on the dashboard, kept with the task."""

        async def run() -> tuple[int, Any]:
            await dashboards.get(ctx.supersets.as_person(env_id, caller.username), dashboard_id)
            return await submit(caller, jobs.LLM_VALIDATION, env_id, {"dashboard_id": dashboard_id})

        return await once(
            ctx.idempotency, caller, f"validation:{env_id}", idempotency_key, {"id": dashboard_id}, run
        )

    @api.post(ENDPOINTS["run_llm_documentation"].path, status_code=status.HTTP_202_ACCEPTED)
    async def run_llm_documentation(
        env_id: EnvId,
        dashboard_id: ObjectId,
        caller: Annotated[Caller, guard.permit("run_llm_documentation")],
        idempotency_key: IdempotencyKey = None,
    ) -> Any:
        """run_llm_documentation: descriptions written into the dashboard's charts."""

        async def run() -> tuple[int, Any]:
            await dashboards.get(ctx.supersets.as_person(env_id, caller.username), dashboard_id)
            return await submit(caller, jobs.LLM_DOCUMENTATION, env_id, {"dashboard_id": dashboard_id})

        request = {"id": dashboard_id}
        return await once(ctx.idempotency, caller, f"documentation:{env_id}", idempotency_key, request, run)

    @api.get(ENDPOINTS["list_maintenance_events"].path)
    async def list_maintenance_events(
        only: Annotated[MaintenanceQuery, Query()],
        caller: Annotated[Caller, guard.permit("list_maintenance_events")],
    ) -> list[WindowOut]:
        return [WindowOut.of(window) for window in await ctx.maintenance.list(only.env_id)]

    @api.post(ENDPOINTS["start_maintenance"].path, status_code=status.HTTP_201_CREATED)
    async def start_maintenance(
        env_id: EnvId,
        body: MaintenanceBody,
        caller: Annotated[Caller, guard.permit("start_maintenance")],
        idempotency_key: IdempotencyKey = None,
    ) -> Any:
        """start_maintenance: deploys and migrations into the environment are refused until it ends."""

        async def run() -> tuple[int, Any]:
            ctx.supersets.environment(env_id)
            try:
                window = await ctx.maintenance.start(env_id, body.reason, caller.username)
            except AlreadyUnderMaintenance as error:
                raise HTTPException(
                    status.HTTP_409_CONFLICT,
                    {
                        "code": "already_under_maintenance",
                        "message": str(error),
                        "window_id": str(error.window.id),
                    },
                ) from None
            return 201, WindowOut.of(window)

        return await once(ctx.idempotency, caller, f"maintenance_start:{env_id}", idempotency_key, body, run)

    @api.post(ENDPOINTS["end_maintenance"].path)
    async def end_maintenance(
        env_id: EnvId,
        caller: Annotated[Caller, guard.permit("end_maintenance")],
        idempotency_key: IdempotencyKey = None,
    ) -> Any:
        async def run() -> tuple[int, Any]:
            window = await ctx.maintenance.end(env_id, caller.username)
            if window is None:
                raise HTTPException(
                    status.HTTP_409_CONFLICT,
                    {"code": "not_under_maintenance", "message": f"{env_id} is not under maintenance"},
                )
            return 200, WindowOut.of(window)

        return await once(ctx.idempotency, caller, f"maintenance_end:{env_id}", idempotency_key, {}, run)

    @api.get(ENDPOINTS["list_llm_providers"].path)
    async def list_llm_providers(
        caller: Annotated[Caller, guard.permit("list_llm_providers")],
    ) -> list[Provider]:
        providers = ctx.llm.providers()
        if caller.sees_addresses:
            return providers
        return [provider.model_copy(update={"base_url": None}) for provider in providers]

    @api.get(ENDPOINTS["get_llm_status"].path)
    async def get_llm_status(caller: Annotated[Caller, guard.permit("get_llm_status")]) -> ProviderStatus:
        status = await ctx.llm.status()
        if caller.sees_addresses or status.error is None:
            return status
        return status.model_copy(update={"error": status.error_kind})

    @api.post(ENDPOINTS["create_branch"].path, status_code=status.HTTP_201_CREATED)
    async def create_branch(
        body: BranchBody,
        caller: Annotated[Caller, guard.permit("create_branch")],
        idempotency_key: IdempotencyKey = None,
    ) -> Any:
        """create_branch: a branch of the exports repository."""

        async def run() -> tuple[int, Any]:
            return 201, await ctx.git.create_branch(body.name, body.start)

        return await once(ctx.idempotency, caller, "create_branch", idempotency_key, body, run)

    @api.post(ENDPOINTS["commit_changes"].path, status_code=status.HTTP_201_CREATED)
    async def commit_changes(
        body: CommitBody,
        caller: Annotated[Caller, guard.permit("commit_changes")],
        idempotency_key: IdempotencyKey = None,
    ) -> Any:
        """commit_changes: the dashboards' current export from an environment, committed on a branch."""

        async def run() -> tuple[int, Any]:
            archive = await dashboards.export(
                ctx.supersets.as_person(body.env_id, caller.username), body.dashboard_ids
            )
            files = export_files(archive, body.env_id)
            return 201, await ctx.git.commit(body.branch, files, body.message, caller.username)

        return await once(ctx.idempotency, caller, "commit_changes", idempotency_key, body, run)

    return api
