"""Two agent replicas behind one convo, ops and PostgreSQL, as the chart runs several: a
conversation stays correct when its turns and its confirmation land on different replicas (a pod
restarted, affinity lost, a rolling update)."""

import asyncio
import contextlib
import dataclasses
import itertools
import re
import signal
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from opentelemetry.sdk.trace import TracerProvider

from sstools.devstack.agentstack import (
    AgentStack,
    Reply,
    agent_process,
    another_replica,
    dump,
    new_conversation,
    running_stack,
)
from sstools.devstack.superset import Instance
from sstools.devstack.testing import service_process
from sstools.ops import jobs
from sstools.ops.store import tables as ops_tables
from sstools.ops.superset import dashboards
from sstools.ops.superset.client import SupersetClient


async def _deployed(prod: SupersetClient, title: str) -> int:
    return (await dashboards.search(prod, text=title)).count


async def test_a_conversation_stays_whole_across_two_replicas(
    agent_stack: AgentStack, dev: SupersetClient, prod: SupersetClient
) -> None:
    first = agent_stack  # a stack of the test's own: the replicas share its convo, ops and checkpoints
    async with another_replica(first) as second:
        assert first.chat_url != second.chat_url
        conversation = new_conversation()

        # what one replica was told, the other knows: the thread lives in the shared checkpoints
        await first.say("покажи здоровье дашборда 3", conversation)
        followed = await second.say("провалидируй его", conversation)
        cards = followed.of("confirm_required")
        assert [(card["tool_name"], card["tool_args"]["dashboard_id"]) for card in cards] == [
            ("run_llm_validation", 3)
        ], dump(followed)
        assert (await first.say("", conversation, action="reject")).state == "cancelled"

        # a card shown by one replica, confirmed on both at once: it runs once
        title = f"Replicas {uuid.uuid4().hex[:8]}"
        dashboard_id = (await dashboards.create(dev, title, None, True)).id
        paused = await first.say(f"задеплой дашборд {dashboard_id} из dev в prod", conversation)
        assert paused.state == "needs_confirmation", dump(paused)
        replies = await asyncio.gather(
            *(replica.say("", conversation, action="confirm") for replica in (first, second) * 5)
        )
        ran = [reply for reply in replies if reply.of("tool_start")]
        assert len(ran) == 1, [dump(reply) for reply in replies]
        for other in (reply for reply in replies if not reply.of("tool_start")):
            busy = [error["code"] for error in other.of("error")] == ["BUSY"]
            assert busy or other.of("tool_end")[0]["replayed"] is True, dump(other)
        assert await _deployed(prod, title) == 1
        again = await second.say("", conversation, action="confirm")  # its reply lost: sent again
        assert [event["replayed"] for event in again.of("tool_end")] == [True], dump(again)
        assert await _deployed(prod, title) == 1

        # one turn at a time, whichever replica takes the next: the lease is convo's, not a pod's
        records = await first.audit(conversation)
        confirms = [record["code"] for record in records if record["decision"] == "confirmed"]
        assert confirms.count("") == 1  # the one that ran; the others were told its answer
        assert set(confirms) <= {"", "replayed"}
        assert {record["user_id"] for record in records} == {"root"}


async def test_a_card_waiting_when_its_replica_stops_is_confirmed_on_another(
    agent_stack: AgentStack, dev: SupersetClient, prod: SupersetClient
) -> None:
    title = f"Rollout {uuid.uuid4().hex[:8]}"
    dashboard_id = (await dashboards.create(dev, title, None, True)).id
    conversation = new_conversation()
    async with another_replica(agent_stack) as leaving:
        paused = await leaving.say(f"задеплой дашборд {dashboard_id} из dev в prod", conversation)
        assert paused.state == "needs_confirmation", dump(paused)
    # that replica is gone (a rolling update): the card is answered on the one that stays
    confirmed = await agent_stack.say(
        "", conversation, action="confirm", card=paused.of("confirm_required")[0]
    )
    assert [event["tool"] for event in confirmed.of("tool_start")] == ["deploy_dashboard"], dump(confirmed)
    assert await _deployed(prod, title) == 1


CONVERSATIONS = 20
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


class RoundRobin:
    """A balancer without affinity: each command goes to the next replica in turn, whichever
    replica its conversation's last command went to. (Within one command — one Gradio session —
    a balancer must keep its requests together: Gradio's queue is a process's own.)"""

    def __init__(self, replicas: list[AgentStack]) -> None:
        self._next = itertools.cycle(replicas)
        self.sent: Counter[str] = Counter()

    def replica(self) -> AgentStack:
        chosen = next(self._next)
        self.sent[chosen.chat_url] += 1
        return chosen


