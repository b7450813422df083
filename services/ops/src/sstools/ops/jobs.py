"""The kinds of task ops runs, each a plain function of the task's parameters, acting in Superset
as the person who asked (``created_by``)."""

import uuid
from typing import Any

from sstools.common.catalogue import HEALTH_TASK, SQL_TASK
from sstools.ops.backups import Backups
from sstools.ops.deployments import Deployments
from sstools.ops.llm import LlmEndpoint, document, validate
from sstools.ops.store.tasks import Task, TaskStore
from sstools.ops.superset import health, sqllab
from sstools.ops.superset.registry import Supersets
from sstools.ops.tasks import Handler, Report

DEPLOY = "deploy"
MIGRATION = "migration"
BACKUP = "backup"
RESTORE = "restore"
LLM_VALIDATION = "llm_validation"
LLM_DOCUMENTATION = "llm_documentation"
# the catalogue's: the agent reads a followed read's task by its kind
SQL = SQL_TASK
HEALTH = HEALTH_TASK
READS = (SQL, HEALTH)  # their tasks keep a result to follow, not a record of a change


def handlers(
    supersets: Supersets,
    backups: Backups,
    deployments: Deployments,
    llm: LlmEndpoint,
    tasks: TaskStore,
    sql_timeout_seconds: float,
) -> dict[str, Handler]:
    async def deploy(task: Task, report: Report) -> dict[str, Any]:
        params = task.params
        return await deployments.transfer(
            params["source_env"], task.env_id, [params["dashboard_id"]], {}, task.created_by, report
        )

    async def migration(task: Task, report: Report) -> dict[str, Any]:
        params = task.params
        return await deployments.transfer(
            params["source_env"],
            task.env_id,
            params["dashboard_ids"],
            params.get("database_mapping", {}),
            task.created_by,
            report,
        )

    async def backup(task: Task, report: Report) -> dict[str, Any]:
        made = await backups.create(task.env_id, task.created_by)
        return {
            "backup_id": str(made.id),
            "env_id": made.env_id,
            "file_name": made.file_name,
            "dashboards": made.dashboards,
            "size_bytes": made.size_bytes,
        }

    async def restore(task: Task, report: Report) -> dict[str, Any]:
        await deployments.ensure_open(task.env_id)
        return await backups.restore(uuid.UUID(task.params["backup_id"]), task.env_id, task.created_by)

    async def llm_validation(task: Task, report: Report) -> dict[str, Any]:
        return await validate(
            llm, supersets.as_person(task.env_id, task.created_by), task.params["dashboard_id"], report
        )

    async def llm_documentation(task: Task, report: Report) -> dict[str, Any]:
        return await document(
            llm, supersets.as_person(task.env_id, task.created_by), task.params["dashboard_id"], report
        )

    async def sql(task: Task, report: Report) -> dict[str, Any]:
        """A statement as it was judged and admitted (``script``: what SQL Lab is sent). A read
        interrupted by a restart of ops is run again; a change is not — it may have run."""
        params = task.params
        if task.attempts > 1 and not params["read_only"]:
            raise sqllab.StatementInterrupted(
                "ops restarted while the statement ran; it may have changed data, so it was not "
                "run again: look at the data before asking again"
            )
        result = await sqllab.execute(
            supersets.as_person(task.env_id, task.created_by),
            params["database_id"],
            params["script"],
            schema=params["schema"],
            limit=params["limit"],
            timeout_seconds=sql_timeout_seconds,
        )
        return result.model_dump()

    async def health_check(task: Task, report: Report) -> dict[str, Any]:
        """get_health_summary's answer: the charts whose query fails, and the latest validations."""
        summary = await health.summary(
            supersets.as_person(task.env_id, task.created_by),
            task.params["dashboard_ids"],
            force=task.params["force"],
        )
        runs = await tasks.latest(LLM_VALIDATION, task.env_id, limit=10)
        checked = health.HealthReport(
            **summary.model_dump(), last_validations=[health.ValidationRun.of(run) for run in runs]
        )
        return checked.model_dump(mode="json")

    return {
        DEPLOY: deploy,
        MIGRATION: migration,
        BACKUP: backup,
        RESTORE: restore,
        LLM_VALIDATION: llm_validation,
        LLM_DOCUMENTATION: llm_documentation,
        SQL: sql,
        HEALTH: health_check,
    }
