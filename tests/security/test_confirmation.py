"""Issue 18: a confirmation means exactly what the person saw. Every case goes through the real
stack — the agent (its graph and gate), ops, both Superset instances, PostgreSQL — with a
scripted model that calls what the test says, and is checked in Superset or in ops' own tables.

A confirm names the card it answers (call id and digest). It runs that card's call exactly
once, in the card's environment, with the user's current role — or it is refused, typed, and
the card stays pending. Any edit is a new card showing the edited call, never a run.
"""

import json
import sqlite3
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from sqlalchemy import update

from sstools.common.catalogue import TOOLS
from sstools.common.db import create_engine
from sstools.devstack.agentstack import AgentStack, Reply, dump, new_conversation, scripted_stack
from sstools.devstack.demo import PASSWORD_ENV, environments, with_production_alias
from sstools.devstack.fake_llm import FakeLlm, ToolCall
from sstools.devstack.fake_llm import Reply as ModelReply
from sstools.devstack.superset import Instance
from sstools.ops.store import tables
from sstools.ops.superset import dashboards
from sstools.ops.superset.client import SupersetClient


async def _count(superset: SupersetClient, title: str) -> int:
    return (await dashboards.search(superset, text=title)).count


async def _paused(
    stack: AgentStack,
    llm: FakeLlm,
    call: ToolCall,
    *,
    username: str = "root",
    env_id: str = "dev",
    conversation: str | None = None,
) -> tuple[str, dict[str, Any]]:
    """A turn whose model makes ``call``, paused at its card."""
    llm.script.clear()
    llm.says(ModelReply(tool_calls=(call,)), ModelReply(content="Готово."), ModelReply(content="Готово."))
    conversation = conversation or new_conversation()
    reply = await stack.say("сделай это", conversation, username=username, env_id=env_id)
    cards = reply.of("confirm_required")
    assert len(cards) == 1, dump(reply)
    assert reply.of("tool_start") == [], dump(reply)
    return conversation, cards[0]


def _refused(reply: Reply, code: str) -> None:
    assert [error["code"] for error in reply.of("error")] == [code], dump(reply)
    assert reply.of("tool_start") == [], dump(reply)


async def _ops_calls(stack: AgentStack, tool_name: str) -> list[dict[str, Any]]:
    """What ops recorded of the tool's calls that got past its guard (role, environment,
    confirmation) and ran, however they ended."""
    return await stack.rows(
        f"SELECT username, target_env, outcome FROM {tables.audit.name}"
        " WHERE action = :tool AND outcome <> 'denied'"
        " AND coalesce(detail->>'code', '') NOT IN"
        " ('confirmation_required', 'confirmation_invalid', 'invalid_environment')",
        tool=tool_name,
    )


def _title() -> str:
    return f"Confirmed {uuid.uuid4().hex[:8]}"


async def test_the_card_environment_holds_whatever_the_page_selects_afterwards(
    llm_stack: AgentStack, llm: FakeLlm, dev: SupersetClient, prod: SupersetClient
) -> None:
    title = _title()
    conversation, card = await _paused(
        llm_stack, llm, ToolCall("superset_create_dashboard", {"title": title})
    )
    assert (card["env_id"], card["production"]) == ("dev", False)
    confirmed = await llm_stack.say("", conversation, action="confirm", env_id="prod")  # switched since
    assert [event["input"]["env_id"] for event in confirmed.of("tool_start")] == ["dev"], dump(confirmed)
    assert (await _count(dev, title), await _count(prod, title)) == (1, 0)


async def test_an_edit_is_a_new_card_showing_the_edited_call_and_only_that_card_runs_it(
    llm_stack: AgentStack, llm: FakeLlm, dev: SupersetClient
) -> None:
    shown, edited = _title(), _title()
    call = ToolCall("superset_create_dashboard", {"title": shown})
    conversation, card = await _paused(llm_stack, llm, call)
    asked = await llm_stack.say(json.dumps({"title": edited}), conversation, action="confirm")
    assert asked.of("tool_start") == [], dump(asked)  # same decision, but not the call the card showed
    [new_card] = asked.of("confirm_required")
    assert (new_card["call_id"], new_card["tool_args"]["title"]) == (card["call_id"], edited)
    assert new_card["digest"] != card["digest"]
    assert (await _count(dev, shown), await _count(dev, edited)) == (0, 0)
    confirmed = await llm_stack.say("", conversation, action="confirm")  # the card now shown
    assert [event["input"]["title"] for event in confirmed.of("tool_start")] == [edited], dump(confirmed)
    assert confirmed.state == "success", dump(confirmed)
    again = await llm_stack.say("", conversation, action="confirm")  # resent
    assert again.of("tool_start") == [], dump(again)
    assert (await _count(dev, shown), await _count(dev, edited)) == (0, 1)


