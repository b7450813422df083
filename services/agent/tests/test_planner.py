"""The offline model, over a live system it has never seen: a helpdesk database with tables and
values no code names, dashboards titled as nobody's demo. What it proposes for plain requests in
Russian and English — the tool the words name affirmed, its arguments from the words, the live
system and the conversation — and what it asks when it cannot tell; that it reads the live system
through one cached outline; its pace; and that it reads the longest message fast.

The live system here is data (``Ground`` serves it as the agent's grounding does); the same
readers run against real Superset instances in ``test_understanding.py`` and the eval sets."""

import asyncio
import json
import time
from collections.abc import Sequence
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolCall, ToolMessage
from langchain_core.tools import StructuredTool

from sstools.agent.context import Environment, Focus, TurnContext
from sstools.agent.limits import MAX_MESSAGE_CHARS
from sstools.agent.planner import GROUND, OfflinePlanner
from sstools.agent.planner.grounded import find
from sstools.agent.planner.named import with_names_read
from sstools.agent.tools import tool_schema
from sstools.common.catalogue import ARGS, tool
from sstools.common.language import words
from sstools.common.outline import EnvOutline, OutlineColumn, OutlineDatabase, OutlineTable

ENVIRONMENTS = (Environment("dev", "dev", False), Environment("prod", "prod", True))
CONTEXT = TurnContext(ENVIRONMENTS, "dev", "default")
C = OutlineColumn
HELPDESK = OutlineDatabase(
    id=7,
    name="helpdesk",
    backend="postgresql",
    tables=[
        OutlineTable(
            schema_name="support",
            name="tickets",
            columns=[
                C(name="ticket_no", type="INTEGER"),
                C(name="subject", type="TEXT"),
                C(name="status", type="TEXT", values=["open", "closed", "waiting"]),
                C(name="priority", type="TEXT", values=["critical", "normal"]),
                C(name="team", type="TEXT", values=["core", "billing"]),
                C(name="opened_on", type="DATE"),
                C(name="hours_spent", type="NUMERIC(6,1)"),
                C(name="escalated", type="BOOLEAN"),
            ],
        ),
        OutlineTable(
            schema_name="logistics",
            name="shipments",
            columns=[
                C(name="parcel", type="INTEGER"),
                C(name="state", type="VARCHAR(12)", values=["delivered", "lost"]),
            ],
        ),
    ],
)
OUTLINE = EnvOutline(
    env_id="dev", databases=[OutlineDatabase(id=1, name="scratch", backend="sqlite", tables=[]), HELPDESK]
)
TITLES = {11: "Churn Radar", 12: "Queue Health", 13: "Churn Radar Archive"}


class Ground:
    """The live system as one person sees it, counting what was read."""

    def __init__(self, titles: dict[int, str] = TITLES, outline: EnvOutline = OUTLINE) -> None:
        self._titles, self._outline = titles, outline
        self.reads: list[str] = []

    async def titles(self, env_id: str) -> dict[int, str]:
        return self._titles

    async def outline(self, env_id: str) -> EnvOutline:
        self.reads.append(env_id)
        return self._outline

    async def relate(self, queries: Sequence[str], labels: Sequence[str]) -> list[list[float]] | None:
        return None  # spelling alone: the router's model is the stack tests' part


async def _plan(
    messages: list[BaseMessage], ground: Any = None, model: OfflinePlanner | None = None
) -> AIMessage:
    GROUND.set(ground or Ground())
    answer = await (model or OfflinePlanner()).ainvoke(messages)
    assert isinstance(answer, AIMessage)
    return answer


async def _calls(
    text: str, *earlier: BaseMessage, context: TurnContext = CONTEXT, ground: Any = None
) -> list[tuple[str, dict[str, Any]]]:
    planned = await _plan([context.message(), *earlier, HumanMessage(text)], ground)
    return [(call["name"], call["args"]) for call in planned.tool_calls]


def _answered(messages: list[BaseMessage], planned: AIMessage, result: Any) -> list[BaseMessage]:
    call = planned.tool_calls[0]
    return [*messages, planned, ToolMessage(json.dumps(result), tool_call_id=call["id"], name=call["name"])]


SQL = "superset_execute_sql"


