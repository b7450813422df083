"""How the offline planner reads a message, without a stack: environments as configured,
negations, SQL not to run, names beside the words that make something new."""

import pytest

from sstools.agent.context import Environment
from sstools.agent.planner.reading import SQL_TOOL, read_request
from sstools.agent.planner.refining import refined

ENVIRONMENTS = (Environment("dev", "dev", False), Environment("prod", "prod", True))


def test_environments_are_read_as_configured_and_test_invents_none() -> None:
    moved = read_request("перенеси дашборд Sales Overview из dev в прод", ENVIRONMENTS)
    assert (moved.source_env, moved.target_env, moved.dashboard_name) == ("dev", "prod", "Sales Overview")
    assert read_request("run a test query on dev: SELECT 1", ENVIRONMENTS).target_env == "dev"
    assert read_request("выкати Sales Overview на стейджинг", ENVIRONMENTS).unknown_env == "стейджинг"


def test_a_statement_the_message_says_not_to_run_is_not_run() -> None:
    request = read_request("не выполняй DELETE FROM orders, просто скажи, сколько там строк", ENVIRONMENTS)
    assert request.sql is None
    assert (request.intent, request.table) == (SQL_TOOL, "orders")


def test_the_title_of_a_copy_is_not_the_name_of_its_original() -> None:
    request = read_request(
        "Скопируй Orders and Events под названием «Orders and Events (draft)»", ENVIRONMENTS
    )
    assert (request.dashboard_name, request.title) == ("Orders and Events", "Orders and Events (draft)")


@pytest.mark.parametrize(
    "text",
    ["Is this dashboard healthy?", "Этот дашборд здоров?", "is this dashboard broken?", "он сломан?"],
)
def test_how_a_dashboard_is_is_not_its_name(text: str) -> None:
    # asked from a dashboard (the page's focus): the question is about that one, named by none
    request = read_request(text, ENVIRONMENTS)
    assert (request.intent, request.dashboard_name) == ("get_health_summary", None)


@pytest.mark.parametrize(
    ("text", "name"),
    [
        ("deploy the Working Capital dashboard to prod", "Working Capital"),
        ("validate the OK Metrics dashboard", "OK Metrics"),
        ("покажи дашборд Fine Goods", "Fine Goods"),
    ],
)
def test_a_name_that_starts_with_a_word_of_how_things_are_is_still_a_name(text: str, name: str) -> None:
    assert read_request(text, ENVIRONMENTS).dashboard_name == name


@pytest.mark.parametrize(
    ("text", "name"),
    [
        ("Is the Sales Overview dashboard ok?", "Sales Overview"),
        ("Is this dashboard OK?", None),
        ("are my dashboards fine", None),
        ("Is Legacy KPIs working?", "Legacy KPIs"),
        ("How is the Sales Overview dashboard doing?", "Sales Overview"),
        ("how's Legacy KPIs doing", "Legacy KPIs"),
        ("Sales Overview в порядке?", "Sales Overview"),
        ("дашборд Legacy KPIs работает?", "Legacy KPIs"),
        ("Legacy KPIs живой?", "Legacy KPIs"),
    ],
)
def test_asking_whether_a_dashboard_is_all_right_checks_its_health(text: str, name: str | None) -> None:
    request = read_request(text, ENVIRONMENTS)
    assert (request.intent, request.dashboard_name) == ("get_health_summary", name)


@pytest.mark.parametrize(
    ("text", "intent"),
    [
        ("ok", None),
        ("ну норм", None),
        ("ok, deploy Sales Overview to prod", "deploy_dashboard"),
        ("Is the task done yet?", "get_task_status"),
        ("Deploy Sales Overview в прод", "deploy_dashboard"),
    ],
)
def test_ok_said_in_passing_asks_no_health_check(text: str, intent: str | None) -> None:
    request = read_request(text, ENVIRONMENTS)
    assert request.intent == intent
    if intent == "deploy_dashboard":
        assert request.dashboard_name == "Sales Overview"


def test_a_negated_verb_is_set_aside_and_the_rest_leads() -> None:
    request = read_request("don't deploy, just show me the Sales Overview dashboard", ENVIRONMENTS)
    assert "deploy_dashboard" in request.negated
    assert request.intent == "search_dashboards"


@pytest.mark.parametrize(
    ("sql", "words", "changed"),
    [
        (
            "SELECT COUNT(*) FROM orders WHERE status = 'paid'",
            "а shipped?",
            "SELECT COUNT(*) FROM orders WHERE status = 'shipped'",
        ),
        (
            "SELECT count(*) FROM sales",
            "and group it by region",
            "SELECT region, COUNT(*) FROM sales GROUP BY region",
        ),
        (
            "SELECT COUNT(*) FROM orders WHERE status = 'paid'",
            "а по регионам?",
            "SELECT region, COUNT(*) FROM orders WHERE status = 'paid' GROUP BY region",
        ),
        (
            "SELECT COUNT(*) FROM orders WHERE status = 'paid' AND user_id = 3",
            "а для пользователя 5?",
            "SELECT COUNT(*) FROM orders WHERE status = 'paid' AND user_id = 5",
        ),
        ("SELECT COUNT(*) FROM events", "только логины", "SELECT COUNT(*) FROM events WHERE kind = 'login'"),
    ],
)
def test_a_follow_up_changes_the_last_query(sql: str, words: str, changed: str) -> None:
    assert refined(sql, words) == changed


@pytest.mark.parametrize(
    ("sql", "words"),
    [
        ("SELECT COUNT(*) FROM orders", "спасибо"),  # nothing to change
        ("SELECT * FROM sales LIMIT 10", "group by region"),  # rows, not counted: grouping means nothing
        ("DELETE FROM orders", "а shipped?"),  # not a query
        ("SELECT a.id FROM a JOIN b ON a.id = b.id", "а shipped?"),  # not one plain table
        ("SELEC broken", "а shipped?"),
        ("SELECT region, COUNT(*) FROM sales GROUP BY region", "by region"),  # grouped already
    ],
)
def test_words_that_change_nothing_leave_the_query_alone(sql: str, words: str) -> None:
    assert refined(sql, words) is None
