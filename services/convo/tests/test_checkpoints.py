"""Checkpoint clean-up and retention against checkpoints written by the real LangGraph saver."""

import operator
import uuid
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Annotated, Any, TypedDict

import pytest
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from langgraph.graph import END, START, StateGraph
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from sstools.convo.checkpoints import CheckpointJanitor, CleanupPass, SweepPass
from sstools.convo.store.queries import ConversationStore

OWNER = "alice"
# The tables LangGraph's PostgreSQL saver writes a thread's rows into (its own
# checkpoint_migrations holds no thread's rows), named here, not taken from the code under test.
CHECKPOINT_TABLES = ("checkpoints", "checkpoint_blobs", "checkpoint_writes")
NONE_LEFT = dict.fromkeys(CHECKPOINT_TABLES, 0)


class CounterState(TypedDict):
    steps: Annotated[list[int], operator.add]


def _graph(saver: AsyncPostgresSaver) -> Any:
    def count(state: CounterState) -> dict[str, list[int]]:
        return {"steps": [len(state["steps"]) + 1]}

    builder = StateGraph(CounterState)
    builder.add_node("count", count)
    builder.add_edge(START, "count")
    builder.add_edge("count", END)
    return builder.compile(checkpointer=saver)


@pytest.fixture
async def saver(fresh_database_url: str, engine: AsyncEngine) -> AsyncIterator[AsyncPostgresSaver]:
    async with AsyncPostgresSaver.from_conn_string(fresh_database_url) as saver:
        await saver.setup()
        yield saver


async def _rows(engine: AsyncEngine, thread_id: str) -> dict[str, int]:
    async with engine.connect() as connection:
        return {
            table: int(
                await connection.scalar(
                    text(f"SELECT count(*) FROM {table} WHERE thread_id = :t"), {"t": thread_id}
                )
                or 0
            )
            for table in CHECKPOINT_TABLES
        }


def _in_every_table(rows: dict[str, int]) -> bool:
    """Whether a thread has rows in each checkpoint table: what a clean-up must be shown to remove."""
    return set(rows) == set(CHECKPOINT_TABLES) and min(rows.values()) > 0


async def _conversation_with_checkpoints(
    store: ConversationStore, saver: AsyncPostgresSaver, turns: int
) -> str:
    conversation = await store.create(OWNER, "hello")
    thread_id = str(conversation["id"])
    graph = _graph(saver)
    for _ in range(turns):
        await graph.ainvoke({"steps": []}, {"configurable": {"thread_id": thread_id}})
    return thread_id


async def test_archiving_removes_exactly_that_threads_checkpoints(
    engine: AsyncEngine, saver: AsyncPostgresSaver
) -> None:
    store = ConversationStore(engine)
    archived = await _conversation_with_checkpoints(store, saver, turns=3)
    kept = await _conversation_with_checkpoints(store, saver, turns=3)
    kept_before = await _rows(engine, kept)
    assert _in_every_table(kept_before), kept_before
    archived_before = await _rows(engine, archived)
    assert _in_every_table(archived_before), archived_before

    await store.set_archived(OWNER, uuid.UUID(archived), archived=True)
    result = await CheckpointJanitor(engine).clean_pending()

    assert (result.cleaned, result.failed) == (1, 0)
    assert await _rows(engine, archived) == NONE_LEFT
    assert await _rows(engine, kept) == kept_before
    assert await CheckpointJanitor(engine).clean_pending() == CleanupPass(0, 0)  # nothing owed any more


async def test_checkpoints_written_into_an_archived_thread_are_removed_on_the_next_pass(
    engine: AsyncEngine, saver: AsyncPostgresSaver
) -> None:
    """A turn that lost its lease before the archive may still write: the next pass finds the
    archived thread with checkpoints, owes it a clean-up anew and pays it."""
    store = ConversationStore(engine)
    thread_id = await _conversation_with_checkpoints(store, saver, turns=1)
    kept = await _conversation_with_checkpoints(store, saver, turns=1)
    kept_before = await _rows(engine, kept)
    await store.set_archived(OWNER, uuid.UUID(thread_id), archived=True)
    assert await CheckpointJanitor(engine).clean_pending() == CleanupPass(1, 0)
    await _graph(saver).ainvoke({"steps": []}, {"configurable": {"thread_id": thread_id}})  # the late turn
    assert _in_every_table(await _rows(engine, thread_id))

    assert await CheckpointJanitor(engine).clean_pending() == CleanupPass(1, 0)
    assert await _rows(engine, thread_id) == NONE_LEFT
    assert await _rows(engine, kept) == kept_before
    assert await CheckpointJanitor(engine).clean_pending() == CleanupPass(0, 0)


async def test_clean_up_that_fails_midway_rolls_back_and_finishes_on_the_next_pass(
    engine: AsyncEngine, saver: AsyncPostgresSaver
) -> None:
    store = ConversationStore(engine)
    thread_id = await _conversation_with_checkpoints(store, saver, turns=2)
    before = await _rows(engine, thread_id)
    assert _in_every_table(before), before
    await store.set_archived(OWNER, uuid.UUID(thread_id), archived=True)

    async def crash_after_first_table(thread: str, table: str) -> None:
        raise ConnectionError("lost the database")

    failing = await CheckpointJanitor(engine, between_steps=crash_after_first_table).clean_pending()
    assert (failing.cleaned, failing.failed) == (0, 1)
    assert await _rows(engine, thread_id) == before  # the half-done delete was rolled back
    async with engine.connect() as connection:
        owed = (
            await connection.execute(text("SELECT attempts, last_error FROM agent_checkpoint_cleanups"))
        ).one()
    assert tuple(owed) == (1, "ConnectionError('lost the database')")  # the attempt and its error

    assert await CheckpointJanitor(engine).clean_pending() == CleanupPass(1, 0)
    assert await _rows(engine, thread_id) == NONE_LEFT