async def test_an_edit_that_switches_to_prod_is_a_new_card_never_a_run(
    llm_stack: AgentStack, llm: FakeLlm, dev: SupersetClient, prod: SupersetClient
) -> None:
    title = _title()
    call = ToolCall("superset_create_dashboard", {"env_id": "dev", "title": title})
    conversation, card = await _paused(llm_stack, llm, call)
    asked = await llm_stack.say(json.dumps({"env_id": "prod"}), conversation, action="confirm")
    assert asked.of("tool_start") == [], dump(asked)
    assert asked.state == "needs_confirmation", dump(asked)
    [new_card] = asked.of("confirm_required")
    assert (new_card["call_id"], new_card["env_id"], new_card["production"]) == (
        card["call_id"],
        "prod",
        True,
    )
    assert (new_card["risk_level"], new_card["required_role"]) == ("dangerous", "operator")
    assert new_card["digest"] != card["digest"]
    assert (await _count(dev, title), await _count(prod, title)) == (0, 0)

    stale = await llm_stack.say("", conversation, action="confirm", card=card)  # the first card again
    _refused(stale, "CONFIRMATION_MISMATCH")
    assert (await _count(dev, title), await _count(prod, title)) == (0, 0)

    confirmed = await llm_stack.say("", conversation, action="confirm")  # the card now shown
    assert [event["input"]["env_id"] for event in confirmed.of("tool_start")] == ["prod"], dump(confirmed)
    assert (await _count(dev, title), await _count(prod, title)) == (0, 1)


async def test_an_edit_above_the_role_is_denied_and_nothing_runs(
    llm_stack: AgentStack, llm: FakeLlm, dev: SupersetClient, prod: SupersetClient
) -> None:
    title = _title()
    call = ToolCall("superset_create_dashboard", {"env_id": "dev", "title": title})
    conversation, _ = await _paused(llm_stack, llm, call, username="anna")  # an analyst, in dev
    denied = await llm_stack.say(
        json.dumps({"env_id": "prod"}), conversation, action="confirm", username="anna"
    )
    assert [event["required_role"] for event in denied.of("permission_denied")] == ["operator"], dump(denied)
    assert denied.of("tool_start") == [], dump(denied)
    assert (await _count(dev, title), await _count(prod, title)) == (0, 0)


@pytest.mark.parametrize(
    ("edits", "code"),
    [
        ({"env_id": "nowhere"}, "INVALID_ENVIRONMENT"),
        ({"env_id": "prod/../dev"}, "INVALID_ENVIRONMENT"),
        ({"title": ""}, "INVALID_ARGUMENTS"),
        ({"dashboard_id": 5}, "INVALID_ARGUMENTS"),  # not an argument of this tool
    ],
)
async def test_an_invalid_edit_is_refused_and_the_card_stays(
    llm_stack: AgentStack, llm: FakeLlm, dev: SupersetClient, edits: dict[str, Any], code: str
) -> None:
    title = _title()
    conversation, _ = await _paused(llm_stack, llm, ToolCall("superset_create_dashboard", {"title": title}))
    refused = await llm_stack.say(json.dumps(edits), conversation, action="confirm")
    _refused(refused, code)
    assert refused.state == "needs_confirmation"
    confirmed = await llm_stack.say("", conversation, action="confirm")
    assert len(confirmed.of("tool_start")) == 1, dump(confirmed)
    assert await _count(dev, title) == 1


