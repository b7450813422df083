"""Two agent replicas behind one convo, ops and PostgreSQL, as the chart runs several: a
conversation stays correct when its turns and its confirmation land on different replicas (a pod
restarted, affinity lost, a rolling update)."""

import asyncio
import uuid
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import TracerProvider

from sstools.devstack.agentstack import (
    AgentStack,
    another_replica,
    dump,
    new_conversation,
    running_stack,
)
from sstools.devstack.replicas import round_robin
from sstools.devstack.superset import Instance
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


@pytest.mark.timeout(900)  # 180 commands and two starts of a replica on 2 cores
async def test_twenty_conversations_round_robin_over_two_replicas_one_killed_midway(
    supersets: dict[str, Instance],
    fresh_database_url: str,
    tracer_provider: TracerProvider,
    tmp_path: Path,
    dev: SupersetClient,
    prod: SupersetClient,
) -> None:
    """The chart's replicas without affinity (:mod:`sstools.devstack.replicas`): 20 conversations
    whose commands (reads, deploys, confirms, rejects, a read stopped while it runs) alternate
    between two agent processes sharing convo, router, ops and PostgreSQL; one replica SIGKILLed
    with every card waiting and started again. Every card is answered wherever its answer lands,
    no deploy runs twice, and every conversation's history is the one a single replica gives for
    the same commands."""
    # 80 health reads a run, by one person: past ops' budget of heavy reads a minute
    reads = {"heavy_reads_per_minute": 1000}
    async with running_stack(
        supersets, fresh_database_url, tracer_provider, tmp_path, ops_overrides=reads
    ) as stack:
        run = await round_robin(stack, dev, prod, CONVERSATIONS)

    # each replica took half of the 90 commands (one sent again after BUSY counts again)
    fewer, more = sorted(run.two.sent.values())
    assert (more - fewer <= 1, fewer + more >= CONVERSATIONS * 4 + CONVERSATIONS // 2) == (True, True), (
        run.two.sent
    )
    assert run.deploys_run_two == [1, 0] * (CONVERSATIONS // 2)
    assert run.deploys_run_one == [1, 0] * (CONVERSATIONS // 2)
    assert run.deployed_in_prod == [1, 0] * (CONVERSATIONS // 2)
    two, one = run.histories_two, run.histories_one
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