@dataclass
class Deploys:
    """The dashboards each conversation deploys, made fresh in dev: index → (id, title)."""

    made: dict[int, tuple[int, str]] = field(default_factory=dict)

    @classmethod
    async def create(cls, dev: SupersetClient, run: str) -> "Deploys":
        deploys = cls()
        for index in range(CONVERSATIONS):
            title = f"{run} {index} {uuid.uuid4().hex[:6]}"
            deploys.made[index] = ((await dashboards.create(dev, title, None, True)).id, title)
        return deploys


async def _command(balancer: RoundRobin, text: str, conversation: str, action: str = "send") -> Reply:
    """One command on the next replica; one whose replica is down, or refused BUSY while the turn
    before it lets go of the conversation, goes to the next after a pause, as the page sends it
    again."""
    last: object = None
    for attempt in range(6):
        replica = balancer.replica()
        try:
            reply = await replica.say(text, conversation, action=action)
        except (httpx.HTTPError, OSError, ValueError) as problem:  # the replica was not there
            last = problem
            continue
        if [error["code"] for error in reply.of("error")] != ["BUSY"]:
            return reply
        last = dump(reply)
        await asyncio.sleep(0.5 * 2**attempt)
    raise AssertionError(f"no replica answered {text!r}: {last!r}")


# A read that runs seconds in SQLite: long enough to be stopped while it runs.
SLOW_READ = (
    "run this SQL in the examples database on dev: WITH RECURSIVE c AS "
    "(SELECT 1 AS x UNION ALL SELECT x + 1 FROM c WHERE x < 10000000) SELECT count(*) AS n FROM c"
)


async def _stopped(balancer: RoundRobin, text: str, conversation: str) -> None:
    """A command stopped by the person (the page's Stop) once its statement has started: the
    stream is cancelled on the replica that runs it, whichever that is."""
    replica = balancer.replica()

    def start_and_stop() -> None:
        job = replica.client().submit(text, conversation, "send", "dev", "", "", api_name="/chat")
        for output in job:
            started = [
                (message.get("metadata") or {}).get("tool")
                for message in output
                if (message.get("metadata") or {}).get("type") == "tool_start"
            ]
            if "superset_execute_sql" in started:
                job.cancel()
                return
        raise AssertionError(f"the answer ended before it could be stopped: {job.outputs()[-1:]}")

    await asyncio.to_thread(start_and_stop)


async def _opened(balancer: RoundRobin, index: int, conversation: str, deploys: Deploys) -> None:
    """A read, then a deploy left waiting for its confirmation."""
    read = await _command(balancer, f"покажи здоровье дашборда {1 + index % 3}", conversation)
    assert read.state in ("success", "issues_found"), dump(read)
    paused = await _command(
        balancer, f"задеплой дашборд {deploys.made[index][0]} из dev в prod", conversation
    )
    assert paused.state == "needs_confirmation", dump(paused)


async def _answered(balancer: RoundRobin, index: int, conversation: str) -> None:
    """The card confirmed (even conversations) or rejected (odd) and a slow read stopped while it
    runs, then one more read."""
    action = "confirm" if index % 2 == 0 else "reject"
    answer = await _command(balancer, "", conversation, action=action)
    assert answer.state == ("success" if action == "confirm" else "cancelled"), dump(answer)
    if action == "reject":
        await _stopped(balancer, SLOW_READ, conversation)
    read = await _command(balancer, f"покажи здоровье дашборда {1 + (index + 1) % 3}", conversation)
    assert read.state in ("success", "issues_found"), dump(read)


async def _histories(
    stack: AgentStack, conversations: list[str], deploys: Deploys
) -> list[list[tuple[str, str, bool]]]:
    """Each conversation's history in convo (role, text, cut short), its run's own names (the
    deployed dashboard's id and title, ids) replaced, so that two runs of the same commands
    compare equal."""
    histories = []
    async with httpx.AsyncClient(base_url=stack.convo_url, timeout=30) as http:
        for index, conversation in enumerate(conversations):
            reply = await http.get(
                f"/api/assistant/conversations/{conversation}/history",
                params={"limit": 100},
                headers={"Authorization": f"Bearer {stack.token('root')}"},
            )
            assert reply.status_code == 200, reply.text
            dashboard_id, title = deploys.made[index]
            histories.append(
                [
                    (item["role"], _own_names_out(item["content"], dashboard_id, title), item["partial"])
                    for item in reply.json()["items"]
                ]
            )
    return histories


def _own_names_out(text: str, dashboard_id: int, title: str) -> str:
    """``text`` without what differs between two runs of the same commands: the dashboard made for
    the conversation (its title, its id) and the ids of what ran (a backup's, a task's)."""
    plain = text.replace("\\", "").replace(title, "<title>")  # Markdown escapes a title's or id's marks
    plain = plain.replace(f"#{dashboard_id}", "#<deployed>").replace(
        f"дашборд {dashboard_id} ", "дашборд <deployed> "
    )
    return UUID.sub("<id>", plain)


