"""Checkpoint clean-up and retention against checkpoints written by the real LangGraph saver."""

import asyncio
import operator
import uuid
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Annotated, Any, TypedDict

import pytest
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from langgraph.graph import END, START, StateGraph
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from sstools.convo.checkpoints import CheckpointJanitor
from sstools.convo.store.queries import CHECKPOINT_TABLES, ConversationStore

OWNER = "alice"


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
    assert (await _rows(engine, archived))["checkpoints"] > 0

    await store.set_archived(OWNER, uuid.UUID(archived), archived=True)
    result = await CheckpointJanitor(engine).clean_pending()

    assert (result.cleaned, result.failed) == (1, 0)
    assert await _rows(engine, archived) == dict.fromkeys(CHECKPOINT_TABLES, 0)
    assert await _rows(engine, kept) == kept_before
    assert (await CheckpointJanitor(engine).clean_pending()).cleaned == 0  # nothing owed any more


async def test_clean_up_that_fails_midway_rolls_back_and_finishes_on_the_next_pass(
    engine: AsyncEngine, saver: AsyncPostgresSaver
) -> None:
    store = ConversationStore(engine)
    thread_id = await _conversation_with_checkpoints(store, saver, turns=2)
    before = await _rows(engine, thread_id)
    await store.set_archived(OWNER, uuid.UUID(thread_id), archived=True)

    async def crash_after_first_table(thread: str, table: str) -> None:
        raise ConnectionError(f"lost the database after {table}")

    failing = await CheckpointJanitor(engine, between_steps=crash_after_first_table).clean_pending()
    assert (failing.cleaned, failing.failed) == (0, 1)
    assert await _rows(engine, thread_id) == before  # the half-done delete was rolled back
    async with engine.connect() as connection:
        owed = (
            await connection.execute(text("SELECT attempts, last_error FROM agent_checkpoint_cleanups"))
        ).one()
    assert owed[0] == 1
    assert "lost the database" in owed[1]

    assert (await CheckpointJanitor(engine).clean_pending()).cleaned == 1
    assert await _rows(engine, thread_id) == dict.fromkeys(CHECKPOINT_TABLES, 0)


async def test_sweeper_keeps_the_latest_checkpoint_and_the_thread_resumes(
    engine: AsyncEngine, saver: AsyncPostgresSaver
) -> None:
    store = ConversationStore(engine)
    idle = await _conversation_with_checkpoints(store, saver, turns=4)
    graph = _graph(saver)
    config = {"configurable": {"thread_id": idle}}
    state_before = (await graph.aget_state(config)).values
    assert state_before["steps"] == [1, 2, 3, 4]
    assert (await _rows(engine, idle))["checkpoints"] > 4

    janitor = CheckpointJanitor(engine)
    assert (await janitor.sweep(idle_for=timedelta(hours=1))).checkpoints_deleted == 0  # not idle yet
    swept = await janitor.sweep(idle_for=timedelta(0))

    assert swept.threads == 1
    assert swept.checkpoints_deleted > 0
    assert (await _rows(engine, idle))["checkpoints"] == 1
    assert (await graph.aget_state(config)).values == state_before
    resumed = await graph.ainvoke({"steps": []}, config)
    assert resumed["steps"] == [1, 2, 3, 4, 5]


async def test_volume_reports_rows_and_bytes(engine: AsyncEngine, saver: AsyncPostgresSaver) -> None:
    await _conversation_with_checkpoints(ConversationStore(engine), saver, turns=1)
    volume = await CheckpointJanitor(engine).volume()
    assert set(volume.rows) == set(CHECKPOINT_TABLES)
    assert volume.rows["checkpoints"] > 0
    assert all(size > 0 for size in volume.bytes.values())


async def test_running_service_pays_owed_clean_ups_and_reports_checkpoint_volume(
    fresh_database_url: str, engine: AsyncEngine, saver: AsyncPostgresSaver, tracer_provider: Any
) -> None:
    """Owed clean-ups left by a crash are paid by the service's housekeeping loop, not only on archive."""
    from sstools.convo.main import assemble
    from sstools.devstack.agentstack import convo_settings_for
    from sstools.devstack.testing import http_get, started_service

    store = ConversationStore(engine)
    archived = await _conversation_with_checkpoints(store, saver, turns=2)
    await store.set_archived(OWNER, uuid.UUID(archived), archived=True)  # owed, not yet paid
    assert (await _rows(engine, archived))["checkpoints"] > 0

    settings = convo_settings_for(fresh_database_url, housekeeping_interval_seconds=0.1)
    async with started_service(settings, assemble, tracer_provider) as service:
        for _ in range(100):
            if await _rows(engine, archived) == dict.fromkeys(CHECKPOINT_TABLES, 0):
                break
            await asyncio.sleep(0.1)
        exposition = (await http_get(f"http://127.0.0.1:{service.ports['metrics']}/metrics")).text
    assert await _rows(engine, archived) == dict.fromkeys(CHECKPOINT_TABLES, 0)
    assert 'sstools_convo_checkpoint_cleanups_total{outcome="done"} 1.0' in exposition
    assert 'sstools_convo_checkpoint_rows{table="checkpoints"}' in exposition
    assert 'sstools_convo_checkpoint_bytes{table="checkpoint_blobs"}' in exposition


async def test_restoring_before_the_clean_up_keeps_the_agents_memory(
    engine: AsyncEngine, saver: AsyncPostgresSaver
) -> None:
    store = ConversationStore(engine)
    thread_id = await _conversation_with_checkpoints(store, saver, turns=2)
    before = await _rows(engine, thread_id)
    await store.set_archived(OWNER, uuid.UUID(thread_id), archived=True)
    await store.set_archived(OWNER, uuid.UUID(thread_id), archived=False)
    assert (await CheckpointJanitor(engine).clean_pending()).cleaned == 0
    assert await _rows(engine, thread_id) == before