async def test_sweeper_keeps_the_latest_checkpoint_and_the_thread_resumes(
    engine: AsyncEngine, saver: AsyncPostgresSaver
) -> None:
    store = ConversationStore(engine)
    idle = await _conversation_with_checkpoints(store, saver, turns=4)
    graph = _graph(saver)
    config = {"configurable": {"thread_id": idle}}
    state_before = (await graph.aget_state(config)).values
    assert state_before["steps"] == [1, 2, 3, 4]
    before = await _rows(engine, idle)
    assert _in_every_table(before), before
    assert before["checkpoints"] > 4

    janitor = CheckpointJanitor(engine)
    assert await janitor.sweep(idle_for=timedelta(hours=1)) == SweepPass(0, 0, 0, 0)  # not idle yet
    assert await _rows(engine, idle) == before
    swept = await janitor.sweep(idle_for=timedelta(0))

    after = await _rows(engine, idle)
    assert after["checkpoints"] == 1
    # what the pass reports is what it removed
    assert swept == SweepPass(
        threads=1,
        checkpoints_deleted=before["checkpoints"] - 1,
        writes_deleted=before["checkpoint_writes"] - after["checkpoint_writes"],
        blobs_deleted=before["checkpoint_blobs"] - after["checkpoint_blobs"],
    )
    assert swept.blobs_deleted > 0  # older versions of the steps channel were dropped
    assert (await graph.aget_state(config)).values == state_before
    resumed = await graph.ainvoke({"steps": []}, config)
    assert resumed["steps"] == [1, 2, 3, 4, 5]


async def test_volume_reports_rows_and_bytes(engine: AsyncEngine, saver: AsyncPostgresSaver) -> None:
    thread_id = await _conversation_with_checkpoints(ConversationStore(engine), saver, turns=1)
    rows = await _rows(engine, thread_id)  # the only thread: every row of the tables
    assert _in_every_table(rows), rows
    volume = await CheckpointJanitor(engine).volume()
    assert volume.rows == rows
    assert set(volume.bytes) == set(CHECKPOINT_TABLES)
    assert min(volume.bytes.values()) > 0


async def test_running_service_pays_owed_clean_ups_and_reports_checkpoint_volume(
    fresh_database_url: str, engine: AsyncEngine, saver: AsyncPostgresSaver, tracer_provider: Any
) -> None:
    """Owed clean-ups left by a crash are paid by the service's housekeeping loop, not only on archive."""
    from sstools.convo.main import assemble
    from sstools.devstack.agentstack import convo_settings_for
    from sstools.devstack.testing import http_get, started_service, wait_until

    store = ConversationStore(engine)
    archived = await _conversation_with_checkpoints(store, saver, turns=2)
    await store.set_archived(OWNER, uuid.UUID(archived), archived=True)  # owed, not yet paid
    before = await _rows(engine, archived)
    assert _in_every_table(before), before

    settings = convo_settings_for(fresh_database_url, housekeeping_interval_seconds=0.1)
    samples: dict[tuple[str, str], float] = {}
    async with started_service(settings, assemble, tracer_provider) as service:

        async def volume_reported() -> bool:
            # the gauges are set at the end of a pass, after its clean-ups: wait for them
            exposition = (await http_get(f"http://127.0.0.1:{service.ports['metrics']}/metrics")).text
            samples.clear()
            samples.update(
                ((sample.name, sample.labels.get("table") or sample.labels.get("outcome", "")), sample.value)
                for family in text_string_to_metric_families(exposition)
                for sample in family.samples
                if sample.name.startswith("sstools_convo_checkpoint_")
            )
            return ("sstools_convo_checkpoint_rows", "checkpoints") in samples

        await wait_until(volume_reported, 20, "the checkpoint volume on /metrics")
    assert await _rows(engine, archived) == NONE_LEFT
    assert samples[("sstools_convo_checkpoint_cleanups_total", "done")] == 1
    # the only thread was cleaned up: no rows left in any table, whose files remain
    assert {
        table: samples[("sstools_convo_checkpoint_rows", table)] for table in CHECKPOINT_TABLES
    } == NONE_LEFT
    assert min(samples[("sstools_convo_checkpoint_bytes", table)] for table in CHECKPOINT_TABLES) > 0


async def test_restoring_before_the_clean_up_keeps_the_agents_memory(
    engine: AsyncEngine, saver: AsyncPostgresSaver
) -> None:
    store = ConversationStore(engine)
    thread_id = await _conversation_with_checkpoints(store, saver, turns=2)
    before = await _rows(engine, thread_id)
    assert _in_every_table(before), before
    await store.set_archived(OWNER, uuid.UUID(thread_id), archived=True)
    await store.set_archived(OWNER, uuid.UUID(thread_id), archived=False)
    assert await CheckpointJanitor(engine).clean_pending() == CleanupPass(0, 0)
    assert await _rows(engine, thread_id) == before
