"""The chat end to end through gradio_client: real router, ops, two Superset instances and
PostgreSQL behind the agent, with the offline model (no LLM endpoint configured)."""

import asyncio
import re
import signal
import uuid
from pathlib import Path
from typing import Any

import httpx
from opentelemetry.sdk.trace import TracerProvider
from sqlalchemy import text

from sstools.agent.ui.client import chat_client
from sstools.common.db import create_engine
from sstools.common.grpc_auth import as_user
from sstools.convo.v1 import convo_pb2, convo_pb2_grpc
from sstools.devstack.agentstack import (
    AgentStack,
    Reply,
    agent_process,
    dump,
    new_conversation,
    running_stack,
)
from sstools.devstack.keys import SIGNING_KEY, forged_token, service_channel, user_token
from sstools.devstack.superset import Instance
from sstools.devstack.testing import service_process
from sstools.ops.superset import dashboards
from sstools.ops.superset.client import SupersetClient


async def _fresh_dashboard(dev: SupersetClient) -> tuple[int, str]:
    title = f"Release {uuid.uuid4().hex[:8]}"
    created = await dashboards.create(dev, title, None, True)
    return created.id, title


async def _in_prod(prod: SupersetClient, title: str) -> int:
    return (await dashboards.search(prod, text=title)).count


async def _set_active(database_url: str, username: str, active: bool) -> None:
    engine = create_engine(database_url)
    try:
        async with engine.begin() as connection:
            await connection.execute(
                text("UPDATE ops_users SET is_active = :active WHERE username = :name"),
                {"active": active, "name": username},
            )
    finally:
        await engine.dispose()


async def test_a_question_about_problems_streams_the_health_read_then_an_answer(
    agent_stack: AgentStack, conversation: str
) -> None:
    reply = await agent_stack.say("покажи дашборды с проблемами валидации", conversation)
    assert reply.of("routing")[0]["tier"] in ("keyword", "hybrid")  # the router service answered
    started = [event["tool"] for event in reply.of("tool_start")]
    assert started == ["get_health_summary"], dump(reply)  # the dashboards with problems: one read
    assert [event["tool"] for event in reply.of("tool_end")] == ["get_health_summary"]
    kinds = reply.types
    assert kinds.index("tool_start") < kinds.index("tool_end") < kinds.index("token") < kinds.index("state")
    assert "Legacy uptime" in reply.text
    assert reply.state == "issues_found"


async def test_an_environment_ops_does_not_have_is_refused_before_anything_runs(
    agent_stack: AgentStack, conversation: str
) -> None:
    reply = await agent_stack.say("покажи дашборды", conversation, env_id="staging")  # not configured
    assert [error["code"] for error in reply.of("error")] == ["INVALID_ENVIRONMENT"], dump(reply)
    refused = reply.of("error")[0]
    assert refused["message"] == "Окружения «staging» нет. Спросите «какие есть окружения?»."  # as asked
    assert "staging" in refused["detail"]  # the technical words, for the debug view
    english = await agent_stack.say("show dashboards", conversation, env_id="staging")
    assert english.of("error")[0]["message"].startswith("There is no environment “staging”"), dump(english)
    assert reply.of("tool_start") == []
    assert reply.of("routing") == []
    assert reply.state == "failed"


async def test_a_user_past_the_turn_limit_is_told_how_long_to_wait_and_others_chat_on(
    supersets: dict[str, Instance], fresh_database_url: str, tracer_provider: TracerProvider, tmp_path: Path
) -> None:
    async with running_stack(
        supersets, fresh_database_url, tracer_provider, tmp_path, turns_per_user=2, turns_window_seconds=600
    ) as stack:
        conversation = new_conversation()
        for _ in range(2):
            assert (await stack.say("покажи дашборды", conversation)).state == "success"
        refused = await stack.say("покажи дашборды", conversation)
        assert [error["code"] for error in refused.of("error")] == ["RATE_LIMITED"], dump(refused)
        assert 1 <= refused.of("error")[0]["retry_after"] <= 600
        assert (refused.of("routing"), refused.of("tool_start"), refused.state) == ([], [], "failed")
        kept = [(row["decision"], row["code"]) for row in await stack.audit(conversation)]
        assert kept == [("allowed", "")] * 2 + [("refused", "RATE_LIMITED")]
        other = await stack.say("покажи дашборды", new_conversation(), username="anna")
        assert other.state == "success", dump(other)


