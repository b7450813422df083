"""How the offline planner reads a message, without a stack: environments as configured,
negations, SQL not to run, names beside the words that make something new."""

import sqlite3

import pytest

from sstools.agent.context import Environment
from sstools.agent.planner.reading import (
    SQL_TOOL,
    described_sql,
    probed_values,
    read_request,
    table_named_in,
    values_probe,
)
from sstools.agent.planner.refining import refined
from sstools.agent.planner.spelling import speller

ENVIRONMENTS = (Environment("dev", "dev", False), Environment("prod", "prod", True))


def test_environments_are_read_as_configured_and_test_invents_none() -> None:
    moved = read_request("перенеси дашборд Sales Overview из dev в прод", ENVIRONMENTS)
    assert (moved.source_env, moved.target_env, moved.dashboard_name) == ("dev", "prod", "Sales Overview")
    assert read_request("run a test query on dev: SELECT 1", ENVIRONMENTS).target_env == "dev"
    assert read_request("выкати Sales Overview на стейджинг", ENVIRONMENTS).unknown_env == "стейджинг"


def test_the_words_of_a_dashboards_title_ask_for_nothing() -> None:
    request = read_request("задеплой дашборд Backup report в prod", ENVIRONMENTS)
    assert (request.intent, request.dashboard_name, request.then) == ("deploy_dashboard", "Backup report", ())
    # still a name asked about, only without a meaning of its own
    asked = read_request("Sales Overview в порядке?", ENVIRONMENTS)
    assert (asked.intent, asked.dashboard_name) == ("get_health_summary", "Sales Overview")
    # a name read where none is asks for what it says when nothing else is asked
    assert (
        read_request("прогони LLM-валидацию по Legacy KPIs на деве", ENVIRONMENTS).intent
        == "run_llm_validation"
    )
    # and the reason given keeps the title as written
    because = read_request("начни техработы в prod, потому что дашборд Sales Overview сломан", ENVIRONMENTS)
    assert (because.intent, because.reason) == ("start_maintenance", "дашборд Sales Overview сломан")


@pytest.mark.parametrize(
    ("text", "then"),
    [
        ("сделай бэкап prod и начни техработы", ("start_maintenance",)),
        ("back up prod, then start maintenance", ("start_maintenance",)),
        ("задеплой дашборд Orders and Events в prod и закоммить изменения", ("commit_changes",)),
        ("сначала сделай бэкап прода, потом задеплой туда Sales Overview", ("deploy_dashboard",)),
        # a word further into a clause is not asked for ("в ветку" is the commit's branch)
        ("Закоммить Orders and Events с дева в ветку main", ()),
        ("создай дашборд «Финансы 2025» и сразу опубликуй его", ()),
        # a change only named as the reason, or refused, or a read after it, is not asked for
        ("start maintenance in prod because of the backup", ()),
        ("сделай бэкап prod, но техработы не начинай", ()),
        ("сделай бэкап prod и покажи дашборды", ()),
        # changes come after a change: a read that leads is answered alone, as before
        ("покажи дашборды и сделай бэкап prod", ()),
    ],
)
def test_changes_asked_after_the_first_are_read_in_order(text: str, then: tuple[str, ...]) -> None:
    assert read_request(text, ENVIRONMENTS).then == then


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
    "text",
    [
        "какие дашборды сломаны?",
        "Какие дашборды не работают в dev?",
        "какой дашборд упал",
        "дашборды сломаны в проде?",
    ],
)
def test_a_russian_word_of_state_after_dashboards_asks_about_them_all_not_about_a_title(text: str) -> None:
    request = read_request(text, ENVIRONMENTS)
    assert (request.intent, request.dashboard_name) == ("get_health_summary", None)
    # a title in such words is written as one: capitalised
    titled = read_request("дашборд Сломанные Заказы работает?", ENVIRONMENTS)
    assert titled.dashboard_name == "Сломанные Заказы"


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


