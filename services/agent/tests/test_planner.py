"""The offline model's pace: unpaced it answers at once; paced, its words come one by one, so
an answer can be stopped halfway (the browser test's Stop relies on it). What it makes of
"this dashboard" asked from a dashboard (the drawer inside Superset). And that the longest
message anyone may send is read in about a second, whatever it repeats."""

import asyncio
import json
import time
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolCall, ToolMessage
from langchain_core.tools import StructuredTool

from sstools.agent.context import Environment, Focus, TurnContext
from sstools.agent.limits import MAX_MESSAGE_CHARS
from sstools.agent.planner import OfflinePlanner
from sstools.agent.tools import tool_schema
from sstools.common.catalogue import ARGS

BOARDS = [{"id": i, "title": f"Board {i}", "url": f"http://superset/{i}", "tags": []} for i in range(1, 4)]
RESULT = json.dumps({"env_id": "dev", "count": 3, "dashboards": BOARDS})
CONTEXT = TurnContext((Environment("dev", "dev", False),), "dev", "default")
MESSAGES = [
    CONTEXT.message(),
    HumanMessage("покажи дашборды"),
    AIMessage("", tool_calls=[{"name": "search_dashboards", "args": {"env_id": "dev"}, "id": "call_1"}]),
    ToolMessage(RESULT, tool_call_id="call_1", name="search_dashboards"),
]


async def _words(model: OfflinePlanner) -> list[str]:
    return [str(chunk.content) async for chunk in model.astream(MESSAGES) if chunk.content]


async def test_the_paced_offline_model_streams_the_same_answer_word_by_word() -> None:
    answer = str(OfflinePlanner().plan(MESSAGES).content)
    unpaced = await _words(OfflinePlanner())
    started = time.perf_counter()
    paced = await _words(OfflinePlanner(words_per_second=40).bind_tools([]))
    elapsed = time.perf_counter() - started
    assert "".join(unpaced) == "".join(paced) == answer
    assert answer.startswith("Дашборды в dev: 3.")
    assert len(paced) >= 5
    assert elapsed >= len(paced) / 40  # each word waits its turn


async def test_a_paced_answer_stops_halfway_when_cancelled() -> None:
    received: list[str] = []
    first_word = asyncio.Event()

    async def read() -> None:
        async for chunk in OfflinePlanner(words_per_second=20).astream(MESSAGES):
            received.append(str(chunk.content))
            if chunk.content:
                first_word.set()

    reading = asyncio.create_task(read())
    await first_word.wait()
    reading.cancel()
    await asyncio.gather(reading, return_exceptions=True)
    answer = str(OfflinePlanner().plan(MESSAGES).content)
    assert 0 < len("".join(received)) < len(answer)
    assert answer.startswith("".join(received))


def test_this_dashboard_is_the_one_on_screen_and_the_answer_names_it() -> None:
    on_screen = TurnContext(
        (Environment("dev", "dev", False),), "dev", "page", "en", Focus("dashboard", 1, "Sales Overview")
    )
    asked = [on_screen.message(), HumanMessage("Is this dashboard healthy?")]
    (planned,) = OfflinePlanner().plan(asked).tool_calls
    assert (planned["name"], planned["args"]) == (
        "get_health_summary",
        {"env_id": "dev", "dashboard_ids": [1]},
    )
    checked = {
        "env_id": "dev",
        "charts_checked": 3,
        "broken_charts": [],
        "dashboards_with_problems": [],
        "dashboards_checked": 1,
        "only": [{"dashboard_id": 1, "title": "Sales Overview"}],
    }
    answered = [
        *asked,
        AIMessage("", tool_calls=[{**planned, "id": "call_1"}]),
        ToolMessage(json.dumps(checked), tool_call_id="call_1", name="get_health_summary"),
    ]
    assert OfflinePlanner().plan(answered).content == "All 3 charts in «Sales Overview» (dev) work."
    # a title is a Superset editor's words: it is named, never made into a link of theirs
    checked["only"] = [{"dashboard_id": 1, "title": "[Reset your password](https://evil.example)"}]
    answered[-1] = ToolMessage(json.dumps(checked), tool_call_id="call_1", name="get_health_summary")
    assert OfflinePlanner().plan(answered).content == (
        "All 3 charts in «\\[Reset your password\\]\\(https\\:\\/\\/evil\\.example\\)» (dev) work."
    )


