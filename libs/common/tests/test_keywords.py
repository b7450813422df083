from sstools.common.catalogue import Policy, Role, Tier, ToolSpec
from sstools.common.routing.keywords import KeywordIndex

_POLICY = Policy(Tier.READ, Role.VIEWER, Role.VIEWER)


def _spec(name: str, *keywords: str) -> ToolSpec:
    return ToolSpec(name, _POLICY, name, name, keywords, (), (name, name))


def test_keyword_matches_whole_words_never_substrings() -> None:
    index = KeywordIndex([_spec("short", "env"), _spec("long", "environment"), _spec("tools", "tool")])
    assert index.match("list every environment").tools == ["long"]
    assert index.match("which env is prod").tools == ["short"]
    assert index.match("hover the tooltip in the toolbar").tools == []
    assert index.match("what tools do you have").tools == ["tools"]  # an inflection, not a substring


def test_access_is_not_available() -> None:
    index = KeywordIndex()
    assert "superset_audit_permissions" not in index.match("какие инструменты доступны?").tools
    assert "superset_audit_permissions" not in index.match("покажи доступные дашборды").tools
    assert "superset_audit_permissions" in index.match("у кого есть доступ к дашборду продаж").tools
    assert "superset_audit_permissions" in index.match("проверь права доступа").tools


def test_russian_inflections_match_one_keyword() -> None:
    index = KeywordIndex()
    for phrase in ("дашборд 42", "дашборды", "список дашбордов", "к дашборду", "в дашбордах"):
        assert "search_dashboards" in index.match(phrase).tools, phrase
    for phrase in ("окружения", "в окружении", "окружений", "по окружениям"):
        assert "list_environments" in index.match(phrase).tools, phrase


def test_every_intent_of_a_message_is_found_nothing_returns_early() -> None:
    tools = KeywordIndex().match("what tools can deploy a dashboard, and make a backup of prod first").tools
    assert {"show_capabilities", "deploy_dashboard", "run_backup", "search_dashboards"} <= set(tools)


def test_negated_request_is_not_offered_and_the_rest_is() -> None:
    index = KeywordIndex()
    for message in (
        "не делай бэкап, покажи окружения",
        "не надо делать бэкап, покажи окружения",
        "бэкап не делай, покажи окружения",
        "без бэкапа, просто покажи окружения",
        "don't back up anything, list the environments",
        "no need to run a backup, just list the environments",
        "skip the backup and list environments",
    ):
        result = index.match(message)
        assert "run_backup" not in result.tools, message
        assert "run_backup" in result.negated, message
        assert "list_environments" in result.tools, message


def test_negated_state_is_a_diagnosis_not_a_refusal() -> None:
    index = KeywordIndex()
    for message in ("почему не работает дашборд 42", "дашборд не грузится", "dashboard 7 doesn't load"):
        result = index.match(message)
        assert "search_dashboards" in result.tools, message
        assert result.negated == set(), message


def test_one_typo_away_still_matches() -> None:
    index = KeywordIndex()
    assert "run_backup" in index.match("bakcup prod pls").tools
    assert "get_task_status" in index.match("статус задчи 7f3a").tools
    assert "run_llm_documentation" in index.match("сгенерируй докуметацию").tools


def test_typo_correction_never_turns_a_known_word_into_another() -> None:
    index = KeywordIndex()
    # "копирование" is a word of a backup phrase; one letter from "копировать" (copy) it stays itself.
    assert index.match("запусти резервное копирование").tools == ["run_backup"]
    # "skip" is a negation, not a typo of "ship" (deploy).
    assert "deploy_dashboard" not in index.match("skip the backup").tools
