"""The stream's events as declared: what the producers make is the contract, and what is not the
contract is refused by it (every turn of the agent tests is checked against it in
``AgentStack.say``)."""

import json

import pytest
from langchain_core.messages import ToolMessage
from pydantic import ValidationError

from sstools.agent.events import STREAM_EVENTS, ToolErrorEvent
from sstools.agent.stream import Event, error, final_state, shown, state, tool_result


def test_a_field_at_its_default_is_not_sent_and_a_required_null_is() -> None:
    assert state("success").metadata == {"type": "state", "state": "success"}
    assert state("started", "t-1").metadata == {"type": "state", "state": "started", "task_id": "t-1"}
    said = error("RATE_LIMITED", "wait", retry_after=3).metadata
    assert said == {"type": "error", "code": "RATE_LIMITED", "message": "wait", "retry_after": 3}


def test_what_the_producers_make_validates() -> None:
    ended = ToolMessage(json.dumps({"id": "t-1", "kind": "deploy", "status": "queued"}), tool_call_id="c1")
    failed = ToolMessage(
        json.dumps({"error": {"code": "x", "message": "\x1b[31mno\x1b[0m"}}),
        tool_call_id="c2",
        status="error",
    )
    for event in (
        tool_result("deploy_dashboard", "c1", ended),
        tool_result("deploy_dashboard", "c1", ended, replayed=True),
        tool_result("deploy_dashboard", "c2", failed),
        final_state([ended], asked_back=False),
        error("INVALID_ENVIRONMENT", "no", env_id="qa"),
    ):
        STREAM_EVENTS.validate_python(event.metadata)
    assert tool_result("deploy_dashboard", "c2", failed).metadata["error"]["message"] == "no"


@pytest.mark.parametrize(
    "metadata",
    [
        {"type": "state", "state": "done"},  # not a state the page knows
        {"type": "state", "state": "success", "tasks": ["t-1"]},  # a field nobody declared
        {"type": "tool_start", "tool": "x", "run_id": "r"},  # no input
        {"type": "thinking"},  # no such event
        {"state": "success"},  # no type
    ],
)
def test_what_is_not_the_contract_is_refused(metadata: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        STREAM_EVENTS.validate_python(metadata)


def test_the_audits_own_arguments_never_reach_the_page() -> None:
    refused = ToolErrorEvent(tool="x", run_id="r", error={"code": "UNKNOWN_TOOL"}, unchecked_args={"a": 1})
    event = Event.of(refused)
    assert event.metadata["unchecked_args"] == {"a": 1}  # the audit's
    assert "unchecked_args" not in shown(event).metadata
    assert "unchecked_args" not in json.dumps(STREAM_EVENTS.json_schema())  # nor in the page's types