@pytest.mark.parametrize(
    ("text", "negated", "intent"),
    [
        ("бэкап не нужен, только проверь здоровье дашбордов на проде", "run_backup", "get_health_summary"),
        ("деплой не нужен, покажи дашборды", "deploy_dashboard", "search_dashboards"),
    ],
)
def test_what_is_said_not_to_be_needed_is_not_done(text: str, negated: str, intent: str) -> None:
    request = read_request(text, ENVIRONMENTS)
    assert negated in request.negated
    assert request.intent == intent


def test_a_tasks_id_asks_about_its_task_whatever_else_the_message_names() -> None:
    request = read_request("как там бэкап, готово? 7c9e6679-7425-40de-944b-e07fc1f90ae7", ENVIRONMENTS)
    assert request.intent == "get_task_status"
    assert str(request.task_id) == "7c9e6679-7425-40de-944b-e07fc1f90ae7"


@pytest.mark.parametrize(
    "text", ["is anything broken on the prod dashboards right now?", "check dashboard health on prod"]
)
def test_words_after_the_plural_or_a_state_are_not_a_dashboards_name(text: str) -> None:
    assert read_request(text, ENVIRONMENTS).dashboard_name is None


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
    ],
)
def test_a_follow_up_changes_the_last_query(sql: str, words: str, changed: str) -> None:
    assert refined(sql, words) == changed


def test_a_follow_up_naming_a_value_filters_by_the_column_whose_data_holds_it() -> None:
    # with nothing filtered yet, a value's column is known only from the table's data
    assert refined("SELECT COUNT(*) FROM events", "только логины") is None
    held = {"kind": ["login", "view"], "page": ["home", "login-help"]}
    assert refined("SELECT COUNT(*) FROM events", "только логины", held) == (
        "SELECT COUNT(*) FROM events WHERE kind = 'login'"
    )
    assert refined(
        "SELECT COUNT(*) FROM tickets", "just the Mobile ones", {"team": ["platform", "Mobile"]}
    ) == ("SELECT COUNT(*) FROM tickets WHERE team = 'Mobile'")


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


ORDERS = [
    {"name": "id", "type": "INTEGER"},
    {"name": "created_at", "type": "TEXT"},
    {"name": "customer", "type": "TEXT"},
    {"name": "status", "type": "TEXT"},
    {"name": "total", "type": "REAL"},
]
EVENTS = [
    {"name": "id", "type": "INTEGER"},
    {"name": "kind", "type": "TEXT"},
    {"name": "user_id", "type": "INTEGER"},
]
SALES = [
    {"name": "id", "type": "INTEGER"},
    {"name": "day", "type": "TEXT"},
    {"name": "region", "type": "TEXT"},
    {"name": "amount", "type": "REAL"},
]
# A table no request set or planner word list knows of.
TICKETS = [
    {"name": "id", "type": "INTEGER"},
    {"name": "team", "type": "VARCHAR(40)"},
    {"name": "priority", "type": "TEXT"},
    {"name": "opened_on", "type": "DATE"},
    {"name": "cost", "type": "NUMERIC(10, 2)"},
]
TABLES = {"orders": ORDERS, "events": EVENTS, "sales": SALES, "tickets": TICKETS}