async def test_a_confirm_naming_another_card_is_refused_and_the_card_stays(
    llm_stack: AgentStack, llm: FakeLlm, dev: SupersetClient
) -> None:
    first, second = _title(), _title()
    conversation, card = await _paused(
        llm_stack, llm, ToolCall("superset_create_dashboard", {"title": first})
    )
    for wrong in (
        {**card, "digest": "0" * 64},  # a card that was never shown
        {**card, "call_id": "call-from-another-tab"},
    ):
        _refused(await llm_stack.say("", conversation, action="confirm", card=wrong), "CONFIRMATION_MISMATCH")
    unbound = await llm_stack.say('{"title": "x"}', new_conversation(), action="confirm")  # names no card
    _refused(unbound, "CONFIRMATION_UNBOUND")
    rejected = await llm_stack.say("", conversation, action="reject")
    assert rejected.of("tool_start") == [], dump(rejected)

    # Another tab still shows the rejected card while the conversation paused on a new one.
    _, waiting = await _paused(
        llm_stack, llm, ToolCall("superset_create_dashboard", {"title": second}), conversation=conversation
    )
    from_the_other_tab = await llm_stack.say("", conversation, action="confirm", card=card)
    _refused(from_the_other_tab, "CONFIRMATION_MISMATCH")
    assert (await _count(dev, first), await _count(dev, second)) == (0, 0)
    confirmed = await llm_stack.say("", conversation, action="confirm", card=waiting)
    assert [event["input"]["title"] for event in confirmed.of("tool_start")] == [second], dump(confirmed)
    assert (await _count(dev, first), await _count(dev, second)) == (0, 1)


async def test_another_user_cannot_answer_the_card(
    llm_stack: AgentStack, llm: FakeLlm, dev: SupersetClient
) -> None:
    title = _title()
    conversation, card = await _paused(
        llm_stack, llm, ToolCall("superset_create_dashboard", {"title": title})
    )
    for intruder in ("oleg", "vera"):
        for action in ("confirm", "reject"):
            reply = await llm_stack.say("", conversation, action=action, username=intruder, card=card)
            _refused(reply, "CHECKPOINT_EXPIRED")  # to them, this conversation does not exist
    assert await _count(dev, title) == 0
    confirmed = await llm_stack.say("", conversation, action="confirm")
    assert len(confirmed.of("tool_start")) == 1, dump(confirmed)
    assert await _count(dev, title) == 1


async def _set_role(stack: AgentStack, username: str, role: str) -> None:
    engine = create_engine(stack.database_url)
    try:
        async with engine.begin() as connection:
            users = tables.users
            await connection.execute(update(users).where(users.c.username == username).values(role=role))
    finally:
        await engine.dispose()


async def test_a_user_demoted_after_the_card_cannot_confirm_it(
    llm_stack: AgentStack, llm: FakeLlm, dev: SupersetClient
) -> None:
    title = _title()
    call = ToolCall("superset_create_dashboard", {"title": title})
    conversation, _ = await _paused(llm_stack, llm, call, username="oleg")
    await _set_role(llm_stack, "oleg", "viewer")  # at once, well within any cache's life
    denied = await llm_stack.say("", conversation, action="confirm", username="oleg")
    assert [(event["user_role"], event["required_role"]) for event in denied.of("permission_denied")] == [
        ("viewer", "analyst")
    ], dump(denied)
    assert denied.of("tool_start") == [], dump(denied)
    assert await _count(dev, title) == 0
    assert await _ops_calls(llm_stack, "superset_create_dashboard") == []


# A call of every tool that may change something, as an admin confirms it; the order matters
# (the branch before its commit, the maintenance window last).
WRITES: dict[str, dict[str, Any]] = {
    "create_branch": {"name": f"confirmed-{uuid.uuid4().hex[:6]}"},
    "superset_create_dashboard": {"env_id": "dev", "title": "every write"},
    "superset_copy_dashboard": {"env_id": "dev", "dashboard_id": 1, "title": "every write copy"},
    "superset_create_dataset": {"env_id": "dev", "database_id": 1, "table_name": "sales"},
    "superset_execute_sql": {
        "env_id": "dev",
        "database_id": 1,
        "sql": "CREATE TABLE {table} AS SELECT 1 AS n",
    },
    "run_backup": {"env_id": "dev"},
    "run_llm_validation": {"env_id": "dev", "dashboard_id": 1},
    "run_llm_documentation": {"env_id": "dev", "dashboard_id": 1},
    "deploy_dashboard": {"env_id": "prod", "dashboard_id": 1, "source_env": "dev"},
    "execute_migration": {"env_id": "prod", "source_env": "dev", "dashboard_ids": [1]},
    "start_maintenance": {"env_id": "prod", "reason": "every write"},
    "end_maintenance": {"env_id": "prod"},
}