async def _deploys_run(stack: AgentStack, deploys: Deploys) -> list[int]:
    """How many deploy tasks ops started for each conversation's dashboard."""
    rows = await stack.rows(
        f"SELECT params->>'dashboard_id' AS dashboard FROM {ops_tables.tasks.name} WHERE kind = :kind",
        kind=jobs.DEPLOY,
    )
    started = Counter(row["dashboard"] for row in rows)
    return [started[str(dashboard_id)] for dashboard_id, _ in deploys.made.values()]


@pytest.mark.timeout(900)  # 160 commands and two starts of a replica on 2 cores
async def test_twenty_conversations_round_robin_over_two_replicas_one_killed_midway(
    supersets: dict[str, Instance],
    fresh_database_url: str,
    tracer_provider: TracerProvider,
    tmp_path: Path,
    dev: SupersetClient,
    prod: SupersetClient,
) -> None:
    """The chart's replicas without affinity: 20 conversations whose commands (reads, deploys,
    confirms, rejects, a read stopped while it runs) alternate between two agent processes
    sharing convo, router, ops and PostgreSQL; one replica SIGKILLed with every card waiting and
    started again. Every card is answered wherever its answer lands, no deploy runs twice, and
    every conversation's history is the one a single replica gives for the same commands."""
    # 80 health reads a run, by one person: past ops' budget of heavy reads a minute
    reads = {"heavy_reads_per_minute": 1000}
    async with running_stack(
        supersets, fresh_database_url, tracer_provider, tmp_path, ops_overrides=reads
    ) as stack:
        await _round_robin(stack, dev, prod)


async def _round_robin(agent_stack: AgentStack, dev: SupersetClient, prod: SupersetClient) -> None:
    environment, url, metrics_port = agent_process(agent_stack.agent_settings)
    process_replica = dataclasses.replace(agent_stack, chat_url=url)
    limit = asyncio.Semaphore(4)  # commands at once: 2 cores serve both replicas and the stack

    async def each(step: Any, balancer: RoundRobin, conversations: list[str], *extra: Any) -> None:
        async def one(index: int) -> None:
            async with limit:
                await step(balancer, index, conversations[index], *extra)

        await asyncio.gather(*(one(index) for index in range(CONVERSATIONS)))

    # two replicas, the second killed midway
    deploys = await Deploys.create(dev, "Round robin")
    conversations = [new_conversation() for _ in range(CONVERSATIONS)]
    balancer = RoundRobin([agent_stack, process_replica])
    with contextlib.ExitStack() as processes:
        second = await asyncio.to_thread(
            processes.enter_context, service_process("agent", environment, metrics_port)
        )
        await each(_opened, balancer, conversations, deploys)
        second.send_signal(signal.SIGKILL)  # 20 cards waiting, half of them shown by this replica
        await asyncio.to_thread(second.wait, 10)
    with contextlib.ExitStack() as processes:
        await asyncio.to_thread(processes.enter_context, service_process("agent", environment, metrics_port))
        await each(_answered, balancer, conversations)
    # each replica took half of the 90 commands (one sent again after BUSY counts again)
    fewer, more = sorted(balancer.sent.values())
    assert (more - fewer <= 1, fewer + more >= CONVERSATIONS * 4 + CONVERSATIONS // 2) == (True, True), (
        balancer.sent
    )

    # one replica, the same commands
    alone = await Deploys.create(dev, "One replica")
    by_one = [new_conversation() for _ in range(CONVERSATIONS)]
    single = RoundRobin([agent_stack])
    await each(_opened, single, by_one, alone)
    await each(_answered, single, by_one)

    assert await _deploys_run(agent_stack, deploys) == [1, 0] * (CONVERSATIONS // 2)
    assert await _deploys_run(agent_stack, alone) == [1, 0] * (CONVERSATIONS // 2)
    for index, (dashboard_id, title) in deploys.made.items():
        assert (await dashboards.search(prod, text=title)).count == (1 - index % 2), dashboard_id
    two, one = (
        await _histories(agent_stack, conversations, deploys),
        await _histories(agent_stack, by_one, alone),
    )
    # three messages and four answers each (a card's answer is no message of the person's), and
    # the stopped read, its answer cut short, where the card was rejected
    confirmed = ["user", "assistant", "user", "assistant", "assistant", "user", "assistant"]
    rejected = [*confirmed[:5], "user", "assistant", *confirmed[5:]]
    assert [[role for role, _, _ in history] for history in two] == [confirmed, rejected] * (
        CONVERSATIONS // 2
    )
    assert [[partial for _, _, partial in history].count(True) for history in two] == [0, 1] * (
        CONVERSATIONS // 2
    )  # the stopped read's answer, and no other, is cut short
    for index in range(CONVERSATIONS):
        assert two[index] == one[index], (index, two[index], one[index])