@pytest.mark.parametrize(
    ("text", "statement"),
    [
        (
            "how many tickets are open?",
            """SELECT COUNT(*) FROM "support"."tickets" WHERE "status" = 'open'""",
        ),
        (  # a word of the question a typo away
            "сколко тикетов в статусе open?",
            """SELECT COUNT(*) FROM "support"."tickets" WHERE "status" = 'open'""",
        ),
        (
            "how many critical tickets do we have?",
            """SELECT COUNT(*) FROM "support"."tickets" WHERE "priority" = 'critical'""",
        ),
        (
            "count tickets per team",
            """SELECT "team", COUNT(*) FROM "support"."tickets" GROUP BY "team" ORDER BY 2 DESC NULLS LAST""",
        ),
        (
            "сколько тикетов по статусу",
            'SELECT "status", COUNT(*) FROM "support"."tickets" GROUP BY "status" ORDER BY 2 DESC NULLS LAST',
        ),
        (
            "how many shipments were delivered?",
            """SELECT COUNT(*) FROM "logistics"."shipments" WHERE "state" = 'delivered'""",
        ),
        (
            "average hours spent on critical tickets",
            """SELECT AVG("hours_spent") FROM "support"."tickets" WHERE "priority" = 'critical'""",
        ),
        (  # a column by a part of its name no other column has
            "average hours on critical tickets",
            """SELECT AVG("hours_spent") FROM "support"."tickets" WHERE "priority" = 'critical'""",
        ),
        (
            "top 3 tickets by hours spent",
            """SELECT * FROM "support"."tickets" ORDER BY "hours_spent" DESC NULLS LAST LIMIT 3""",
        ),
        ("show 5 shipments", """SELECT * FROM "logistics"."shipments" LIMIT 5"""),
        (
            "сколько эскалированных тикетов",
            """SELECT COUNT(*) FROM "support"."tickets" WHERE "escalated" = TRUE""",
        ),
        (
            "how many tickets were opened in 2025?",
            """SELECT COUNT(*) FROM "support"."tickets" """
            """WHERE "opened_on" >= '2025-01-01' AND "opened_on" < '2026-01-01'""",
        ),
    ],
)
async def test_a_question_in_words_is_a_statement_over_the_table_it_names(text: str, statement: str) -> None:
    ground = Ground()
    assert await _calls(text, ground=ground) == [
        (
            SQL,
            {
                "env_id": "dev",
                "database_id": 7,
                "sql": statement,
                "schema": statement.split('"')[-4] if False else _schema(statement),
            },
        )
    ]
    assert set(ground.reads) == {"dev"}  # its outline (read once: the grounding keeps it); the statement


def _schema(statement: str) -> str:
    return statement.split('FROM "')[1].split('"')[0]


class ModelGround(Ground):
    """The same system, words related to names by the router's own model, in process."""

    def __init__(self, relater: Any) -> None:
        super().__init__()
        self._relater = relater

    async def relate(self, queries: Sequence[str], labels: Sequence[str]) -> list[list[float]]:
        return [list(map(float, row)) for row in self._relater.relate(queries, labels).scores]


@pytest.fixture(scope="module")
def model_ground() -> ModelGround:
    from sstools.router.embedding.backends import load_embedder
    from sstools.router.embedding.relate import Relater

    return ModelGround(Relater(load_embedder("onnx-e5", 1)))


async def test_a_question_naming_its_table_in_another_language_is_about_the_nearest_table(
    model_ground: ModelGround,
) -> None:
    """No word spells ``shipments``: the whole question is nearest to it, and its value
    ("доставленных" of ``delivered``) is read by meaning too."""
    (call,) = await _calls("сколько доставленных отправлений?", ground=model_ground)
    assert call[1]["sql"] == """SELECT COUNT(*) FROM "logistics"."shipments" WHERE "state" = 'delivered'"""


async def test_the_word_after_by_is_the_column_it_means(model_ground: ModelGround) -> None:
    """The word "department" spells no column: after "per" it is the one it means, ``team``."""
    (call,) = await _calls("count tickets per department", ground=model_ground)
    assert call[1]["sql"] == (
        """SELECT "team", COUNT(*) FROM "support"."tickets" GROUP BY "team" ORDER BY 2 DESC NULLS LAST"""
    )


@pytest.mark.parametrize(
    "text",
    ["посчитай часы по каждой команде", "count hours_spent per team", "Sum of hours by team? Use tickets."],
)
async def test_a_verb_of_counting_with_a_measure_sums_it(model_ground: ModelGround, text: str) -> None:
    """ "посчитай часы": the hours, summed; a capital at a sentence's start is no name asked about."""
    (call,) = await _calls(text, ground=model_ground)
    assert call[1]["sql"] == (
        'SELECT "team", SUM("hours_spent") FROM "support"."tickets" '
        'GROUP BY "team" ORDER BY 2 DESC NULLS LAST'
    )


async def test_tools_named_alike_are_told_apart_by_the_whole_messages_meaning(
    model_ground: ModelGround,
) -> None:
    """ "provider" names the list of providers as much as "up" names their state."""
    assert await _calls("is the LLM provider up?", ground=model_ground) == [("get_llm_status", {})]


async def test_a_word_meaning_a_numeric_column_is_what_a_grouping_sums(model_ground: ModelGround) -> None:
    """ "часы" spells no column; it means ``hours_spent`` more than anything else of the table (a
    count asked in words stays a count)."""
    (call,) = await _calls("часы по каждой команде", ground=model_ground)
    assert call[1]["sql"] == (
        'SELECT "team", SUM("hours_spent") FROM "support"."tickets" '
        'GROUP BY "team" ORDER BY 2 DESC NULLS LAST'
    )


