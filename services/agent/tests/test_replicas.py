"""Two agent replicas behind one convo, ops and PostgreSQL, as the chart runs several: a
conversation stays correct when its turns and its confirmation land on different replicas (a pod
restarted, affinity lost, a rolling update)."""

import asyncio
import uuid

from sstools.devstack.agentstack import AgentStack, another_replica, dump, new_conversation
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
