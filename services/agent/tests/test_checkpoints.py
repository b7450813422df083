"""The checkpoint saver on its pool: one conversation's checkpoint work never waits for another's."""

import asyncio
from typing import Any

import psycopg
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import Checkpoint, empty_checkpoint

from sstools.agent.checkpoints import Checkpoints
from sstools.devstack.testing import wait_until


def _checkpoint(text: str) -> Checkpoint:
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = {"messages": [text]}
    checkpoint["channel_versions"] = {"messages": "1"}
    return checkpoint


def _thread(thread_id: str) -> RunnableConfig:
    return {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}


async def test_a_conversation_reads_its_checkpoint_while_another_ones_write_waits(
    fresh_database_url: str,
) -> None:
    checkpoints = Checkpoints(fresh_database_url)
    await checkpoints.prepare()
    saver = checkpoints.saver
    try:
        await saver.aput(_thread("b"), _checkpoint("b"), {}, {"messages": "1"})
        async with await psycopg.AsyncConnection.connect(fresh_database_url, autocommit=True) as blocker:
            async with blocker.transaction():
                # Inserts into the table wait; reads of it do not.
                await blocker.execute("LOCK TABLE checkpoint_blobs IN SHARE MODE")
                write = asyncio.create_task(saver.aput(_thread("a"), _checkpoint("a"), {}, {"messages": "1"}))

                async def write_waits() -> bool:
                    waiting: Any = await blocker.execute(
                        "SELECT count(*) FROM pg_stat_activity"
                        " WHERE datname = current_database() AND wait_event_type = 'Lock'"
                    )
                    return bool((await waiting.fetchone())[0])

                await wait_until(write_waits, 10, "conversation a's checkpoint write waits on the table")
                read = await asyncio.wait_for(saver.aget_tuple(_thread("b")), timeout=5)
                assert read is not None
                assert read.checkpoint["channel_values"] == {"messages": ["b"]}
                assert not write.done()
            await asyncio.wait_for(write, timeout=10)  # the table lock is gone: the write goes on
        written = await saver.aget_tuple(_thread("a"))
        assert written is not None
        assert written.checkpoint["channel_values"] == {"messages": ["a"]}
    finally:
        await checkpoints.close()
