"""Checkpoint saver: the agent's ``PooledSaver`` beside LangGraph's ``AsyncPostgresSaver`` on the
same pool, with 1 and 20 conversations each taking turns as the graph does (read the thread's
checkpoint, write the next one with its writes). LangGraph's saver takes one lock around every
operation, so its conversations wait in one queue; the agent's does not. Rounds alternate the
two savers so the machine's noise falls on both alike. Prints JSON: per saver and concurrency,
p50/p99 ms of a turn's checkpoint work and turns per second, and the ratio.

    .venv/bin/python bench/checkpoints.py [--turns 30] [--rounds 3]
"""

import argparse
import asyncio
import json
import statistics
import time
import uuid
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import Checkpoint, create_checkpoint, empty_checkpoint
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool
from stats import percentiles

from sstools.agent.checkpoints import PooledSaver
from sstools.devstack.paths import DATA_DIR
from sstools.devstack.postgres import database_url
from sstools.devstack.testing import scratch_database

# A turn's worth of thread: a person's message and an answer of a few hundred words.
MESSAGE = {"type": "human", "content": "покажи дашборды продаж за квартал " * 4}
ANSWER = {"type": "ai", "content": "Вот дашборды продаж за квартал, отсортированные по дате. " * 30}


async def conversation(saver: AsyncPostgresSaver, turns: int, durations: list[float]) -> None:
    thread: RunnableConfig = {"configurable": {"thread_id": str(uuid.uuid4()), "checkpoint_ns": ""}}
    checkpoint: Checkpoint = empty_checkpoint()
    messages: list[dict[str, Any]] = []
    for step in range(turns):
        started = time.perf_counter()
        await saver.aget_tuple(thread)
        messages = [*messages, MESSAGE, ANSWER]
        checkpoint = create_checkpoint(checkpoint, None, step)
        checkpoint["channel_values"] = {"messages": messages}
        checkpoint["channel_versions"] = {"messages": str(step + 1)}
        written = await saver.aput(thread, checkpoint, {"step": step}, {"messages": str(step + 1)})
        await saver.aput_writes(written, [("messages", ANSWER)], task_id=str(uuid.uuid4()))
        durations.append((time.perf_counter() - started) * 1000)


async def measure(saver: AsyncPostgresSaver, conversations: int, turns: int) -> tuple[list[float], float]:
    durations: list[float] = []
    started = time.perf_counter()
    await asyncio.gather(*(conversation(saver, turns, durations) for _ in range(conversations)))
    return durations, len(durations) / (time.perf_counter() - started)


async def run(turns: int, rounds: int) -> dict[str, Any]:
    with database_url(DATA_DIR / "pg-bench") as server_url, scratch_database(server_url) as url:
        kwargs = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}
        pool: AsyncConnectionPool[Any] = AsyncConnectionPool(url, open=False, max_size=10, kwargs=kwargs)
        async with pool:
            savers = {"langgraph_saver": AsyncPostgresSaver(pool), "pooled_saver": PooledSaver(pool)}
            await savers["pooled_saver"].setup()
            report: dict[str, Any] = {}
            for conversations in (1, 20):
                samples: dict[str, list[float]] = {name: [] for name in savers}
                rates: dict[str, list[float]] = {name: [] for name in savers}
                for _ in range(rounds):
                    for name, saver in savers.items():
                        durations, rate = await measure(saver, conversations, turns)
                        samples[name] += durations
                        rates[name].append(rate)
                figures = {
                    name: {
                        **percentiles(samples[name]),
                        "turns_per_second": round(statistics.median(rates[name]), 1),
                    }
                    for name in savers
                }
                figures["pooled_over_langgraph"] = {
                    "p50": round(figures["pooled_saver"]["p50_ms"] / figures["langgraph_saver"]["p50_ms"], 2),
                    "p99": round(figures["pooled_saver"]["p99_ms"] / figures["langgraph_saver"]["p99_ms"], 2),
                    "turns_per_second": round(
                        figures["pooled_saver"]["turns_per_second"]
                        / figures["langgraph_saver"]["turns_per_second"],
                        2,
                    ),
                }
                report[f"conversations_{conversations}"] = figures
            return report


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--turns", type=int, default=30, help="turns per conversation per round")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    report = asyncio.run(run(args.turns, args.rounds))
    print(json.dumps({"benchmark": "checkpoints", "pool_size": 10, **report}, indent=2))


if __name__ == "__main__":
    main()
