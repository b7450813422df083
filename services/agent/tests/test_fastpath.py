"""The fast path alone (no stack): which words make a command, what it takes from them, and
that a negation keeps an otherwise explicit command off it (FR-035)."""

import re

import pytest

from sstools.agent.context import Environment
from sstools.agent.fastpath import fast_confirmation_tool

ENVIRONMENTS = (Environment("dev", "dev", False), Environment("prod", "prod", True))


@pytest.mark.parametrize(
    ("command", "tool", "args"),
    [
        ("задеплой дашборд 17 в prod", "deploy_dashboard", {"dashboard_id": 17, "env_id": "prod"}),
        (
            "Deploy dashboard 17 from dev to prod",
            "deploy_dashboard",
            {"dashboard_id": 17, "env_id": "prod", "source_env": "dev"},
        ),
        (
            "перенеси дашборд 5 из dev в prod",  # "перенеси" is the migration's word (its declaration)
            "execute_migration",
            {"dashboard_ids": [5], "env_id": "prod", "source_env": "dev"},
        ),
        (
            "мигрируй дашборд 5 из dev в прод",
            "execute_migration",
            {"dashboard_ids": [5], "env_id": "prod", "source_env": "dev"},
        ),
        ("сделай бэкап prod", "run_backup", {"env_id": "prod"}),
        ('создай ветку "release-7"', "create_branch", {"name": "release-7"}),
        (
            "создай ветку «hotfix/kpis» и закоммить туда дашборд 3 с сообщением «fix the chart»",
            "create_branch",
            {"name": "hotfix/kpis"},
        ),
    ],
)
async def test_an_explicit_command_becomes_its_call(command: str, tool: str, args: dict[str, object]) -> None:
    call = await fast_confirmation_tool(command, ENVIRONMENTS)
    assert call is not None
    assert (call["name"], call["args"]) == (tool, args)


@pytest.mark.parametrize(
    ("command", "negated"),
    [
        ("задеплой дашборд 1 в prod", "задеплой дашборд 1 в prod? нет, отмена"),
        ("задеплой дашборд 1 в prod", "задеплой дашборд 1 в prod, не надо"),
        ("deploy dashboard 1 to prod", "deploy dashboard 1 to prod - no, stop"),
        ("deploy dashboard 1 to prod", "deploy dashboard 1 to prod, do not"),
        ("deploy dashboard 1 to prod", "deploy dashboard 1 to prod? don't"),
        ("сделай бэкап prod", "сделай бэкап prod — отмени"),
        ('создай ветку "x"', 'создай ветку "x" — нет'),
    ],
)
async def test_a_negation_keeps_a_command_off_the_fast_path(command: str, negated: str) -> None:
    assert await fast_confirmation_tool(command, ENVIRONMENTS) is not None  # the same words, not negated
    assert await fast_confirmation_tool(negated, ENVIRONMENTS) is None


@pytest.mark.parametrize(
    "text",
    [
        "задеплой дашборд 17",  # no environment named: the page's is not borrowed
        "задеплой дашборд в prod",  # no dashboard
        "please deploy dashboard 17 to prod",  # a request, not a command: the model reads it
        "задеплой дашборд 17 в prod\nи ещё кое-что",
        "задеплой дашборд 17 в prod " + "подробности " * 30,
        "покажи дашборды",
        "мигрируй дашборд 5 в прод",  # a migration names where it comes from
        "создай ветку release",  # a branch's name is quoted, or the model reads it
        # the quoted text is the commit's message, not the branch's name
        "создай ветку hotfix/kpis и закоммить туда дашборд 3 с сообщением «fix the chart»",
    ],
)
async def test_anything_less_than_a_short_complete_command_goes_to_the_model(text: str) -> None:
    assert await fast_confirmation_tool(text, ENVIRONMENTS) is None


async def test_a_fast_call_has_an_id_of_its_own_that_says_where_it_came_from() -> None:
    first = await fast_confirmation_tool("сделай бэкап prod", ENVIRONMENTS)
    second = await fast_confirmation_tool("сделай бэкап prod", ENVIRONMENTS)
    assert first is not None
    assert second is not None
    for call in (first, second):
        assert re.fullmatch(r"fast_[0-9a-f]{16}", str(call["id"])), call["id"]
    assert first["id"] != second["id"]  # each confirmation card answers one call


async def test_a_command_of_up_to_200_characters_is_short_enough() -> None:
    command = "задеплой дашборд 17 в prod"
    longest = command + " " * (200 - len(command) - 1) + "!"  # inner spaces: not stripped away
    assert len(longest) == 200
    assert await fast_confirmation_tool(longest, ENVIRONMENTS) is not None
    assert await fast_confirmation_tool(longest + "!", ENVIRONMENTS) is None