@pytest.mark.parametrize(
    "text",
    ["how many tickets are stuck?", "сколько тикетов у Пети", "what is the average of critical tickets?"],
)
async def test_a_condition_it_cannot_read_is_asked_about_never_dropped(text: str) -> None:
    planned = await _plan([CONTEXT.message(), HumanMessage(text)])
    assert planned.tool_calls == []
    assert planned.response_metadata["needs_clarification"] is True
    assert "tickets" in str(planned.content)
    assert "status" in str(planned.content)


async def test_the_answer_says_which_conditions_it_applied() -> None:
    messages: list[BaseMessage] = [CONTEXT.message(), HumanMessage("how many tickets are open?")]
    planned = await _plan(messages)
    answered = await _plan(
        _answered(messages, planned, {"columns": ["count"], "rows": [{"count": 4}], "row_count": 1})
    )
    assert str(answered.content).startswith("Conditions: status \\= open")  # Markdown-escaped


async def test_a_follow_up_changes_the_last_question() -> None:
    messages: list[BaseMessage] = [CONTEXT.message(), HumanMessage("how many tickets are open?")]
    planned = await _plan(messages)
    earlier = [*_answered(messages, planned, {"rows": [{"count": 4}]})[1:], AIMessage("4")]
    assert await _calls("and closed?", *earlier) == [
        (
            SQL,
            {
                "env_id": "dev",
                "database_id": 7,
                "sql": """SELECT COUNT(*) FROM "support"."tickets" WHERE "status" = 'closed'""",
                "schema": "support",
            },
        )
    ]
    assert (await _calls("а по приоритету?", *earlier))[0][1]["sql"] == (
        """SELECT "priority", COUNT(*) FROM "support"."tickets" WHERE "status" = 'open' """
        """GROUP BY "priority" ORDER BY 2 DESC NULLS LAST"""
    )


async def test_a_statement_runs_in_the_database_named_else_the_one_that_has_its_tables_else_it_asks() -> None:
    assert await _calls("SELECT count(*) FROM shipments") == [
        (SQL, {"env_id": "dev", "sql": "SELECT count(*) FROM shipments", "database_id": 7})
    ]
    twice = EnvOutline(
        env_id="dev", databases=[HELPDESK, HELPDESK.model_copy(update={"id": 8, "name": "replica"})]
    )
    planned = await _plan(
        [CONTEXT.message(), HumanMessage("SELECT count(*) FROM shipments")], Ground(outline=twice)
    )
    assert planned.tool_calls == []
    assert "7 — helpdesk" in str(planned.content)
    assert "8 — replica" in str(planned.content)
    named = "run this in the replica database: SELECT count(*) FROM shipments"
    assert await _calls(named, ground=Ground(outline=twice)) == [
        (SQL, {"env_id": "dev", "sql": "SELECT count(*) FROM shipments", "database_id": 8})
    ]
    own = "WITH n AS (SELECT 1 AS x) SELECT count(*) FROM n"  # a table of its own: no database's
    assert await _calls(f"run {own}") == [(SQL, {"env_id": "dev", "sql": own, "database_id": 1})]


async def test_columns_of_a_table_are_explored_where_it_is() -> None:
    assert await _calls("what columns does the tickets table have?") == [
        (
            "superset_explore_database",
            {"env_id": "dev", "database_id": 7, "table": "tickets", "schema": "support"},
        )
    ]


@pytest.mark.parametrize(
    ("text", "call"),
    [
        (
            "не надо ничего деплоить, просто скажи, есть ли ошибки в Queue Health",
            ("get_health_summary", {"env_id": "dev", "dashboard_ids": [12]}),
        ),
        (
            "пока ничего не выкатывай, сначала посмотри, нет ли ошибок в Churn Radar",
            ("get_health_summary", {"env_id": "dev", "dashboard_ids": [11]}),
        ),
        ("бэкап не делай, покажи окружения", ("list_environments", {})),
        # a read negated in a question is asked about
        (
            "Queue Health на проде в порядке? ничего не отвалилось?",
            ("get_health_summary", {"env_id": "prod", "dashboard_ids": [12]}),
        ),
        (
            "не выполняй, только перепиши аккуратно: select subject from support.tickets",
            ("superset_format_sql", {"sql": "select subject from support.tickets"}),
        ),
    ],
)
async def test_russian_a_negated_action_is_not_proposed_and_the_rest_is_done(
    text: str, call: tuple[str, Any]
) -> None:
    assert await _calls(text) == [call]


@pytest.mark.parametrize(
    ("text", "call"),
    [
        (
            "don't deploy anything, just tell me if Queue Health has errors",
            ("get_health_summary", {"env_id": "dev", "dashboard_ids": [12]}),
        ),
        ("do not back up prod, list the environments instead", ("list_environments", {})),
        (
            "don't execute it, just prettify: select subject from support.tickets",
            ("superset_format_sql", {"sql": "select subject from support.tickets"}),
        ),
    ],
)
async def test_english_a_negated_action_is_not_proposed_and_the_rest_is_done(
    text: str, call: tuple[str, Any]
) -> None:
    assert await _calls(text) == [call]