async def test_a_failing_tool_is_explained(agent_stack: AgentStack, conversation: str) -> None:
    missing = str(uuid.uuid4())
    reply = await agent_stack.say(f"какой статус задачи {missing}", conversation)
    errors = reply.of("tool_error")
    assert [error["tool"] for error in errors] == ["get_task_status"], dump(reply)
    assert errors[0]["error"]["code"] == "task_not_found"
    assert reply.text.startswith("Задачи с таким id нет"), reply.text  # the cause and what to do, in Russian
    assert reply.state == "failed"


async def test_deploy_pauses_until_confirmed_then_runs_once(
    agent_stack: AgentStack, conversation: str, dev: SupersetClient, prod: SupersetClient
) -> None:
    dashboard_id, title = await _fresh_dashboard(dev)
    paused = await agent_stack.say(f"задеплой дашборд {dashboard_id} из dev в prod", conversation)
    card = paused.of("confirm_required")
    assert len(card) == 1, dump(paused)
    assert card[0]["tool_name"] == "deploy_dashboard"
    assert card[0]["tool_args"] == {"dashboard_id": dashboard_id, "env_id": "prod", "source_env": "dev"}
    assert (card[0]["risk_level"], card[0]["dangerous"], card[0]["env_context"]) == (
        "dangerous",
        True,
        "prod",
    )
    assert card[0]["thread_id"] == conversation
    assert paused.of("tool_start") == []
    assert paused.state == "needs_confirmation"
    assert await _in_prod(prod, title) == 0  # nothing happened yet

    confirmed = await agent_stack.say("", conversation, action="confirm")
    assert [event["tool"] for event in confirmed.of("tool_start")] == ["deploy_dashboard"], dump(confirmed)
    assert confirmed.state == "success", dump(confirmed)
    assert await _in_prod(prod, title) == 1
    # its task ended within the tool's wait (the default one): its id is kept all the same
    task_id = confirmed.of("state")[0]["task_id"]
    assert uuid.UUID(task_id)
    record = (await agent_stack.audit(conversation))[-1]
    assert (record["action"], record["decision"], record["task_id"]) == ("confirm", "confirmed", task_id)

    again = await agent_stack.say("", conversation, action="confirm")  # a lost answer, sent again
    assert again.of("tool_start") == [], dump(again)
    assert again.of("error") == [], dump(again)
    assert [(event["tool"], event["replayed"]) for event in again.of("tool_end")] == [
        ("deploy_dashboard", True)
    ]
    assert again.of("tool_end")[0]["output"] == confirmed.of("tool_end")[0]["output"]
    assert again.of("state") == confirmed.of("state")
    assert await _in_prod(prod, title) == 1
    replay = (await agent_stack.audit(conversation))[-1]
    assert (replay["decision"], replay["code"], replay["task_id"]) == ("confirmed", "replayed", task_id)


async def test_twenty_concurrent_confirms_deploy_once(
    agent_stack: AgentStack, conversation: str, dev: SupersetClient, prod: SupersetClient
) -> None:
    dashboard_id, title = await _fresh_dashboard(dev)
    paused = await agent_stack.say(f"deploy dashboard {dashboard_id} from dev to prod", conversation)
    assert paused.state == "needs_confirmation", dump(paused)
    replies = await asyncio.gather(*(agent_stack.say("", conversation, action="confirm") for _ in range(20)))
    ran = [reply for reply in replies if reply.of("tool_start")]
    assert len(ran) == 1
    for other in (reply for reply in replies if not reply.of("tool_start")):
        # still busy with the first, or that first one's answer again
        assert [error["code"] for error in other.of("error")] == ["BUSY"] or (
            other.of("tool_end")[0]["replayed"] is True
        ), dump(other)
    assert await _in_prod(prod, title) == 1