@pytest.fixture
async def live_stack(
    supersets: dict[str, Instance],
    fresh_database_url: str,
    tracer_provider: TracerProvider,
    tmp_path: Path,
    llm: FakeLlm,
) -> AsyncIterator[AgentStack]:
    """The stack with a third environment, ``live``: dev's Superset, configured as production."""
    listed = with_production_alias(environments(supersets, PASSWORD_ENV))
    stack = scripted_stack(
        llm, supersets, fresh_database_url, tracer_provider, tmp_path, ops_environments=listed
    )
    async with stack as running:
        yield running


async def test_an_environment_configured_as_production_is_prod_to_the_agent(
    live_stack: AgentStack, llm: FakeLlm, dev: SupersetClient
) -> None:
    title = _title()
    call = ToolCall("superset_create_dashboard", {"env_id": "live", "title": title})
    _, card = await _paused(live_stack, llm, call, env_id="live")  # the admin
    assert (card["env_id"], card["env_context"], card["production"]) == ("live", "prod", True)
    assert (card["risk_level"], card["required_role"]) == ("dangerous", "operator")
    llm.script.clear()
    llm.says(ModelReply(tool_calls=(call,)), ModelReply(content="Готово."))
    denied = await live_stack.say("сделай это", new_conversation(), username="anna", env_id="live")
    assert [(event["env_context"], event["required_role"]) for event in denied.of("permission_denied")] == [
        ("prod", "operator")
    ], dump(denied)
    assert denied.of("tool_start") == []
    assert await _count(dev, title) == 0  # live is dev's Superset: nothing was created there


def _tables(examples: str) -> set[str]:
    with sqlite3.connect(f"file:{examples}?mode=ro", uri=True) as database:
        return {row[0] for row in database.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


async def test_every_write_tool_confirmed_once_runs_exactly_once(
    llm_stack: AgentStack, llm: FakeLlm, supersets: dict[str, Instance]
) -> None:
    branch = WRITES["create_branch"]["name"]
    writes = {
        **WRITES,
        "commit_changes": {"env_id": "dev", "branch": branch, "dashboard_ids": [1], "message": "x"},
    }
    assert {spec.name for spec in TOOLS if spec.may_change} == set(writes)
    table = f"confirmed_{uuid.uuid4().hex[:8]}"
    examples = str(supersets["dev"].folder.parent / "examples.db")
    for name, args in writes.items():
        if name == "superset_execute_sql":
            args = {**args, "sql": args["sql"].format(table=table)}
        conversation, _ = await _paused(llm_stack, llm, ToolCall(name, args))
        first = await llm_stack.say("", conversation, action="confirm")
        assert [event["tool"] for event in first.of("tool_start")] == [name], dump(first)
        assert not any(
            event["error"].get("code") in ("confirmation_required", "confirmation_invalid")
            for event in first.of("tool_error")
        ), dump(first)
        resent = await llm_stack.say("", conversation, action="confirm")  # the answer was lost
        assert resent.of("tool_start") == [], dump(resent)
        ran = await _ops_calls(llm_stack, name)
        assert len(ran) == 1, f"{name}: {ran} {dump(first)}"
        assert ran[0]["username"] == "root"
    assert table in _tables(examples)  # the confirmed statement ran
    with sqlite3.connect(examples) as database:
        database.execute(f"DROP TABLE {table}")


async def test_a_servers_numbered_call_id_is_a_new_call_in_every_answer(
    llm_stack: AgentStack, llm: FakeLlm
) -> None:
    """Some servers number a response's calls (``functions.run_backup:0``), so the same id comes
    in every answer. Each confirmed backup runs — in a later turn of the same conversation and in
    another conversation alike —, none is answered with the first one's result."""
    call = ToolCall("run_backup", {"env_id": "dev"}, id="functions.run_backup:0")
    first = new_conversation()
    for conversation in (first, first, new_conversation()):
        await _paused(llm_stack, llm, call, conversation=conversation)
        confirmed = await llm_stack.say("", conversation, action="confirm")
        assert [event["tool"] for event in confirmed.of("tool_start")] == ["run_backup"], dump(confirmed)
        assert confirmed.of("tool_error") == [], dump(confirmed)
    backups = await llm_stack.rows(f"SELECT id FROM {tables.tasks.name} WHERE kind = 'backup'")
    assert len(backups) == 3, backups
