"""The catalogue is the design's policy table, written once."""

import re

import pytest

from sstools.common.catalogue import (
    ALTERNATIVES,
    ALWAYS_OFFERED,
    EXAMPLE_PROMPTS,
    IDLE_EXAMPLES,
    TOOLS,
    Role,
    Tier,
    tool,
    tool_names,
)
from sstools.devstack.policy_table import ADM, OP, POLICY_TABLE, A, D


def test_catalogue_holds_the_24_tools_of_the_design_with_their_policies() -> None:
    assert len(TOOLS) == 24
    assert sorted(tool_names()) == sorted(POLICY_TABLE)
    for spec in TOOLS:
        assert (spec.policy.tier, spec.policy.min_role, spec.policy.min_role_prod) == POLICY_TABLE[spec.name]


def test_only_sql_execution_has_a_stricter_policy_for_mutating_statements() -> None:
    mutating = {spec.name: spec.mutating_sql_policy for spec in TOOLS if spec.mutating_sql_policy}
    assert list(mutating) == ["superset_execute_sql"]
    policy = mutating["superset_execute_sql"]
    assert (policy.tier, policy.min_role, policy.min_role_prod) == (D, ADM, ADM)


@pytest.mark.parametrize("spec", TOOLS, ids=lambda spec: spec.name)
def test_every_tool_is_described_in_both_languages_and_has_keywords(spec: object) -> None:
    from sstools.common.catalogue import ToolSpec

    assert isinstance(spec, ToolSpec)
    for description, alphabet in ((spec.description_en, r"[A-Za-z]"), (spec.description_ru, r"[А-Яа-я]")):
        sentences = [part for part in re.split(r"(?<=[.!?])\s+", description.strip()) if part]
        assert 1 <= len(sentences) <= 3, description
        assert re.search(alphabet, description), description
    assert spec.keywords_en
    assert spec.keywords_ru


def test_roles_are_ordered_and_unknown_tools_are_not_found() -> None:
    assert [role.rank for role in Role] == [0, 1, 2, 3]
    assert ADM.at_least(OP)
    assert OP.at_least(OP)
    assert not A.at_least(OP)
    assert tool(ALWAYS_OFFERED).name == ALWAYS_OFFERED
    with pytest.raises(KeyError):
        tool("drop_database")


def test_every_tool_has_an_example_and_alternatives_are_read_tools_that_viewers_can_reach() -> None:
    assert set(EXAMPLE_PROMPTS) == set(tool_names())
    for russian, english in EXAMPLE_PROMPTS.values():  # each in its own language
        assert re.search("[а-яё]", russian, re.I), russian
        assert not re.search("[а-яё]", english, re.I), english
    assert set(IDLE_EXAMPLES) <= set(tool_names())
    for denied, offered in ALTERNATIVES.items():
        assert tool(denied).name == denied
        assert offered, denied
        assert denied not in offered
        assert all(tool(name).policy.tier is Tier.READ for name in offered), denied
    # every tool a viewer may not run has somewhere else to point them
    assert {spec.name for spec in TOOLS if spec.policy.min_role is not Role.VIEWER} <= set(ALTERNATIVES)
