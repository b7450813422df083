"""The same flows with ChatOpenAI against a scripted OpenAI-compatible server on a socket:
streamed tokens, streamed tool calls, the confirmation pause, and the model's failures."""

import uuid

from sstools.devstack.fake_llm import FakeLlm, Reply, ToolCall

from .conftest import AgentStack, dump


async def test_streamed_tool_calls_run_and_the_answer_streams(
    llm_stack: AgentStack, llm: FakeLlm, conversation: str
) -> None:
    llm.says(
        Reply(tool_calls=(ToolCall("get_health_summary", {"env_id": "dev"}),)),
        Reply(content="В dev сломан один чарт: Legacy uptime.", chunk_size=3),
    )
    reply = await llm_stack.say("что сломано в dev?", conversation)
    assert [event["tool"] for event in reply.of("tool_start")] == ["get_health_summary"], dump(reply)
    assert reply.text == "В dev сломан один чарт: Legacy uptime."
    assert len([m for m in reply.messages if m["metadata"]["type"] == "token"]) == 1  # one growing answer
    assert reply.state == "success"
    assert reply.of("conversation")[0]["model"] == "scripted"
    first, second = llm.requests[-2:]
    assert first["stream"] is True
    offered = {tool["function"]["name"] for tool in first["tools"]}
    assert "get_health_summary" in offered
    assert "deploy_dashboard" not in offered  # only what the router picked for this message
    assert second["messages"][-1]["role"] == "tool"  # the tool's result went back to the model


async def test_a_deploy_the_model_asks_for_waits_for_confirmation(
    llm_stack: AgentStack, llm: FakeLlm, conversation: str
) -> None:
    llm.says(
        Reply(
            tool_calls=(
                ToolCall(
                    "deploy_dashboard", {"dashboard_id": 1, "env_id": "production", "source_env": "dev"}
                ),
            )
        )
    )
    paused = await llm_stack.say("deploy dashboard 1 to production", conversation)
    card = paused.of("confirm_required")
    assert len(card) == 1, dump(paused)
    assert (card[0]["env_context"], card[0]["risk_level"]) == ("prod", "dangerous")
    assert paused.state == "needs_confirmation"
    llm.says(Reply(content="Rejected, nothing was deployed."))
    rejected = await llm_stack.say("", conversation, action="reject")
    assert rejected.of("tool_start") == []
    assert rejected.text == "Rejected, nothing was deployed."
    assert "rejected" in llm.requests[-1]["messages"][-1]["content"]


async def test_a_failing_model_ends_the_turn_with_an_error(llm_stack: AgentStack, llm: FakeLlm) -> None:
    llm.says(Reply(status=500), Reply(status=500), Reply(status=500))
    reply = await llm_stack.say("покажи дашборды", str(uuid.uuid4()))
    assert reply.of("error"), dump(reply)
    assert reply.state == "failed"