@pytest.mark.parametrize(
    "text", ["не деплой Churn Radar на прод", "don't deploy Churn Radar to prod", "no backup today"]
)
async def test_a_request_negated_in_full_proposes_nothing(text: str) -> None:
    planned = await _plan([CONTEXT.message(), HumanMessage(text)])
    assert planned.tool_calls == []


@pytest.mark.parametrize(
    ("text", "call"),
    [
        (
            "migrate dashboards 11 and 12 from dev to prod",
            ("execute_migration", {"source_env": "dev", "dashboard_ids": [11, 12], "env_id": "prod"}),
        ),
        (
            "deploy Churn Radar to prod",
            ("deploy_dashboard", {"dashboard_id": 11, "source_env": "dev", "env_id": "prod"}),
        ),
        ("list maintenance windows of all environments", ("list_maintenance_events", {})),
        (
            "start maintenance on prod because of the nightly upgrade",
            ("start_maintenance", {"reason": "the nightly upgrade", "env_id": "prod"}),
        ),
        ("are there dashboards with errors in dev?", ("get_health_summary", {"env_id": "dev"})),
        # function words do not part a phrase's words
        ("so what sorts of things can you do here?", ("show_capabilities", {})),
        # what the listed object is said to have names the read, not the listing's verb
        ("покажи дашборды с проблемами на проде", ("get_health_summary", {"env_id": "prod"})),
        ("покажи дашборды с тегом ops", ("search_dashboards", {"env_id": "dev", "tag": "ops"})),
        ("какие дашборды есть на проде?", ("search_dashboards", {"env_id": "prod"})),
        ("find dashboards tagged finance", ("search_dashboards", {"env_id": "dev", "tag": "finance"})),
        # a free text ends where an environment is named, and starts past the words that lead it
        ("find dashboards tagged ops on prod", ("search_dashboards", {"env_id": "prod", "tag": "ops"})),
        ("create a branch named team/q1-radar", ("create_branch", {"name": "team/q1-radar"})),
        # a change by the noun of its object, where the words give the object's name
        ("сздай ветку team/q2-load", ("create_branch", {"name": "team/q2-load"})),
        # what is looked for: the words right before the noun
        ("look up the churn dashbaords", ("search_dashboards", {"query": "churn", "env_id": "dev"})),
        # an action word a typo away, a title with two letters swapped
        (
            "deplyo Churn Radra to prod",
            ("deploy_dashboard", {"dashboard_id": 11, "source_env": "dev", "env_id": "prod"}),
        ),
        # a phrase of two words, one of them misspelt
        ("finish maintenanse on prod", ("end_maintenance", {"env_id": "prod"})),
        ("заверши обслуживаене на prod", ("end_maintenance", {"env_id": "prod"})),
        # the action refused, the noun of its object is still a read's ("maintenance" of windows)
        (
            "do not begin maintenance, which windows are planned for prod?",
            ("list_maintenance_events", {"env_id": "prod"}),
        ),
        # a word of another tool between a phrase's words splits it: a state, not an LLM review
        (
            "проверь здоровье дашборда Churn Radar",
            ("get_health_summary", {"env_id": "dev", "dashboard_ids": [11]}),
        ),
        # why, said in a clause of its own that names only an object
        (
            "start maintenance on prod, the database gets new disks",
            ("start_maintenance", {"reason": "the database gets new disks", "env_id": "prod"}),
        ),
        # a function word between a phrase's words ("create a dashboard")
        (
            "create a dashboard called 'Pager Load'",
            ("superset_create_dashboard", {"title": "Pager Load", "env_id": "dev"}),
        ),
        # a question about a dashboard and nothing else: how it is
        ("Churn Radar сегодня нормально?", ("get_health_summary", {"env_id": "dev", "dashboard_ids": [11]})),
        # a free text ends before the function words that lead the next argument
        (
            "create a dashboard called Pager Load with slug pager-load",
            ("superset_create_dashboard", {"title": "Pager Load", "slug": "pager-load", "env_id": "dev"}),
        ),
        # the noun of a dashboard in the other language
        (
            "создай dashboard «Pager Load»",
            ("superset_create_dashboard", {"title": "Pager Load", "env_id": "dev"}),
        ),
        # a word of the language is no typo of an action ("skipping" of "ship")
        (
            "re-run the charts of Queue Health skipping the cache: do any fail?",
            ("get_health_summary", {"env_id": "dev", "dashboard_ids": [12], "force": True}),
        ),
        # a negation before a place refuses the place, not the action
        ("найди дашборды не на проде, а на деве", ("search_dashboards", {"env_id": "dev"})),
        # a mapping of databases, the marker either side of the first name
        (
            "migrate Queue Health from dev to prod mapping helpdesk to helpdesk_v2",
            (
                "execute_migration",
                {
                    "source_env": "dev",
                    "dashboard_ids": [12],
                    "database_mapping": {"helpdesk": "helpdesk_v2"},
                    "env_id": "prod",
                },
            ),
        ),
        (
            "перенеси Churn Radar с dev на prod, базу helpdesk замапь на helpdesk_v2",
            (
                "execute_migration",
                {
                    "source_env": "dev",
                    "dashboard_ids": [11],
                    "database_mapping": {"helpdesk": "helpdesk_v2"},
                    "env_id": "prod",
                },
            ),
        ),
        # a statement of no table runs in the environment's first database
        ("run SELECT 1", (SQL, {"sql": "SELECT 1", "env_id": "dev", "database_id": 1})),
    ],
)
async def test_a_plain_request_is_its_frame_filled_from_the_words_and_the_live_system(
    text: str, call: tuple[str, Any]
) -> None:
    assert await _calls(text) == [call]