@pytest.mark.parametrize(
    ("text", "columns", "sql"),
    [
        # the sum a person means is the table's money column, whatever it is called
        ("какая средняя сумма заказа?", ORDERS, "SELECT AVG(total) FROM orders"),
        ("average amount per order", ORDERS, "SELECT AVG(total) FROM orders"),
        # a column the question names by its first part
        ("how many distinct users are there?", EVENTS, "SELECT COUNT(DISTINCT user_id) FROM events"),
        # a grouping by a column the table has not is left out, never guessed into the statement
        ("count orders by region", ORDERS, "SELECT COUNT(*) FROM orders"),
        ("count orders by customer", ORDERS, "SELECT customer, COUNT(*) FROM orders GROUP BY customer"),
        # a condition on a column the table has not is left out too
        ("how many paid events?", EVENTS, "SELECT COUNT(*) FROM events"),
        # the rows counted for, not the number summed, are what a top list groups by
        (
            "Top 5 customers by total order value",
            ORDERS,
            "SELECT customer, SUM(total) AS value FROM orders GROUP BY customer ORDER BY value DESC LIMIT 5",
        ),
        # a month or a year limits the rows by the column that says when they happened
        (
            "rows of sales for March 2026",
            SALES,
            "SELECT * FROM sales WHERE day >= '2026-03-01' AND day < '2026-04-01' LIMIT 10",
        ),
        (
            "сколько заказов за 2025?",
            ORDERS,
            "SELECT COUNT(*) FROM orders WHERE created_at >= '2025-01-01' AND created_at < '2026-01-01'",
        ),
        (
            "выручка по регионам в декабре 2025",
            SALES,
            "SELECT region, SUM(amount) AS value FROM sales WHERE day >= '2025-12-01' AND day < '2026-01-01'"
            " GROUP BY region ORDER BY value DESC",
        ),
        # a value written beside its text column's name: after an article, or in capitals
        (
            "how many tickets are on the platform team?",
            TICKETS,
            "SELECT COUNT(*) FROM tickets WHERE team = 'platform'",
        ),
        (
            "show tickets of the High priority",
            TICKETS,
            "SELECT * FROM tickets WHERE priority = 'High' LIMIT 10",
        ),
        ("сколько тикетов у team Mobile?", TICKETS, "SELECT COUNT(*) FROM tickets WHERE team = 'Mobile'"),
        # ... never a verb or a word of the question
        (
            "Which region sold the most?",
            SALES,
            "SELECT region, COUNT(*) AS value FROM sales GROUP BY region ORDER BY value DESC",
        ),
        # a grouping said as "for each", "в разрезе": the first one that names a real column
        ("count tickets for each team", TICKETS, "SELECT team, COUNT(*) FROM tickets GROUP BY team"),
        (
            "сделай select по tickets: сумма cost в разрезе team",
            TICKETS,
            "SELECT team, SUM(cost) AS value FROM tickets GROUP BY team ORDER BY value DESC",
        ),
        # a grouping with nothing to measure counts the rows of each group
        (
            "tickets broken down by priority",
            TICKETS,
            "SELECT priority, COUNT(*) FROM tickets GROUP BY priority",
        ),
        # "the most" with no number to sum: the most rows
        (
            "which team opened the most tickets?",
            TICKETS,
            "SELECT team, COUNT(*) AS value FROM tickets GROUP BY team ORDER BY value DESC",
        ),
    ],
)
def test_a_question_in_words_is_written_with_the_tables_real_columns(
    text: str, columns: list[dict[str, str]], sql: str
) -> None:
    table = next(name for name, known in TABLES.items() if known is columns)
    assert described_sql(read_request(text, ENVIRONMENTS), table, columns) == sql


TICKET_VALUES = {"team": ["platform", "Mobile", "data"], "priority": ["Low", "High", "Urgent"]}


@pytest.mark.parametrize(
    ("text", "held", "sql"),
    [
        # a word of the question that a text column holds becomes a condition, as the data writes it
        ("how many urgent tickets?", TICKET_VALUES, "SELECT COUNT(*) FROM tickets WHERE priority = 'Urgent'"),
        (
            "list the high tickets of mobile",
            TICKET_VALUES,
            "SELECT * FROM tickets WHERE priority = 'High' AND team = 'Mobile' LIMIT 10",
        ),
        # the same words where the data holds no such value filter nothing: no value is guessed
        (
            "how many urgent tickets?",
            {"team": ["platform"], "priority": ["P1", "P2"]},
            "SELECT COUNT(*) FROM tickets",
        ),
        # a value two columns hold goes to the one the words name, else to neither
        (
            "how many data tickets?",
            {"team": ["data"], "priority": ["data"]},
            "SELECT COUNT(*) FROM tickets",
        ),
        (
            "how many tickets of team data?",
            {"team": ["data"], "priority": ["data"]},
            "SELECT COUNT(*) FROM tickets WHERE team = 'data'",
        ),
        # a Russian state stands for the English value tables keep, when the data holds it
        (
            "сколько отменённых тикетов?",
            {"team": ["platform"], "priority": ["cancelled", "open"]},
            "SELECT COUNT(*) FROM tickets WHERE priority = 'cancelled'",
        ),
        # the biggest or smallest rows by the money column
        ("the single most expensive ticket", {}, "SELECT * FROM tickets ORDER BY cost DESC LIMIT 1"),
        ("3 cheapest tickets", {}, "SELECT * FROM tickets ORDER BY cost ASC LIMIT 3"),
    ],
)
def test_values_come_from_the_tables_data(text: str, held: dict[str, list[str]], sql: str) -> None:
    assert described_sql(read_request(text, ENVIRONMENTS), "tickets", TICKETS, held) == sql