async def test_reject_deploys_nothing(
    agent_stack: AgentStack, conversation: str, dev: SupersetClient, prod: SupersetClient
) -> None:
    dashboard_id, title = await _fresh_dashboard(dev)
    await agent_stack.say(f"задеплой дашборд {dashboard_id} в prod", conversation)
    rejected = await agent_stack.say("", conversation, action="reject")
    assert rejected.of("tool_start") == []
    assert rejected.state == "cancelled", dump(rejected)
    assert rejected.text.startswith("Отменено"), rejected.text
    assert await _in_prod(prod, title) == 0
    late = await agent_stack.say("", conversation, action="confirm")  # the card was rejected
    assert late.of("tool_start") == []
    assert [error["code"] for error in late.of("error")] == ["NOTHING_PENDING"]
    assert await _in_prod(prod, title) == 0


async def test_two_changes_asked_at_once_are_made_in_order_each_on_its_own_card(
    agent_stack: AgentStack, conversation: str
) -> None:
    paused = await agent_stack.say("сделай бэкап prod и начни техработы", conversation)
    assert [card["tool_name"] for card in paused.of("confirm_required")] == ["run_backup"], dump(paused)

    backed_up = await agent_stack.say("", conversation, action="confirm")
    assert [event["tool"] for event in backed_up.of("tool_start")] == ["run_backup"], dump(backed_up)
    # the backup made, the second change waits for a card of its own, in the same environment
    (card,) = backed_up.of("confirm_required")
    assert (card["tool_name"], card["tool_args"]["env_id"], card["dangerous"]) == (
        "start_maintenance",
        "prod",
        True,
    )
    assert backed_up.state == "needs_confirmation", dump(backed_up)

    started = await agent_stack.say("", conversation, action="confirm")
    assert [event["tool"] for event in started.of("tool_start")] == ["start_maintenance"], dump(started)
    assert started.state == "success", dump(started)
    # both outcomes said, in order: the backup's task, then the window now open
    backup_said, window_said = (
        started.text.find("Задача backup выполнена"),
        started.text.find("| prod | идёт |"),
    )
    assert 0 <= backup_said < window_said, started.text
    refused = await agent_stack.say("начни техработы в prod", conversation)  # it is under way now
    assert [card["tool_name"] for card in refused.of("confirm_required")] == ["start_maintenance"]
    again = await agent_stack.say("", conversation, action="confirm")
    assert again.state == "failed", dump(again)
    confirms = [record for record in await agent_stack.audit(conversation) if record["action"] == "confirm"]
    assert [record["tool_name"] for record in confirms] == [
        "run_backup",
        "start_maintenance",
        "start_maintenance",
    ]
    # the first confirm's record: the backup confirmed and made, the next card among its calls
    assert confirms[0]["decision"] == "confirmed", confirms[0]
    assert [(call["tool"], call["decision"]) for call in confirms[0]["calls"]] == [
        ("run_backup", "confirmed"),
        ("start_maintenance", "needs_confirmation"),
    ]


async def test_a_rejected_change_stops_the_ones_asked_after_it_and_says_so(
    agent_stack: AgentStack, conversation: str
) -> None:
    await agent_stack.say("сделай бэкап prod и начни техработы", conversation)
    rejected = await agent_stack.say("", conversation, action="reject")
    assert rejected.of("tool_start") == [], dump(rejected)
    assert rejected.of("confirm_required") == [], dump(rejected)
    assert rejected.text.startswith("Отменено"), rejected.text
    assert "Остальное из запроса не сделано" in rejected.text, rejected.text  # not dropped unsaid
    asked = await agent_stack.say("начни техработы в prod", conversation)  # none was started
    assert [card["tool_name"] for card in asked.of("confirm_required")] == ["start_maintenance"], dump(asked)
    started = await agent_stack.say("", conversation, action="confirm")
    assert started.state == "success", dump(started)


