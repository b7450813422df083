"""Tasks in PostgreSQL: run once, survive the death of the ops that ran them, fail with the
typed error of what went wrong, and are counted once when they end."""

import asyncio
import contextlib
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import pytest
from prometheus_client import CollectorRegistry
from sqlalchemy.ext.asyncio import AsyncEngine

from sstools.common.db import create_engine
from sstools.ops.errors import Conflict
from sstools.ops.store import MIGRATIONS
from sstools.ops.store.tasks import Task, TaskStatus, TaskStore
from sstools.ops.tasks import Report, TaskMetrics, TaskWorker

SHORT_LEASE = timedelta(seconds=1)
TASKS = "sstools_ops_tasks_total"


@pytest.fixture
async def engine(fresh_database_url: str) -> AsyncIterator[AsyncEngine]:
    await asyncio.to_thread(MIGRATIONS.upgrade, fresh_database_url)
    engine = create_engine(fresh_database_url)
    yield engine
    await engine.dispose()


async def test_a_task_whose_ops_died_is_finished_by_the_next_one(engine: AsyncEngine) -> None:
    store = TaskStore(engine)
    started = asyncio.Event()

    async def hangs(task: Task, report: Report) -> dict[str, Any]:
        await report(40)
        started.set()
        await asyncio.sleep(3600)
        return {}

    async def completes(task: Task, report: Report) -> dict[str, Any]:
        return {"done_by": "second ops", "params": task.params}

    registry = CollectorRegistry()
    metrics = TaskMetrics(registry)
    task = await store.submit("backup", "dev", {"n": 1}, "oleg")
    first = asyncio.create_task(
        TaskWorker(store, {"backup": hangs}, lease=SHORT_LEASE, metrics=metrics).run_one()
    )
    await started.wait()
    first.cancel()  # the first ops dies mid-task: nothing renews its lease any more
    with contextlib.suppress(asyncio.CancelledError):
        await first
    assert (await store.get(task.id)).status is TaskStatus.RUNNING  # type: ignore[union-attr]

    assert registry.get_sample_value(TASKS, {"kind": "backup", "outcome": "success"}) is None  # not ended

    second = TaskWorker(store, {"backup": completes}, lease=SHORT_LEASE, metrics=metrics)
    assert not await second.run_one()  # the lease still holds: not taken over yet
    await asyncio.sleep(SHORT_LEASE.total_seconds() + 0.2)
    assert await second.run_one()
    finished = await store.get(task.id)
    assert finished is not None
    assert (finished.status, finished.attempts, finished.progress) == (TaskStatus.SUCCESS, 2, 100)
    assert finished.result == {"done_by": "second ops", "params": {"n": 1}}
    assert registry.get_sample_value(TASKS, {"kind": "backup", "outcome": "success"}) == 1


async def test_queued_tasks_wait_for_a_worker_and_run_exactly_once(engine: AsyncEngine) -> None:
    store = TaskStore(engine)
    ran: list[str] = []

    async def record(task: Task, report: Report) -> dict[str, Any]:
        ran.append(str(task.id))
        await asyncio.sleep(0.01)
        return {}

    tasks = [await store.submit("backup", "dev", {}, "oleg") for _ in range(12)]
    workers = [TaskWorker(store, {"backup": record}) for _ in range(3)]

    async def drain(worker: TaskWorker) -> None:
        while await worker.run_one():
            pass

    await asyncio.gather(*(drain(worker) for worker in workers))
    assert sorted(ran) == sorted(str(task.id) for task in tasks)
    statuses = {(await store.get(task.id)).status for task in tasks}  # type: ignore[union-attr]
    assert statuses == {TaskStatus.SUCCESS}


async def test_failures_keep_their_code_and_a_task_is_not_retried_forever(engine: AsyncEngine) -> None:
    store = TaskStore(engine)

    async def refuses(task: Task, report: Report) -> dict[str, Any]:
        raise Conflict("prod is under maintenance", env_id="prod")

    async def breaks(task: Task, report: Report) -> dict[str, Any]:
        raise RuntimeError("a bug")

    worker = TaskWorker(store, {"deploy": refuses, "backup": breaks}, max_attempts=2)
    refused = await store.submit("deploy", "prod", {}, "root")
    broken = await store.submit("backup", "prod", {}, "root")
    unknown = await store.submit("no-such-kind", "prod", {}, "root")
    while await worker.run_one():
        pass
    assert (await store.get(refused.id)).error == {  # type: ignore[union-attr]
        "code": "conflict",
        "message": "prod is under maintenance",
        "env_id": "prod",
    }
    assert (await store.get(broken.id)).error["code"] == "internal"  # type: ignore[union-attr,index]
    assert (await store.get(unknown.id)).error["code"] == "unknown_task_kind"  # type: ignore[union-attr,index]

    # A task whose worker died twice (max_attempts) is failed, not started a third time.
    interrupted = await store.submit("backup", "prod", {}, "root")
    for _ in range(2):
        claimed = await store.claim(timedelta(milliseconds=1))
        assert claimed is not None
        assert claimed.id == interrupted.id
        await asyncio.sleep(0.01)
    assert await worker.run_one()
    final = await store.get(interrupted.id)
    assert final is not None
    assert (final.status, final.error["code"]) == (TaskStatus.FAILED, "interrupted")  # type: ignore[index]