# Each of these, repeated, was once read from every one of its characters again: a pattern that
# can start anywhere in a long run (an address, a name with a dash, a number of rows), or a name
# looked for over the whole message after each "dashboard". At the longest message allowed that
# took 1.5 to 3 minutes of the agent's CPU for one turn; read in one pass it takes about a second.
# So was the start of the word naming a change asked after another, found before a long word.
def _longest(unit: str, head: str = "", tail: str = "") -> str:
    """The longest message allowed: ``unit`` repeated between ``head`` and ``tail``."""
    run = MAX_MESSAGE_CHARS - len(head) - len(tail)
    return head + (unit * run)[:run] + tail


@pytest.mark.parametrize(
    "text",
    [
        *(_longest(unit) for unit in ("a", "1", "a-", "dashboard ")),
        _longest("a", "сделай бэкап prod ", " потом начни техработы"),
    ],
    ids=["a", "1", "a-", "dashboard", "a change after a long word"],
)
def test_the_longest_message_is_read_in_one_pass_whatever_it_repeats(text: str) -> None:
    started = time.perf_counter()
    OfflinePlanner().plan([CONTEXT.message(), HumanMessage(text)])
    assert time.perf_counter() - started < 20


def _planned(messages: list[Any]) -> list[tuple[str, dict[str, Any]]]:
    return [(call["name"], call["args"]) for call in OfflinePlanner().plan(messages).tool_calls]


def _answered(messages: list[Any], name: str, args: dict[str, Any], result: dict[str, Any]) -> list[Any]:
    """The thread after the planner's ``name`` call and its result."""
    number = f"call_{len(messages)}"
    call = AIMessage("", tool_calls=[{"name": name, "args": args, "id": number}])
    return [*messages, call, ToolMessage(json.dumps(result), tool_call_id=number, name=name)]


DATABASES = {"env_id": "dev", "databases": [{"id": 1, "name": "examples"}, {"id": 2, "name": "warehouse"}]}
EXPLORE = "superset_explore_database"


@pytest.mark.parametrize(
    ("tables", "asked"),
    [({1: ["sales"], 2: ["orders", "accounts"]}, False), ({1: ["orders"], 2: ["orders"]}, True)],
)
def test_a_query_runs_in_the_one_database_that_has_its_table_else_it_asks(
    tables: dict[int, list[str]], asked: bool
) -> None:
    messages: list[Any] = [CONTEXT.message(), HumanMessage("SELECT count(*) FROM orders")]
    assert _planned(messages) == [(EXPLORE, {"env_id": "dev"})]
    messages = _answered(messages, EXPLORE, {"env_id": "dev"}, DATABASES)
    for database, schema in ((1, "main"), (2, "public")):
        listed = {"env_id": "dev", "database_id": database}
        assert _planned(messages) == [(EXPLORE, listed)]
        # a system schema is never looked in for a person's table
        schemas = {"env_id": "dev", "schemas": ["information_schema", schema]}
        messages = _answered(messages, EXPLORE, listed, schemas)
        assert _planned(messages) == [(EXPLORE, {**listed, "schema": schema})]
        messages = _answered(messages, EXPLORE, {**listed, "schema": schema}, {"tables": tables[database]})
    planned = OfflinePlanner().plan(messages)
    if asked:
        assert planned.tool_calls == []
        assert planned.response_metadata == {"needs_clarification": True}
        assert "| 1 | examples |" in str(planned.content)
        assert "| 2 | warehouse |" in str(planned.content)
    else:
        sql = {"env_id": "dev", "database_id": 2, "sql": "SELECT count(*) FROM orders"}
        assert [(call["name"], call["args"]) for call in planned.tool_calls] == [
            ("superset_execute_sql", sql)
        ]