async def test_an_edit_to_another_dashboard_is_shown_by_its_title_then_runs_as_edited(
    agent_stack: AgentStack, conversation: str, dev: SupersetClient, prod: SupersetClient
) -> None:
    first_id, first_title = await _fresh_dashboard(dev)
    second_id, second_title = await _fresh_dashboard(dev)
    asked = await agent_stack.say(f"задеплой дашборд {first_id} из dev в prod", conversation)
    (card,) = asked.of("confirm_required")
    assert card["subject"] == {"env_id": "dev", "dashboards": [{"id": first_id, "title": first_title}]}
    assert f"«{first_title}» (#{first_id}) из dev будет импортирован в prod" in card["change"], card
    # the edit names another dashboard: the person is shown which before anything runs
    edited = await agent_stack.say(f'{{"dashboard_id": {second_id}}}', conversation, action="confirm")
    assert edited.of("tool_start") == [], dump(edited)
    (again,) = edited.of("confirm_required")
    assert again["subject"]["dashboards"] == [{"id": second_id, "title": second_title}]
    confirmed = await agent_stack.say("", conversation, action="confirm")
    assert confirmed.of("tool_start")[0]["input"]["dashboard_id"] == second_id, dump(confirmed)
    assert (await _in_prod(prod, first_title), await _in_prod(prod, second_title)) == (0, 1)


async def test_a_confirm_without_a_checkpoint_is_expired(agent_stack: AgentStack) -> None:
    made_up = {"call_id": "call-1", "digest": "0" * 64}
    reply = await agent_stack.say("", new_conversation(), action="confirm", card=made_up)
    assert [error["code"] for error in reply.of("error")] == ["CHECKPOINT_EXPIRED"]
    assert reply.state == "failed"


async def test_an_archived_conversation_takes_no_turn_and_no_confirm_and_keeps_no_checkpoint(
    agent_stack: AgentStack, conversation: str, dev: SupersetClient, prod: SupersetClient
) -> None:
    dashboard_id, title = await _fresh_dashboard(dev)
    paused = await agent_stack.say(f"задеплой дашборд {dashboard_id} из dev в prod", conversation)
    assert paused.state == "needs_confirmation", dump(paused)
    checkpoints = "SELECT count(*) AS n FROM checkpoints WHERE thread_id = :id"
    assert (await agent_stack.rows(checkpoints, id=conversation))[0]["n"] > 0
    root = {"Authorization": f"Bearer {agent_stack.token('root')}"}
    async with httpx.AsyncClient(base_url=agent_stack.convo_url, headers=root, timeout=30) as convo:
        assert (await convo.delete(f"/api/assistant/conversations/{conversation}")).status_code == 200

        for action, text in (("send", "покажи дашборды"), ("confirm", "")):
            refused = await agent_stack.say(text, conversation, action=action)
            codes = [error["code"] for error in refused.of("error")]
            assert codes == ["CONVERSATION_ARCHIVED"], dump(refused)
            assert refused.of("error")[0]["message"].startswith("Беседа в архиве"), dump(refused)
            assert (refused.of("routing"), refused.of("tool_start"), refused.state) == ([], [], "failed")
        assert (await agent_stack.rows(checkpoints, id=conversation))[0]["n"] == 0
        assert await _in_prod(prod, title) == 0  # the card waiting when it was archived never runs
        said = "SELECT content FROM agent_messages WHERE conversation_id = :id AND role = 'user' ORDER BY seq"
        assert [row["content"] for row in await agent_stack.rows(said, id=conversation)] == [
            f"задеплой дашборд {dashboard_id} из dev в prod"
        ]
        decisions = await agent_stack.rows(
            "SELECT decision, outcome FROM assistant_audit WHERE conversation_id = :id ORDER BY created_at",
            id=conversation,
        )
        assert decisions[-2:] == [{"decision": "refused", "outcome": "failed"}] * 2

        assert (await convo.post(f"/api/assistant/conversations/{conversation}/restore")).status_code == 200
    again = await agent_stack.say("покажи дашборды", conversation)
    assert again.state == "success", dump(again)