async def test_a_task_that_ends_is_counted_once_by_kind_and_outcome_and_timed(engine: AsyncEngine) -> None:
    store = TaskStore(engine)
    registry = CollectorRegistry()

    async def completes(task: Task, report: Report) -> dict[str, Any]:
        await asyncio.sleep(0.05)
        return {}

    async def refuses(task: Task, report: Report) -> dict[str, Any]:
        raise Conflict("prod is under maintenance", env_id="prod")

    worker = TaskWorker(store, {"backup": completes, "deploy": refuses}, metrics=TaskMetrics(registry))
    await store.submit("backup", "dev", {}, "oleg")
    await store.submit("deploy", "prod", {}, "root")
    await store.submit("no-such-kind", "prod", {}, "root")
    while await worker.run_one():
        pass

    def value(name: str, **labels: str) -> float:
        return registry.get_sample_value(name, labels) or 0.0

    assert value(TASKS, kind="backup", outcome="success") == 1
    assert value(TASKS, kind="backup", outcome="failed") == 0
    assert value(TASKS, kind="deploy", outcome="failed") == 1
    assert value(TASKS, kind="deploy", outcome="success") == 0
    assert value(TASKS, kind="no-such-kind", outcome="failed") == 1  # ended unrun: counted, not timed
    assert value("sstools_ops_task_seconds_count", kind="backup") == 1
    assert 0.05 <= value("sstools_ops_task_seconds_sum", kind="backup") < 5
    assert value("sstools_ops_task_seconds_count", kind="deploy") == 1
    assert value("sstools_ops_task_seconds_count", kind="no-such-kind") == 0


async def test_a_task_started_here_runs_at_once_beside_a_long_one_and_ends_as_any_other(
    engine: AsyncEngine,
) -> None:
    """A statement someone waits for is not queued behind a deployment the worker is busy with;
    it is stored, leased, ended and counted as a queued task is, and its job gives its result —
    or raises the typed error it ended with."""
    store = TaskStore(engine)
    deploying = asyncio.Event()

    async def deploy(task: Task, report: Report) -> dict[str, Any]:
        deploying.set()
        await asyncio.sleep(3600)
        return {}

    async def sql(task: Task, report: Report) -> dict[str, Any]:
        if task.params["fails"]:
            raise Conflict("the statement was refused")
        return {"rows": [{"n": 1}]}

    registry = CollectorRegistry()
    worker = TaskWorker(
        store, {"deploy": deploy, "sql": sql}, lease=SHORT_LEASE, metrics=TaskMetrics(registry)
    )
    await store.submit("deploy", "prod", {}, "oleg")
    busy = asyncio.create_task(worker.run_one())
    await deploying.wait()
    try:
        task, job = await worker.start_here("sql", "dev", {"fails": False}, "anna")
        assert await asyncio.wait_for(job, 5) == {"rows": [{"n": 1}]}
        ended = await store.get(task.id)
        assert ended is not None
        assert (ended.kind, ended.created_by, ended.status, ended.attempts, ended.result) == (
            "sql",
            "anna",
            TaskStatus.SUCCESS,
            1,
            {"rows": [{"n": 1}]},
        )
        refused, job = await worker.start_here("sql", "dev", {"fails": True}, "anna")
        with pytest.raises(Conflict, match="refused"):
            await asyncio.wait_for(job, 5)
        failed = await store.get(refused.id)
        assert failed is not None
        assert failed.status is TaskStatus.FAILED
        assert failed.error == {"code": "conflict", "message": "the statement was refused"}
        assert registry.get_sample_value(TASKS, {"kind": "sql", "outcome": "success"}) == 1
        assert registry.get_sample_value(TASKS, {"kind": "sql", "outcome": "failed"}) == 1
    finally:
        busy.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await busy


async def test_a_task_started_here_whose_ops_died_is_claimed_by_a_worker(engine: AsyncEngine) -> None:
    """Started here, it holds a lease like a claimed task: no worker takes it while it runs,
    and one does once nothing renews it (the ops that ran it died)."""
    store = TaskStore(engine)
    started = asyncio.Event()

    async def hangs(task: Task, report: Report) -> dict[str, Any]:
        started.set()
        await asyncio.sleep(3600)
        return {}

    async def completes(task: Task, report: Report) -> dict[str, Any]:
        return {"attempt": task.attempts}

    first = TaskWorker(store, {"sql": hangs}, lease=SHORT_LEASE)
    task, job = await first.start_here("sql", "dev", {}, "anna")
    await started.wait()
    second = TaskWorker(store, {"sql": completes}, lease=SHORT_LEASE)
    await asyncio.sleep(SHORT_LEASE.total_seconds() + 0.2)
    assert not await second.run_one()  # its heartbeat renews the lease
    job.cancel()  # the first ops dies
    with contextlib.suppress(asyncio.CancelledError):
        await job
    await asyncio.sleep(SHORT_LEASE.total_seconds() + 0.2)
    assert await second.run_one()
    ended = await store.get(task.id)
    assert ended is not None
    assert (ended.status, ended.result) == (TaskStatus.SUCCESS, {"attempt": 2})


async def test_ended_tasks_of_slow_reads_are_forgotten_past_their_retention_and_nothing_else(
    engine: AsyncEngine,
) -> None:
    store = TaskStore(engine)

    async def answers(task: Task, report: Report) -> dict[str, Any]:
        return {"rows": []}

    worker = TaskWorker(store, {"sql": answers, "deploy": answers})
    ended_read, job = await worker.start_here("sql", "dev", {}, "anna")
    await job
    running_read = await store.start("sql", "dev", {}, "anna", timedelta(hours=1))
    deploy = await store.submit("deploy", "prod", {}, "oleg")
    assert await worker.run_one()
    await asyncio.sleep(1.1)
    assert await store.sweep(["sql", "health"], timedelta(hours=1)) == 0  # all younger than that
    assert await store.sweep(["sql", "health"], timedelta(seconds=1)) == 1
    assert await store.get(ended_read.id) is None
    assert await store.get(running_read.id) is not None  # someone may still be following it
    assert await store.get(deploy.id) is not None  # the record of a change stays