def _routed(*names: str) -> OfflinePlanner:
    """The offline model with ``names`` bound, in the router's order, as a turn binds them."""

    async def run(**values: Any) -> str:
        return ""

    bound = [
        StructuredTool.from_function(
            coroutine=run, name=name, description=name, args_schema=tool_schema(ARGS[name])
        )
        for name in names
    ]
    return OfflinePlanner().bind_tools(bound)


@pytest.mark.parametrize(
    "text", ["thanks, that's all for now", "Привет! Как настроение?", "never mind, cancel that"]
)
def test_a_change_the_router_suggests_on_meaning_alone_is_never_proposed(text: str) -> None:
    """The embedding tier finds small talk near the tuning set's examples of ending maintenance:
    the planner proposes a change only when the message's words name it."""
    planned = _routed("end_maintenance", "show_capabilities").plan([CONTEXT.message(), HumanMessage(text)])
    assert planned.tool_calls == []


def test_a_read_the_router_suggests_on_meaning_alone_is_made() -> None:
    asked = [CONTEXT.message(), HumanMessage("Есть ли у нас запланированные простои?")]
    planned = _routed("list_maintenance_events", "show_capabilities").plan(asked)
    assert [call["name"] for call in planned.tool_calls] == ["list_maintenance_events"]
    named = [CONTEXT.message(), HumanMessage("end the maintenance on dev")]
    assert [call["name"] for call in _routed("end_maintenance").plan(named).tool_calls] == ["end_maintenance"]


def test_a_table_outside_the_default_schema_is_looked_for_in_the_others_and_its_values_read() -> None:
    """A question in words about a table of a second schema: the default schema first, then the
    next; the values the question may name are read from the table before the query is written."""
    one_database = {"env_id": "dev", "databases": [{"id": 2, "name": "warehouse"}]}
    messages: list[Any] = [CONTEXT.message(), HumanMessage("how many overdue bills are there?")]
    assert _planned(messages) == [(EXPLORE, {"env_id": "dev"})]
    messages = _answered(messages, EXPLORE, {"env_id": "dev"}, one_database)
    listed = {"env_id": "dev", "database_id": 2}
    assert _planned(messages) == [(EXPLORE, listed)]
    messages = _answered(messages, EXPLORE, listed, {"schemas": ["pg_toast", "public", "billing"]})
    for schema, tables in (("public", ["accounts"]), ("billing", ["bills", "payments"])):
        assert _planned(messages) == [(EXPLORE, {**listed, "schema": schema})]
        messages = _answered(messages, EXPLORE, {**listed, "schema": schema}, {"tables": tables})
    table = {**listed, "schema": "billing", "table": "bills"}
    assert _planned(messages) == [(EXPLORE, table)]
    columns = [{"name": "id", "type": "INTEGER"}, {"name": "state", "type": "VARCHAR(12)"}]
    messages = _answered(messages, EXPLORE, table, {"columns": columns})
    ((tool, probe),) = _planned(messages)
    assert tool == "superset_execute_sql"
    assert "SELECT DISTINCT state FROM bills" in probe["sql"]
    held = {"rows": [{"column_name": "state", "column_value": value} for value in ("open", "Overdue")]}
    messages = _answered(messages, tool, probe, held)
    assert _planned(messages) == [
        (
            tool,
            {"env_id": "dev", "database_id": 2, "sql": "SELECT COUNT(*) FROM bills WHERE state = 'Overdue'"},
        )
    ]


def _turn(text: str, name: str, args: dict[str, Any], result: dict[str, Any]) -> list[Any]:
    """An earlier turn: its message, the call it made and what came back."""
    return _answered([HumanMessage(text)], name, args, result)