async def test_a_pronoun_takes_the_dashboard_from_the_thread(
    agent_stack: AgentStack, conversation: str
) -> None:
    await agent_stack.say("покажи здоровье дашборда 3", conversation)
    reply = await agent_stack.say("провалидируй его", conversation)
    cards = reply.of("confirm_required")  # it keeps a report: a write, confirmed first
    assert [(card["tool_name"], card["tool_args"]["dashboard_id"]) for card in cards] == [
        ("run_llm_validation", 3)
    ], dump(reply)

    other = await agent_stack.say("провалидируй его", new_conversation())
    # A new conversation knows nothing of the old one: no dashboard to validate.
    assert other.of("confirm_required") == [], dump(other)
    # nothing ran for dashboard 3 either (run_llm_validation names it by "dashboard_id")
    assert [(event["tool"], event["input"]) for event in other.of("tool_start")] == [], dump(other)


async def test_a_missing_or_forged_token_is_refused(agent_stack: AgentStack, conversation: str) -> None:
    def submit(headers: dict[str, str]) -> list[dict[str, Any]]:
        job = chat_client(agent_stack.chat_url, headers).submit(
            "покажи дашборды", conversation, "send", "dev", "", "", api_name="/chat"
        )
        return list(job.result(timeout=60))

    forged = (forged_token("root"), forged_token("root", kid=SIGNING_KEY.kid))  # not ops' key
    for headers in (
        {},
        {"Authorization": "Bearer not-a-jwt"},
        *({"Authorization": f"Bearer {token}"} for token in forged),
    ):
        messages = await asyncio.to_thread(submit, headers)
        assert messages[0]["metadata"]["code"] == "UNAUTHORIZED", headers
    # each refusal is kept, for no one: a token not taken names no one to trust
    refusals = await agent_stack.rows(
        "SELECT user_id, action, decision, code, outcome FROM assistant_audit WHERE conversation_id = :id",
        id=conversation,
    )
    unauthorized = {"action": "send", "decision": "refused", "code": "UNAUTHORIZED", "outcome": "failed"}
    assert refusals == [{"user_id": ""} | unauthorized] * 4


async def test_a_disabled_user_is_refused_before_anything_of_the_turn_runs(agent_stack: AgentStack) -> None:
    conversation = new_conversation()
    await _set_active(agent_stack.database_url, "anna", False)
    reply = await agent_stack.say("покажи дашборды с проблемами валидации", conversation, username="anna")
    assert [error["code"] for error in reply.of("error")] == ["UNAUTHORIZED"], dump(reply)
    assert (reply.of("routing"), reply.of("tool_start"), reply.state) == ([], [], "failed")
    (record,) = await agent_stack.audit(conversation)
    assert (record["user_id"], record["decision"], record["code"]) == ("anna", "refused", "UNAUTHORIZED")


async def test_a_user_disabled_mid_conversation_is_refused_by_agent_and_convo_within_the_check_bound(
    supersets: dict[str, Instance], fresh_database_url: str, tracer_provider: TracerProvider, tmp_path: Path
) -> None:
    """Their access token still verifies; ops' word that they are active is kept one second."""
    bound = 1.0
    async with (
        running_stack(
            supersets, fresh_database_url, tracer_provider, tmp_path, account_check_seconds=bound
        ) as stack,
        httpx.AsyncClient(
            base_url=stack.convo_url, headers={"Authorization": f"Bearer {stack.token('anna')}"}, timeout=30
        ) as convo,
    ):
        conversation = new_conversation()
        assert (await stack.say("покажи дашборды", conversation, username="anna")).state == "success"
        assert (await convo.get("/api/assistant/conversations")).status_code == 200  # both remember anna

        await _set_active(fresh_database_url, "anna", False)
        await asyncio.sleep(bound + 0.5)
        refused = await stack.say("покажи дашборды", conversation, username="anna")
        assert [error["code"] for error in refused.of("error")] == ["UNAUTHORIZED"], dump(refused)
        assert (refused.of("routing"), refused.of("tool_start"), refused.state) == ([], [], "failed")
        listing = await convo.get("/api/assistant/conversations")
        assert (listing.status_code, listing.json()["detail"]["code"]) == (401, "user_inactive")
        history = await convo.get(f"/api/assistant/conversations/{conversation}/history")
        assert history.status_code == 401

        await _set_active(fresh_database_url, "anna", True)  # a refusal is not remembered
        assert (await convo.get("/api/assistant/conversations")).status_code == 200
        assert (await stack.say("покажи дашборды", conversation, username="anna")).state == "success"


