"""Two agent replicas without affinity (:mod:`sstools.devstack.replicas`, the commands the
replicas test sends): conversations whose reads, deploys, confirms, rejects and stopped reads
alternate between the agent of a stack and a process replica of it that is SIGKILLed with every
card waiting and started again; beside it, the same commands on one replica.

Figures: duplicate executions (deploy tasks started past one per confirmed card, and any for a
rejected one), conversations whose history differs from the one replica's (lost, added or
reordered messages), cards left unanswered, commands per replica and sent again (to a replica
that was down, or refused BUSY), each kind of command's latency p50/p99 on two replicas beside
one, and the seconds the killed replica took to serve again.
Goals: 0 duplicates, 0 histories that differ, 0 cards unanswered.

    .venv/bin/python bench/replicas.py [--conversations 20]
"""

import argparse
import asyncio
import contextlib
import json
import tempfile
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace import TracerProvider
from stats import percentiles

from sstools.devstack.agentstack import running_stack
from sstools.devstack.demo import PASSWORD_ENV, client, local_supersets
from sstools.devstack.keys import serving_jwks
from sstools.devstack.paths import DATA_DIR
from sstools.devstack.postgres import database_url
from sstools.devstack.replicas import RoundRobin, RoundRobinRun, round_robin
from sstools.devstack.superset import Instance, default_home
from sstools.devstack.testing import free_port, scratch_database, scratch_owned_database


def _latency(two: RoundRobin, one: RoundRobin) -> dict[str, Any]:
    figures = {}
    for kind in sorted(two.seconds):
        by_two = percentiles([seconds * 1000 for seconds in two.seconds[kind]])
        by_one = percentiles([seconds * 1000 for seconds in one.seconds[kind]])
        figures[kind] = {
            "two_replicas": by_two,
            "one_replica": by_one,
            "p50_ratio": round(by_two["p50_ms"] / by_one["p50_ms"], 2) if by_one["p50_ms"] else None,
        }
    return figures


def figures(run: RoundRobinRun, conversations: int) -> dict[str, Any]:
    confirmed = [index % 2 == 0 for index in range(conversations)]
    expected = [1 if wanted else 0 for wanted in confirmed]
    return {
        "conversations": conversations,
        "commands": sum(run.two.sent.values()) - sum(run.two.sent_again.values()),
        "commands_per_replica": sorted(run.two.sent.values()),
        "sent_again": dict(run.two.sent_again),
        "duplicate_executions": sum(
            max(ran - wanted, 0) for ran, wanted in zip(run.deploys_run_two, expected, strict=True)
        ),
        "cards_unanswered": sum(
            1 for ran, wanted in zip(run.deployed_in_prod, expected, strict=True) if ran != wanted
        ),
        "histories_differing_from_one_replica": sum(
            1 for two, one in zip(run.histories_two, run.histories_one, strict=True) if two != one
        ),
        "messages_in_history": sum(len(history) for history in run.histories_two),
        "replica_restart_seconds": round(run.restart_seconds, 2),
        "latency": _latency(run.two, run.one),
    }


async def _measure(
    supersets: dict[str, Instance], database: str, folder: Path, conversations: int
) -> dict[str, Any]:
    reads = {"heavy_reads_per_minute": 100_000}  # the health reads of many conversations, one person
    async with (
        contextlib.aclosing(client(supersets["dev"], PASSWORD_ENV)) as dev,
        contextlib.aclosing(client(supersets["prod"], PASSWORD_ENV)) as prod,
        running_stack(supersets, database, TracerProvider(), folder, ops_overrides=reads) as stack,
    ):
        run = await round_robin(stack, dev, prod, conversations)
    return figures(run, conversations)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--conversations", type=int, default=20, help="an even number (half confirm, half reject)"
    )
    arguments = parser.parse_args()
    with (
        tempfile.TemporaryDirectory(prefix="sstools-replicas-") as folder,
        database_url(DATA_DIR / "bench-postgres") as server,
        scratch_owned_database(server) as demo,
        serving_jwks() as published,
        local_supersets(
            default_home(),
            Path(folder),
            {"dev": free_port(), "prod": free_port()},
            postgres=demo,
            ops_jwks_url=published.url,
        ) as supersets,
        scratch_database(server) as fresh,
    ):
        (stack_folder := Path(folder) / "stack").mkdir()
        measured = asyncio.run(_measure(supersets, fresh, stack_folder, arguments.conversations))
    print(json.dumps(measured, indent=2))


if __name__ == "__main__":
    main()