async def test_a_follow_up_takes_the_object_the_conversation_named() -> None:
    messages: list[BaseMessage] = [CONTEXT.message(), HumanMessage("is Queue Health ok?")]
    planned = await _plan(messages)
    assert [call["args"] for call in planned.tool_calls] == [{"env_id": "dev", "dashboard_ids": [12]}]
    earlier = [*_answered(messages, planned, {"broken_charts": []})[1:], AIMessage("ok")]
    assert await _calls("задеплой его на прод", *earlier) == [
        ("deploy_dashboard", {"dashboard_id": 12, "source_env": "dev", "env_id": "prod"})
    ]


async def test_an_action_said_of_it_is_the_one_on_the_last_calls_object() -> None:
    """ "end it" after maintenance was started ends the maintenance; said refused, nothing."""
    messages: list[BaseMessage] = [CONTEXT.message(), HumanMessage("start maintenance on prod")]
    planned = await _plan(messages)
    earlier = [*_answered(messages, planned, {"env_id": "prod", "active": True})[1:], AIMessage("started")]
    for text in ("upgrade is done, end it", "сними его, мы закончили"):
        assert await _calls(text, *earlier) == [("end_maintenance", {"env_id": "prod"})]
    assert await _calls("don't end it yet", *earlier) == []


async def test_run_it_after_a_statement_was_formatted_runs_that_statement() -> None:
    statement = "select subject from support.tickets"
    messages: list[BaseMessage] = [CONTEXT.message(), HumanMessage(f"format this: {statement}")]
    planned = await _plan(messages)
    earlier = [*_answered(messages, planned, {"sql": statement})[1:], AIMessage(statement)]
    assert await _calls("теперь выполни его", *earlier) == [
        (SQL, {"sql": statement, "env_id": "dev", "database_id": 7})
    ]


async def test_a_table_to_register_is_one_the_words_spell_not_one_holding_a_word() -> None:
    """ "open" is a value of tickets, not the table: which one is asked."""
    planned = await _plan([CONTEXT.message(), HumanMessage("add a dataset of the open ones in helpdesk")])
    assert planned.tool_calls == []
    assert planned.response_metadata["needs_clarification"] is True


async def test_a_change_named_only_by_the_noun_of_its_object_is_never_asked_for() -> None:
    """A branch of the business is no git branch to create: the question is about data."""
    planned = await _plan([CONTEXT.message(), HumanMessage("ветка с наибольшим числом доставленных посылок")])
    assert planned.tool_calls == []
    assert "таблиц" in str(planned.content)


@pytest.mark.parametrize("text", ["was Churn Radar deployed to prod?", "Churn Radar уже задеплоен на прод?"])
async def test_a_change_said_as_a_state_is_never_proposed(text: str) -> None:
    assert not [name for name, _ in await _calls(text) if tool(name).may_change]


async def test_a_dangerous_change_of_an_environment_nobody_named_asks_which() -> None:
    for text in ("start maintenance, we are moving disks", "закончи техработы"):
        planned = await _plan([CONTEXT.message(), HumanMessage(text)])  # dev is only the default
        assert planned.tool_calls == []
        assert planned.response_metadata["needs_clarification"] is True
    on_page = TurnContext(ENVIRONMENTS, "dev", "page")
    assert await _calls("закончи техработы", context=on_page) == [("end_maintenance", {"env_id": "dev"})]


async def test_small_talk_with_a_word_of_data_asks_no_data() -> None:
    planned = await _plan(
        [CONTEXT.message(), HumanMessage("haha nice, you are quicker than the last intern")]
    )
    assert planned.tool_calls == []


@pytest.mark.parametrize(("found", "then"), [([12], [("deploy_dashboard", 12)]), ([11, 13], [])])
async def test_it_after_a_search_is_the_dashboard_it_found_of_several_it_asks(
    found: list[int], then: list[tuple[str, int]]
) -> None:
    messages: list[BaseMessage] = [CONTEXT.message(), HumanMessage("find dashboards tagged ops")]
    planned = await _plan(messages)
    boards = [{"id": board, "title": TITLES[board]} for board in found]
    answered = _answered(messages, planned, {"env_id": "dev", "count": len(found), "dashboards": boards})
    answer = await _plan(answered)
    deployed = await _plan([*answered, answer, HumanMessage("now deploy it to prod")])
    assert [(call["name"], call["args"]["dashboard_id"]) for call in deployed.tool_calls] == then
    if not then:
        assert "Which dashboard?" in str(deployed.content)