async def test_a_confirmation_survives_the_agent_being_killed(
    agent_stack: AgentStack, conversation: str, dev: SupersetClient, prod: SupersetClient
) -> None:
    """Pause in one agent process, SIGKILL it, confirm in a new one: the checkpoint carries it."""
    dashboard_id, title = await _fresh_dashboard(dev)
    settings = agent_stack.agent_settings
    environment, url, metrics_port = agent_process(settings)
    with service_process("agent", environment, metrics_port) as first:
        paused = await _say_at(agent_stack, url, f"задеплой дашборд {dashboard_id} в prod", conversation)
        assert paused.state == "needs_confirmation", dump(paused)
        first.send_signal(signal.SIGKILL)
        first.wait(10)
    with service_process("agent", environment, metrics_port):
        confirmed = await _say_at(agent_stack, url, "", conversation, action="confirm")
        assert confirmed.state == "success", dump(confirmed)
    assert await _in_prod(prod, title) == 1


async def test_three_conversations_survive_an_agent_restart(
    agent_stack: AgentStack, dev: SupersetClient
) -> None:
    """Story 5: history in convo, context in the checkpoint, both outlive the agent process."""
    settings = agent_stack.agent_settings
    environment, url, metrics_port = agent_process(settings)
    conversations = {new_conversation(): dashboard for dashboard in (1, 2, 3)}
    with service_process("agent", environment, metrics_port):
        for conversation, dashboard in conversations.items():
            first = await _say_at(agent_stack, url, f"покажи здоровье дашборда {dashboard}", conversation)
            (health,) = first.of("tool_end")
            assert first.state == ("issues_found" if health["output"]["broken_charts"] else "success"), dump(
                first
            )
    with service_process("agent", environment, metrics_port):
        for conversation, dashboard in conversations.items():
            follow_up = await _say_at(agent_stack, url, "провалидируй его", conversation)
            cards = follow_up.of("confirm_required")
            assert [card["tool_args"]["dashboard_id"] for card in cards] == [dashboard], dump(follow_up)
    async with service_channel(settings.convo_target) as channel:
        stub = convo_pb2_grpc.ConversationServiceStub(channel)
        for conversation, dashboard in conversations.items():
            history = await stub.GetHistory(
                convo_pb2.GetHistoryRequest(conversation_id=conversation),
                metadata=as_user(user_token("root")),
            )
            roles = [message.role for message in history.messages]
            assert roles == ["user", "assistant", "user", "assistant"]
            assert history.messages[0].content == f"покажи здоровье дашборда {dashboard}"
            # the health of one dashboard, named by its title
            assert re.match(r"В «.+» \(dev\) ", history.messages[1].content), history.messages[1].content
            assert not history.messages[1].partial


async def _say_at(stack: AgentStack, url: str, text: str, conversation: str, action: str = "send") -> Reply:
    client = chat_client(url, {"Authorization": f"Bearer {stack.token('root')}"})
    return await stack.say(text, conversation, action=action, client=client)


async def test_inputs_that_are_not_text_are_refused_typed(agent_stack: AgentStack, conversation: str) -> None:
    """Gradio hands the handler the inputs as a client sent them (no Textbox preprocessing): an
    object or a list where text belongs is read as its text and refused as any bad text is."""

    def submit(ui_context: object, files: object) -> list[dict[str, Any]]:
        job = agent_stack.client().submit(
            "покажи дашборды", conversation, "send", "dev", ui_context, files, api_name="/chat"
        )
        return list(job.result(timeout=120))

    for ui_context, files, code in (
        ({"envId": "dev"}, "", "INVALID_UI_CONTEXT"),
        ("", ["not-an-upload-id"], "UPLOAD_NOT_FOUND"),
    ):
        reply = Reply(await asyncio.to_thread(submit, ui_context, files))
        assert [error["code"] for error in reply.of("error")] == [code], dump(reply)
        assert reply.state == "failed"
