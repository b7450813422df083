"""Tasks in PostgreSQL: run once, survive the death of the ops that ran them, fail with the
typed error of what went wrong."""

import asyncio
import contextlib
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from sstools.common.db import create_engine
from sstools.ops.errors import Conflict
from sstools.ops.store import MIGRATIONS
from sstools.ops.store.tasks import Task, TaskStatus, TaskStore
from sstools.ops.tasks import Report, TaskWorker

SHORT_LEASE = timedelta(seconds=1)


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

    task = await store.submit("backup", "dev", {"n": 1}, "oleg")
    first = asyncio.create_task(TaskWorker(store, {"backup": hangs}, lease=SHORT_LEASE).run_one())
    await started.wait()
    first.cancel()  # the first ops dies mid-task: nothing renews its lease any more
    with contextlib.suppress(asyncio.CancelledError):
        await first
    assert (await store.get(task.id)).status is TaskStatus.RUNNING  # type: ignore[union-attr]

    second = TaskWorker(store, {"backup": completes}, lease=SHORT_LEASE)
    assert not await second.run_one()  # the lease still holds: not taken over yet
    await asyncio.sleep(SHORT_LEASE.total_seconds() + 0.2)
    assert await second.run_one()
    finished = await store.get(task.id)
    assert finished is not None
    assert (finished.status, finished.attempts, finished.progress) == (TaskStatus.SUCCESS, 2, 100)
    assert finished.result == {"done_by": "second ops", "params": {"n": 1}}


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