def test_the_values_read_runs_on_a_real_database_and_yields_what_each_column_holds() -> None:
    database = sqlite3.connect(":memory:")
    database.execute("CREATE TABLE tickets (id INTEGER, team TEXT, priority TEXT, opened_on DATE, cost REAL)")
    rows = [
        (n, ("platform", "Mobile")[n % 2], ("Low", "Urgent", "High")[n % 3], "2026-01-01", n)
        for n in range(90)
    ]
    database.executemany("INSERT INTO tickets VALUES (?, ?, ?, ?, ?)", rows)
    probe = values_probe("how many urgent tickets?", "tickets", TICKETS)
    assert probe is not None
    cursor = database.execute(probe)
    names = [column[0] for column in cursor.description]
    held = probed_values({"rows": [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]})
    assert {column: sorted(values) for column, values in held.items()} == {
        "team": ["Mobile", "platform"],
        "priority": ["High", "Low", "Urgent"],
    }
    # a question with no word that could be a value reads nothing
    assert values_probe("how many tickets?", "tickets", TICKETS) is None


@pytest.mark.parametrize(
    ("text", "table"),
    [
        ("How many orders do we have in total?", "orders"),  # "in total" names no table
        ("сколько заказов?", "orders"),
        ("rows of the Events table", "events"),
        ("how many widgets?", None),
    ],
)
def test_the_table_a_question_is_about_is_one_the_schema_has(text: str, table: str | None) -> None:
    assert table_named_in(read_request(text, ENVIRONMENTS), ["events", "orders", "sales"]) == table


@pytest.mark.parametrize(
    ("written", "meant"),
    [
        ("deplyo it", "deploy it"),  # two letters swapped
        ("valdate the dashbord", "validate the dashboard"),  # a letter missing
        ("comit it", "commit it"),
        ("show the orders", "show the orders"),  # an inflection is not a typo
        ("дашбордов нет", "дашбордов нет"),
        ("Sales Overveiw", "Sales Overveiw"),  # a name is written as its owner wrote it
        ("branch fix/dashbord-typo", "branch fix/dashbord-typo"),  # so is a branch, a slug, a column
        ("count user_dashbord", "count user_dashbord"),
        ("tsak status", "tsak status"),  # under five letters: too short to tell a typo from a word
    ],
)
def test_a_misspelt_word_is_read_as_the_word_it_is_one_typo_from(written: str, meant: str) -> None:
    assert speller().text(written) == meant


HOSTILE_COLUMN = "amount) FROM sales; DROP TABLE sales; --"


def test_a_name_the_database_gives_is_written_into_sql_only_as_a_plain_identifier() -> None:
    """Columns come from the database, which whoever can create a table there controls."""
    columns = [{"name": "id", "type": "INTEGER"}, {"name": HOSTILE_COLUMN, "type": "REAL"}]
    written = described_sql(read_request("average amount of sales", ENVIRONMENTS), "sales", columns)
    assert "DROP" not in written


@pytest.mark.parametrize(
    "text", ["thanks a lot, that helped", "добрый вечер! как ты?", "hello there, good to see you"]
)
def test_thanks_or_a_greeting_with_nothing_asked_is_small_talk(text: str) -> None:
    request = read_request(text, ENVIRONMENTS)
    assert (request.small_talk, request.intents) == (True, ())