COPY = {"env_id": "dev", "dashboard_id": 4, "title": "Ops (draft)"}


@pytest.mark.parametrize(
    ("text", "call"),
    [
        # a switch said after a call: the same call, with it
        ("and the charts too, please", ("superset_copy_dashboard", {**COPY, "duplicate_charts": True})),
        ("только вместе с чартами", ("superset_copy_dashboard", {**COPY, "duplicate_charts": True})),
    ],
)
def test_a_follow_up_adding_a_switch_is_the_last_call_with_it(text: str, call: tuple[str, Any]) -> None:
    earlier = _turn("copy Ops as «Ops (draft)»", "superset_copy_dashboard", COPY, {"status": "rejected"})
    assert _planned([CONTEXT.message(), *earlier, HumanMessage(text)]) == [call]


def test_another_one_is_the_last_tool_with_what_the_follow_up_names() -> None:
    one_database = {"env_id": "dev", "databases": [{"id": 2, "name": "warehouse"}]}
    registered = {"env_id": "dev", "database_id": 2, "table_name": "accounts", "schema": "public"}
    earlier = _turn("register accounts as a dataset", "superset_create_dataset", registered, {"id": 9})
    messages: list[Any] = [CONTEXT.message(), *earlier, HumanMessage("and one more from bills")]
    for where, result in (
        ({"env_id": "dev"}, one_database),
        ({"env_id": "dev", "database_id": 2}, {"schemas": ["public"]}),
        ({"env_id": "dev", "database_id": 2, "schema": "public"}, {"tables": ["accounts", "bills"]}),
    ):
        assert _planned(messages) == [(EXPLORE, where)]
        messages = _answered(messages, EXPLORE, where, result)
    assert _planned(messages) == [("superset_create_dataset", {**registered, "table_name": "bills"})]


def test_a_follow_up_naming_no_value_the_table_holds_asks_instead_of_running_the_query_again() -> None:
    counted = {"env_id": "dev", "database_id": 2, "sql": "SELECT COUNT(*) FROM bills"}
    earlier = _turn("how many bills are there?", "superset_execute_sql", counted, {"rows": [{"n": 3}]})
    where = {"env_id": "dev", "database_id": 2, "schema": "public", "table": "bills"}
    reads: list[tuple[dict[str, Any], dict[str, Any]]] = [
        ({"env_id": "dev"}, {"databases": [{"id": 2, "name": "warehouse"}]}),
        ({"env_id": "dev", "database_id": 2}, {"schemas": ["public"]}),
        ({"env_id": "dev", "database_id": 2, "schema": "public"}, {"tables": ["bills"]}),
        (where, {"columns": [{"name": "state", "type": "TEXT"}]}),
    ]
    for text, value, filtered in (
        ("looks good", "open", None),
        ("only Overdue", "Overdue", "SELECT COUNT(*) FROM bills WHERE state = 'Overdue'"),
    ):
        messages: list[Any] = [CONTEXT.message(), *earlier, HumanMessage(text)]
        for where_read, result in reads:
            messages = _answered(messages, EXPLORE, where_read, result)
        ((tool, probe),) = _planned(messages)
        assert tool == "superset_execute_sql"
        rows = {"rows": [{"column_name": "state", "column_value": held} for held in ("open", value)]}
        planned = OfflinePlanner().plan(_answered(messages, tool, probe, rows))
        if filtered is None:
            assert planned.tool_calls == []
            assert planned.response_metadata == {"needs_clarification": True}
        else:
            assert [(call["name"], call["args"]["sql"]) for call in planned.tool_calls] == [(tool, filtered)]


WITH_PROD = TurnContext(
    (Environment("dev", "dev", False), Environment("prod", "prod", True)), "dev", "default"
)


def _done(messages: list[Any], call: ToolCall, result: dict[str, Any], *, failed: bool = False) -> None:
    messages.append(AIMessage("", tool_calls=[{**call, "id": call["id"]}]))
    messages.append(
        ToolMessage(
            json.dumps(result),
            tool_call_id=call["id"],
            name=call["name"],
            status="error" if failed else "success",
        )
    )