async def test_that_branch_is_the_one_the_last_call_named() -> None:
    messages: list[BaseMessage] = [CONTEXT.message(), HumanMessage("create a branch named team/q1-radar")]
    planned = await _plan(messages)
    earlier = [*_answered(messages, planned, {"name": "team/q1-radar"})[1:], AIMessage("ok")]
    assert await _calls("commit Churn Radar to that branch with message 'radar tweaks'", *earlier) == [
        (
            "commit_changes",
            {"branch": "team/q1-radar", "env_id": "dev", "dashboard_ids": [11], "message": "radar tweaks"},
        )
    ]


async def test_an_ambiguous_title_or_no_dashboard_is_asked_about() -> None:
    planned = await _plan([CONTEXT.message(), HumanMessage("deploy to prod")])
    assert planned.tool_calls == []
    assert "11 — Churn Radar" in str(planned.content)


async def test_this_dashboard_is_the_one_on_screen() -> None:
    on_screen = TurnContext(ENVIRONMENTS, "dev", "page", "en", Focus("dashboard", 12, "Queue Health"))
    assert await _calls("Is this dashboard broken?", context=on_screen) == [
        ("get_health_summary", {"env_id": "dev", "dashboard_ids": [12]})
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
async def test_a_change_the_router_suggests_on_meaning_alone_is_never_proposed(text: str) -> None:
    model = _routed("end_maintenance", "show_capabilities")
    assert (await _plan([CONTEXT.message(), HumanMessage(text)], model=model)).tool_calls == []


@pytest.mark.parametrize(
    ("text", "proposed"),
    [
        ("закатай Queue Health на прод", True),
        ("yeet dashboard 12 over to prod", True),
        ("Queue Health на прод", False),  # no verb: nothing the router read as an action
        ("закатай Queue Health на прод?", False),  # asked about (its state), not asked for
        ("не закатывай Queue Health на прод", False),
    ],
)
async def test_a_change_of_a_dashboard_the_router_ranks_first_is_proposed_on_a_verb_no_declaration_has(
    text: str, proposed: bool
) -> None:
    """A verb no declaration lists, for a dashboard the words name: the router's meaning decides,
    and the card lets the person confirm; never without a verb, in a question or refused."""
    model = _routed("deploy_dashboard", "superset_create_dataset", "show_capabilities")
    planned = await _plan([CONTEXT.message(), HumanMessage(text)], model=model)
    deploys = [call["args"] for call in planned.tool_calls if call["name"] == "deploy_dashboard"]
    assert deploys == ([{"dashboard_id": 12, "source_env": "dev", "env_id": "prod"}] if proposed else [])


@pytest.mark.parametrize("text", ["check Queue Health", "глянь Queue Health", "Queue Health"])
async def test_a_dashboard_named_with_no_tool_is_checked_never_read_past(text: str) -> None:
    """A title with words that name no tool is the dashboard's state asked about; a read the
    router suggests on meaning alone that takes no dashboard is not made instead."""
    model = _routed("superset_create_dashboard", "get_llm_status", "show_capabilities")
    planned = await _plan([CONTEXT.message(), HumanMessage(text)], model=model)
    assert [(call["name"], call["args"]) for call in planned.tool_calls] == [
        ("get_health_summary", {"dashboard_ids": [12], "env_id": "dev"})
    ]
    refused = await _plan([CONTEXT.message(), HumanMessage("не трогай Queue Health")], model=model)
    assert refused.tool_calls == []
    # a read of the dashboard the router ranks first is what the words meant
    audit = _routed("superset_audit_permissions", "get_health_summary", "show_capabilities")
    held = await _plan(
        [CONTEXT.message(), HumanMessage("who's got their hands on Queue Health")], model=audit
    )
    assert [(call["name"], call["args"]) for call in held.tool_calls] == [
        ("superset_audit_permissions", {"dashboard_id": 12, "env_id": "dev"})
    ]


async def test_a_read_the_router_suggests_on_meaning_alone_is_made() -> None:
    model = _routed("list_maintenance_events", "show_capabilities")
    planned = await _plan(
        [CONTEXT.message(), HumanMessage("Есть ли у нас запланированные простои?")], model=model
    )
    assert [call["name"] for call in planned.tool_calls] == ["list_maintenance_events"]


async def test_a_read_the_router_suggests_whose_frame_the_words_leave_empty_is_not_asked_about() -> None:
    """Words that name nothing get no question about a tool nobody named ("which task?"); words
    that only refuse get none of the router's reads."""
    model = _routed("get_task_status", "run_llm_documentation", "list_environments")
    planned = await _plan([CONTEXT.message(), HumanMessage("hmm, wat r u good 4")], model=model)
    assert [call["name"] for call in planned.tool_calls] == ["list_environments"]
    refused = await _plan([CONTEXT.message(), HumanMessage("no, not now, nothing")], model=model)
    assert refused.tool_calls == []


def _done(
    messages: list[BaseMessage], call: ToolCall, result: dict[str, Any], *, failed: bool = False
) -> None:
    messages.append(AIMessage("", tool_calls=[call]))
    status = "error" if failed else "success"
    messages.append(
        ToolMessage(json.dumps(result), tool_call_id=call["id"], name=call["name"], status=status)
    )


async def test_changes_asked_at_once_are_made_one_after_another_and_each_outcome_said() -> None:
    messages: list[BaseMessage] = [CONTEXT.message(), HumanMessage("сделай бэкап prod и начни техработы")]
    (backup,) = (await _plan(messages)).tool_calls
    assert (backup["name"], backup["args"]) == ("run_backup", {"env_id": "prod"})
    _done(messages, backup, {"id": "b1", "kind": "backup", "status": "success", "result": {"env_id": "prod"}})
    (window,) = (await _plan(messages)).tool_calls  # the next one, once the backup is made
    assert (window["name"], window["args"]) == (
        "start_maintenance",
        {"reason": "Плановые работы", "env_id": "prod"},
    )


async def test_a_change_that_failed_stops_the_ones_after_it_and_the_answer_says_what_was_not_done() -> None:
    asked = "сделай бэкап prod и начни техработы на prod по причине переезда"
    messages: list[BaseMessage] = [CONTEXT.message(), HumanMessage(asked)]
    (backup,) = (await _plan(messages)).tool_calls
    _done(messages, backup, {"error": {"code": "rejected", "message": "nothing was run"}}, failed=True)
    answer = await _plan(messages)
    assert answer.tool_calls == []
    assert str(answer.content).endswith(
        "Остальное из запроса не сделано; попросите отдельно, например: «Начни регламентные работы в prod»."
    )
    running: list[BaseMessage] = [CONTEXT.message(), HumanMessage(asked)]
    (started,) = (await _plan(running)).tool_calls
    _done(running, started, {"id": "b1", "kind": "backup", "status": "queued", "result": None})
    assert "когда задача закончится" in str((await _plan(running)).content)
    done: list[BaseMessage] = [CONTEXT.message(), HumanMessage(asked)]
    (made,) = (await _plan(done)).tool_calls
    _done(done, made, {"id": "b1", "kind": "backup", "status": "success", "result": {"env_id": "prod"}})
    (window,) = (await _plan(done)).tool_calls
    assert (window["name"], window["args"]) == ("start_maintenance", {"reason": "переезда", "env_id": "prod"})


async def test_a_check_that_finds_errors_stops_the_deploy_asked_after_it() -> None:
    messages: list[BaseMessage] = [
        CONTEXT.message(),
        HumanMessage("Сначала проверь Queue Health через LLM, потом задеплой его в прод"),
    ]
    (check,) = (await _plan(messages)).tool_calls
    assert (check["name"], check["args"]["dashboard_id"]) == ("run_llm_validation", 12)
    invalid = {"title": "Queue Health", "valid": False, "errors": 1, "findings": []}
    _done(messages, check, {"id": "v1", "kind": "llm_validation", "status": "success", "result": invalid})
    answer = await _plan(messages)
    assert answer.tool_calls == []  # no deploy card after a check that failed
    assert "Остальное из запроса не сделано" in str(answer.content)


async def test_requests_put_in_order_are_done_in_that_order_a_read_first() -> None:
    messages: list[BaseMessage] = [
        CONTEXT.message(),
        HumanMessage("check Churn Radar's health, then make a backup"),
    ]
    (check,) = (await _plan(messages)).tool_calls
    assert (check["name"], check["args"]) == ("get_health_summary", {"dashboard_ids": [11], "env_id": "dev"})
    healthy = {"env_id": "dev", "dashboards": [{"id": 11, "title": "Churn Radar", "charts": 2, "errors": 0}]}
    _done(messages, check, healthy)
    (backup,) = (await _plan(messages)).tool_calls  # the backup, once the check found nothing
    assert (backup["name"], backup["args"]) == ("run_backup", {"env_id": "dev"})


BOARDS = [{"id": i, "title": f"Board {i}", "url": f"http://superset/{i}", "tags": []} for i in range(1, 4)]
LISTED = [
    CONTEXT.message(),
    HumanMessage("покажи дашборды"),
    AIMessage("", tool_calls=[{"name": "search_dashboards", "args": {"env_id": "dev"}, "id": "call_1"}]),
    ToolMessage(
        json.dumps({"env_id": "dev", "count": 3, "dashboards": BOARDS}),
        tool_call_id="call_1",
        name="search_dashboards",
    ),
]


async def test_it_streams_the_answer_it_gives_whole_at_its_pace() -> None:
    whole = str((await OfflinePlanner().ainvoke(LISTED)).content)
    started = time.perf_counter()
    words = [str(chunk.content) async for chunk in OfflinePlanner(words_per_second=40).astream(LISTED)]
    assert whole.startswith("Дашборды в dev: 3.")
    assert "".join(words) == whole
    assert time.perf_counter() - started >= len([word for word in words if word]) / 40


async def test_a_paced_answer_stops_halfway_when_cancelled() -> None:
    received: list[str] = []
    first_word = asyncio.Event()

    async def read() -> None:
        async for chunk in OfflinePlanner(words_per_second=20).astream(LISTED):
            received.append(str(chunk.content))
            if chunk.content:
                first_word.set()

    reading = asyncio.create_task(read())
    await first_word.wait()
    reading.cancel()
    await asyncio.gather(reading, return_exceptions=True)
    whole = str((await OfflinePlanner().ainvoke(LISTED)).content)
    assert 0 < len("".join(received)) < len(whole)
    assert whole.startswith("".join(received))


def _longest(unit: str, head: str = "", tail: str = "") -> str:
    """The longest message allowed: ``unit`` repeated between ``head`` and ``tail``."""
    run = MAX_MESSAGE_CHARS - len(head) - len(tail)
    return head + (unit * run)[:run] + tail


@pytest.mark.parametrize(
    "text",
    [
        *(_longest(unit) for unit in ("a", "1", "a-", "dashboard ", "tickets ")),
        _longest("a", "сделай бэкап prod ", " потом начни техработы"),
    ],
    ids=["a", "1", "a-", "dashboard", "a table's name", "a change after a long word"],
)
async def test_the_longest_message_is_read_in_one_pass_whatever_it_repeats(text: str) -> None:
    started = time.perf_counter()
    await _plan([CONTEXT.message(), HumanMessage(text)])
    assert time.perf_counter() - started < 20


async def test_a_question_names_the_tables_columns_as_text_never_as_markup() -> None:
    """A column is named by whoever made the table: the question shows its name, escaped."""
    hostile = HELPDESK.model_copy(deep=True)
    hostile.tables[0].columns.append(C(name="[reset](https://evil.example)", type="TEXT"))
    outline = EnvOutline(env_id="dev", databases=[hostile])
    planned = await _plan(
        [CONTEXT.message(), HumanMessage("how many tickets are stuck?")], Ground(outline=outline)
    )
    assert planned.tool_calls == []
    assert "[reset](https://evil.example)" not in str(planned.content)
    assert "\\[reset\\]" in str(planned.content)


@pytest.mark.parametrize(
    ("said", "named"),
    [
        ("хирургические приёмы", ["хирургия"]),
        ("late parcels", []),
        ("заказов", ["заказ"]),
        # a plural the stemmer keeps is the name's, with a typo too
        ("breached SLA", ["SLAs"]),
        ("SALs", ["SLAs"]),
    ],
)
async def test_a_name_is_spelt_by_a_longer_word_of_its_root_never_by_a_shorter_one(
    said: str, named: list[str]
) -> None:
    message = words(said)
    found = await find(message, list(range(len(message))), ["хирургия", "latest", "заказ", "SLAs"], None)
    assert [item.label for item in found] == named


async def test_a_models_names_are_read_as_the_planner_reads_them() -> None:
    """A model's dashboard by title and environment by any word for it reach the ids the planner's
    readers give; a name of no dashboard, or of several, is left for the gate to refuse."""
    ground = Ground()
    deploy = {"dashboard_id": "queue helth", "source_env": "development", "env_id": "production"}
    assert await with_names_read("deploy_dashboard", deploy, ENVIRONMENTS, ground) == {
        "dashboard_id": 12,
        "source_env": "dev",
        "env_id": "prod",
    }
    checked = {"env_id": "dev", "dashboard_ids": ["Churn Radar Archive", 12, "Churn"]}
    assert await with_names_read("get_health_summary", checked, ENVIRONMENTS, ground) == {
        "env_id": "dev",
        "dashboard_ids": [13, 12, "Churn"],
    }
    assert await with_names_read("no_such_tool", {"dashboard_id": "x"}, ENVIRONMENTS, ground) == {
        "dashboard_id": "x"
    }
    # an environment is exactly a word for it: a variant of an id is crafted, the gate's to refuse
    for crafted in ("PROD", "prod\n", " dev", "Production"):
        assert await with_names_read("end_maintenance", {"env_id": crafted}, ENVIRONMENTS, ground) == {
            "env_id": crafted
        }


class _NoTitles(Ground):
    async def titles(self, env_id: str) -> dict[int, str]:
        raise AssertionError(f"titles read of {env_id!r}")


async def test_an_environment_a_model_makes_up_is_never_read() -> None:
    made_up = {"env_id": "../users/admin", "dashboard_id": "Queue Health"}
    assert await with_names_read("get_health_summary", made_up, ENVIRONMENTS, _NoTitles()) == made_up