def test_a_greeting_before_a_request_is_the_request() -> None:
    request = read_request("hi, please back up prod", ENVIRONMENTS)
    assert (request.small_talk, request.intent, request.target_env) == (False, "run_backup", "prod")


@pytest.mark.parametrize(
    ("text", "name"),
    [
        ("find the finance dashboards", "finance"),
        ("any churn dashboards on prod?", "churn"),
        ("show all dashboards", None),
        ("list my dashboards", None),
        ("which dashboards are broken?", None),
    ],
)
def test_a_plain_word_before_dashboards_is_what_they_are_about(text: str, name: str | None) -> None:
    assert read_request(text, ENVIRONMENTS).dashboard_name == name


@pytest.mark.parametrize(
    ("text", "intent", "negated"),
    [
        # a question of how things are asks it, whatever it negates
        ("на проде ничего не сломалось?", "get_health_summary", frozenset()),
        ("are the charts running without errors?", "get_health_summary", frozenset()),
        # a request not to check is not a question
        ("не проверяй здоровье, просто сделай бэкап прода", "run_backup", {"get_health_summary"}),
    ],
)
def test_a_negation_inside_a_question_of_state_does_not_negate_it(
    text: str, intent: str | None, negated: set[str]
) -> None:
    request = read_request(text, ENVIRONMENTS)
    assert (request.intent, request.negated) == (intent, frozenset(negated))


@pytest.mark.parametrize(
    ("text", "intent"),
    [
        ("which language models are set up here?", "list_llm_providers"),
        ("is the ai provider reachable right now?", "get_llm_status"),
        ("какие модели подключены, и отвечает ли сейчас провайдер?", "list_llm_providers"),
        ("list the superset instances we have", "list_environments"),
    ],
)
def test_models_and_instances_are_told_apart(text: str, intent: str) -> None:
    assert read_request(text, ENVIRONMENTS).intent == intent


@pytest.mark.parametrize(
    ("text", "target"),
    [
        ("take a snapshot of prod's metadata", "prod"),
        ("сделай бэкап prod-окружения", "prod"),
        ("back up dev, don't touch prod", "dev"),
        ("бэкап дев, кроме прода", "dev"),
    ],
)
def test_an_environment_is_read_in_a_possessive_a_compound_and_never_where_it_is_refused(
    text: str, target: str
) -> None:
    request = read_request(text, ENVIRONMENTS)
    assert (request.intent, request.target_env) == ("run_backup", target)


def test_an_apostrophe_inside_a_word_quotes_nothing() -> None:
    request = read_request("what's the largest ticket we've logged?", ENVIRONMENTS)
    assert request.quoted == ()
    assert request.intent == SQL_TOOL


@pytest.mark.parametrize(
    ("text", "mapping"),
    [
        ("migrate Ops Board to prod, map warehouse to analytics", (("warehouse", "analytics"),)),
        ("смигрируй Ops Board в прод, базу warehouse маппь на analytics", (("warehouse", "analytics"),)),
    ],
)
def test_a_database_mapping_is_read_either_way_round(text: str, mapping: tuple[tuple[str, str], ...]) -> None:
    request = read_request(text, ENVIRONMENTS)
    assert (request.intent, request.database_mapping) == ("execute_migration", mapping)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("commit Ops Board to team/ops-refresh, message: new layout", "team/ops-refresh"),
        ("заведи ветку feature/x", "feature/x"),
    ],
)
def test_a_name_with_a_slash_after_to_is_a_branch(text: str, value: str) -> None:
    assert read_request(text, ENVIRONMENTS).branch == value