def test_changes_asked_at_once_are_made_one_after_another_and_each_outcome_said() -> None:
    messages: list[Any] = [WITH_PROD.message(), HumanMessage("сделай бэкап prod и начни техработы")]
    (backup,) = OfflinePlanner().plan(messages).tool_calls
    assert (backup["name"], backup["args"]) == ("run_backup", {"env_id": "prod"})
    _done(messages, backup, {"id": "b1", "kind": "backup", "status": "success", "result": {"env_id": "prod"}})
    (window,) = OfflinePlanner().plan(messages).tool_calls  # the next one, once the backup is made
    assert (window["name"], window["args"]["env_id"]) == ("start_maintenance", "prod")
    _done(
        messages, window, {"id": "w1", "env_id": "prod", "reason": "r", "started_by": "adam", "active": True}
    )
    answer = OfflinePlanner().plan(messages)
    assert answer.tool_calls == []
    said = str(answer.content).split("\n\n")
    assert len(said) == 2, said
    assert "backup" in said[0], said
    assert "| prod |" in said[1], said


def test_a_change_that_failed_stops_the_ones_after_it_and_the_answer_says_what_was_not_done() -> None:
    messages: list[Any] = [WITH_PROD.message(), HumanMessage("сделай бэкап prod и начни техработы")]
    (backup,) = OfflinePlanner().plan(messages).tool_calls
    _done(messages, backup, {"error": {"code": "rejected", "message": "nothing was run"}}, failed=True)
    answer = OfflinePlanner().plan(messages)
    assert answer.tool_calls == []
    assert str(answer.content).endswith(
        "Остальное из запроса не сделано; попросите отдельно, например: «Начни регламентные работы в prod»."
    )
    # a change that still runs as a task when its call answered: the next waits for its end
    running: list[Any] = [WITH_PROD.message(), HumanMessage("сделай бэкап prod и начни техработы")]
    (started,) = OfflinePlanner().plan(running).tool_calls
    _done(running, started, {"id": "b1", "kind": "backup", "status": "queued", "result": None})
    waits = OfflinePlanner().plan(running)
    assert waits.tool_calls == []
    assert str(waits.content).endswith(
        "Остальное из запроса не сделано — попросите, когда задача закончится, например: "
        "«Начни регламентные работы в prod»."
    )
    # one change asked, one made: its outcome alone, as ever
    single: list[Any] = [WITH_PROD.message(), HumanMessage("сделай бэкап prod")]
    (alone,) = OfflinePlanner().plan(single).tool_calls
    _done(single, alone, {"id": "b1", "kind": "backup", "status": "success", "result": {"env_id": "prod"}})
    assert "\n\n" not in str(OfflinePlanner().plan(single).content)


def test_a_check_that_finds_errors_stops_the_deploy_asked_after_it() -> None:
    messages: list[Any] = [
        WITH_PROD.message(),
        HumanMessage("Сначала проверь Sales Overview через LLM, потом задеплой его в прод"),
    ]
    found = {"env_id": "dev", "count": 1, "dashboards": [{"id": 7, "title": "Sales Overview", "tags": []}]}
    for _ in range(3):  # the name resolved, then the check itself
        (call,) = OfflinePlanner().plan(messages).tool_calls
        if call["name"] != "search_dashboards":
            break
        _done(messages, call, found)
    assert (call["name"], call["args"]["dashboard_id"]) == ("run_llm_validation", 7)
    invalid = {"title": "Sales Overview", "valid": False, "errors": 1, "findings": []}
    _done(messages, call, {"id": "v1", "kind": "llm_validation", "status": "success", "result": invalid})
    answer = OfflinePlanner().plan(messages)
    assert answer.tool_calls == []  # no deploy card after a check that failed
    assert "Остальное из запроса не сделано" in str(answer.content)