@pytest.mark.parametrize(
    ("text", "dialect", "uncached", "published"),
    [
        ("format for postgres: select 1", "postgres", False, None),
        ("отформатируй под mysql: select 1", "mysql", False, None),
        ("recheck Ops Board bypassing the cache", None, True, None),
        ("создай дашборд «Ops» и опубликуй его", None, False, True),
    ],
)
def test_switches_are_read_from_plain_words(
    text: str, dialect: str | None, uncached: bool, published: bool | None
) -> None:
    request = read_request(text, ENVIRONMENTS)
    assert (request.dialect, request.uncached, request.published) == (dialect, uncached, published)


@pytest.mark.parametrize(
    ("text", "name"),
    [
        ("ship ops-weekly to prod", "ops weekly"),
        ("run a follow-up check on prod", None),
        ("create a dashboard with slug q3-sales", None),
    ],
)
def test_a_slug_names_the_dashboard_it_is_made_from(text: str, name: str | None) -> None:
    assert read_request(text, ENVIRONMENTS).dashboard_name == name


@pytest.mark.parametrize(
    ("text", "backend", "sql"),
    [
        (
            "tickets opened per month",
            "sqlite",
            "SELECT strftime('%Y-%m', opened_on) AS month, COUNT(*) FROM tickets GROUP BY 1 ORDER BY 1",
        ),
        (
            "сумма cost по дням",
            "postgresql",
            "SELECT date_trunc('day', opened_on) AS day, SUM(cost) FROM tickets GROUP BY 1 ORDER BY 1",
        ),
        (
            "топ-3 по сумме cost в разрезе team",
            None,
            "SELECT team, SUM(cost) AS value FROM tickets GROUP BY team ORDER BY value DESC LIMIT 3",
        ),
    ],
)
def test_rows_by_period_are_cut_in_the_databases_own_sql(text: str, backend: str | None, sql: str) -> None:
    assert described_sql(read_request(text, ENVIRONMENTS), "tickets", TICKETS, {}, backend) == sql


@pytest.mark.parametrize(
    ("text", "tables", "earlier", "table"),
    [
        ("show the weekly usage for the North region", ["accounts", "weekly_usage"], None, "weekly_usage"),
        ("how many tikcets are open?", ["tickets", "teams"], None, "tickets"),
        ("how many of them failed?", ["tickets", "teams"], "tickets", "tickets"),
        ("how many failed?", ["tickets", "teams"], None, None),
    ],
)
def test_the_table_is_the_real_one_the_words_or_the_conversation_name(
    text: str, tables: list[str], earlier: str | None, table: str | None
) -> None:
    assert table_named_in(read_request(text, ENVIRONMENTS), tables, None, earlier) == table


def test_a_value_is_spelt_as_the_data_has_it() -> None:
    held = {"customer": ["Acme"], "status": ["paid", "shipped"]}
    written = read_request("how many orders in status shiped?", ENVIRONMENTS)
    assert (
        described_sql(written, "orders", ORDERS, held)
        == "SELECT COUNT(*) FROM orders WHERE status = 'shipped'"
    )
    misspelt = read_request("how many urgnet tickets?", ENVIRONMENTS)
    assert described_sql(misspelt, "tickets", TICKETS, TICKET_VALUES) == (
        "SELECT COUNT(*) FROM tickets WHERE priority = 'Urgent'"
    )


@pytest.mark.parametrize(
    "row",
    [
        # a cell one typo from the question's word, carrying a quote or a backslash out of its literal
        {"column_name": "priority", "column_value": "urgen'"},
        {"column_name": "priority", "column_value": "urgen\\"},
        # a column name the database sent back that is not one
        {"column_name": "1=1 OR priority", "column_value": "Urgent"},
    ],
)
def test_what_a_database_holds_never_changes_the_statement_it_goes_into(row: dict[str, str]) -> None:
    held = probed_values({"rows": [row]})
    request = read_request("how many urgent tickets?", ENVIRONMENTS)
    assert described_sql(request, "tickets", TICKETS, held) == "SELECT COUNT(*) FROM tickets"
    # nor does a column the values were read for that the table does not have
    assert described_sql(request, "tickets", TICKETS, {"priority OR 1": ["Urgent"]}) == (
        "SELECT COUNT(*) FROM tickets"
    )
