"""The offline planner's answers: the outcome first, in the person's language, results as
Markdown tables with links to the Superset objects; a tool's failure as a short cause and the
next step. Nothing is reported as done that was not: a validation with errors, a rejected call,
a refused statement say so.
"""

import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from sstools.agent.language import Lang, say
from sstools.agent.markdown import Markdown, link, markdown_text
from sstools.agent.wording import explained
from sstools.common.catalogue import ARGS, EXAMPLE_PROMPTS, TOOLS, Answer
from sstools.common.catalogue import tool as catalogue_tool

_EXAMPLES_SHOWN = ("search_dashboards", "get_health_summary", "deploy_dashboard")


def examples(lang: Lang) -> str:
    """A few requests people type, as the catalogue declares them, quoted in the language's marks."""
    index, (start, end) = (0, "«»") if lang == "ru" else (1, "“”")
    return ", ".join(f"{start}{EXAMPLE_PROMPTS[name][index]}{end}" for name in _EXAMPLES_SHOWN)


def found_issues(result: Any) -> bool:
    """A read or check that ran and found problems: broken charts, a dashboard that is not valid."""
    if not isinstance(result, dict):
        return False
    outcome = result.get("result") if {"id", "kind", "status"} <= set(result) else result
    return isinstance(outcome, dict) and (outcome.get("valid") is False or bool(outcome.get("broken_charts")))


_ROWS_SHOWN = 20
_CELL_CHARS = 80


def _cell(value: Any) -> Markdown:
    return markdown_text(value, _CELL_CHARS)


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """Headers and cells are escaped (a SQL result's column names are data too); a cell that is
    :class:`Markdown` already (a link the agent made) is kept."""
    lines = ["| " + " | ".join(_cell(header) for header in headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(_cell(value) for value in row) + " |" for row in rows]
    return "\n".join(lines)


def _dashboards(result: dict[str, Any], lang: Lang) -> str:
    boards = result.get("dashboards", [])
    env, count = markdown_text(result.get("env_id")), markdown_text(result.get("count", len(boards)))
    if not boards:
        return say(lang, f"В {env} не нашлось дашбордов по этому запросу.", f"No dashboards in {env} match.")
    head = say(lang, f"Дашборды в {env}: {count}.", f"Dashboards in {env}: {count}.")
    rows = [
        (board["id"], link(board["title"], board.get("url")), ", ".join(board.get("tags", [])) or "—")
        for board in boards[:_ROWS_SHOWN]
    ]
    return f"{head}\n\n{table(['id', say(lang, 'название', 'title'), say(lang, 'теги', 'tags')], rows)}"


def _health(result: dict[str, Any], lang: Lang) -> str:
    env, broken = markdown_text(result.get("env_id")), result.get("broken_charts", [])
    checked = markdown_text(result.get("charts_checked", 0))
    only = result.get("only") or []
    # a check of one dashboard ("is this dashboard healthy?") says which one it was
    where = f"«{markdown_text(only[0]['title'])}» ({env})" if len(only) == 1 else env
    if not result.get("charts_checked"):  # nothing checked is not "everything works"
        return say(
            lang, f"В {where} нет чартов: проверять нечего.", f"{where} has no charts: nothing to check."
        )
    unchecked = ", ".join(f"«{markdown_text(board['title'])}»" for board in result.get("unchecked") or [])
    # a check of some dashboards where some have no charts says which were not checked at all
    skipped = (
        say(
            lang, f"\n\nНе проверены (нет чартов): {unchecked}.", f"\n\nNot checked (no charts): {unchecked}."
        )
        if unchecked
        else ""
    )
    if not broken:
        return (
            say(
                lang,
                f"В {where} всё работает: проверено чартов — {checked}.",
                f"All {checked} charts in {where} work.",
            )
            + skipped
        )
    head = say(
        lang,
        f"В {where} есть проблемы: сломанных чартов — {len(broken)} из {checked}.",
        f"{where} has problems: {len(broken)} of {checked} charts are broken.",
    )
    rows = [(chart["chart_id"], chart["chart_name"], chart["error"]) for chart in broken[:_ROWS_SHOWN]]
    headers = ["id", say(lang, "чарт", "chart"), say(lang, "ошибка", "error")]
    return f"{head}\n\n{table(headers, rows)}{skipped}"


def _sql(result: dict[str, Any], lang: Lang) -> str:
    rows, columns = result.get("rows", []), result.get("columns", [])
    count = markdown_text(result.get("row_count", len(rows)))
    if not columns:
        env = markdown_text(result.get("env_id"))
        return say(lang, f"Запрос выполнен в {env}.", f"The statement ran in {env}.")
    head = say(lang, f"Запрос вернул строк: {count}.", f"The query returned {count} row(s).")
    if result.get("truncated"):
        head += say(lang, f" Показаны первые {len(rows)}.", f" The first {len(rows)} are shown.")
    shown = [[_value(row.get(column), lang) for column in columns] for row in rows[:_ROWS_SHOWN]]
    return f"{head}\n\n{table(columns, shown)}"


def _value(value: Any, lang: Lang) -> Any:
    """A result's cell as a person reads it: a fraction with at most two decimals (more for a
    small one), digits grouped, in the language's own marks; anything else as it came."""
    if not isinstance(value, float) or not math.isfinite(value):
        return value
    size = abs(value)
    decimals = 2 if size >= 1 or not size else 1 - math.floor(math.log10(size)) + 2
    text = f"{value:,.{decimals}f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    # digits, a sign and the marks alone: Markdown as it is (escaping would only add backslashes)
    return Markdown(text.replace(",", "\u00a0").replace(".", ",") if lang == "ru" else text)


def _catalogue(result: dict[str, Any], lang: Lang) -> str:
    env = markdown_text(result.get("env_id"))
    if result.get("databases") is not None:
        rows = [(db["id"], db["name"], db.get("backend") or "—") for db in result["databases"]]
        head = say(lang, f"Базы данных в {env}: {len(rows)}.", f"Databases in {env}: {len(rows)}.")
        return f"{head}\n\n{table(['id', say(lang, 'база', 'database'), 'backend'], rows)}"
    for key, ru, en in (("tables", "Таблицы", "Tables"), ("schemas", "Схемы", "Schemas")):
        if result.get(key) is not None:
            items = result[key]
            names = ", ".join(_inline_code(str(item)) for item in items[:100])
            return say(lang, f"{ru} ({len(items)}): ", f"{en} ({len(items)}): ") + names
    columns = [(column.get("name"), column.get("type")) for column in result.get("columns") or []]
    head = say(lang, f"Колонки ({len(columns)}):", f"Columns ({len(columns)}):")
    return f"{head}\n\n{table([say(lang, 'колонка', 'column'), say(lang, 'тип', 'type')], columns)}"


def _access(result: dict[str, Any], lang: Lang) -> str:
    title = markdown_text(result.get("title") or result.get("object_id"))
    env, users = markdown_text(result.get("env_id")), result.get("users", [])
    head = say(
        lang,
        f"Доступ к «{title}» в {env}: пользователей — {len(users)}.",
        f"Access to “{title}” in {env}: {len(users)} user(s).",
    )
    rows = [(user["username"], ", ".join(user.get("through_roles", []))) for user in users[:_ROWS_SHOWN]]
    headers = [say(lang, "пользователь", "user"), say(lang, "через роли", "through roles")]
    return f"{head}\n\n{table(headers, rows)}"


def _environments(result: Any, lang: Lang) -> str:
    items = result if isinstance(result, list) else []
    rows = [
        (
            item.get("id"),
            item.get("name", item.get("id")),
            say(lang, "да", "yes") if item.get("production") else "—",
        )
        for item in items
        if isinstance(item, dict)
    ]
    head = say(lang, f"Окружений: {len(rows)}.", f"{len(rows)} environment(s).")
    return f"{head}\n\n{table(['id', say(lang, 'название', 'name'), 'production'], rows)}"


def _windows(result: Any, lang: Lang) -> str:
    items = (
        result if isinstance(result, list) else result.get("windows", []) if isinstance(result, dict) else []
    )
    if isinstance(result, dict) and "active" in result and "env_id" in result:
        items = [result]
    if not items:
        return say(lang, "Окон обслуживания нет.", "There are no maintenance windows.")
    rows = [
        (
            item.get("env_id"),
            say(lang, "идёт", "active") if item.get("active") else say(lang, "закончено", "ended"),
            item.get("reason", ""),
            item.get("started_by", ""),
            item.get("started_at", ""),
        )
        for item in items[:_ROWS_SHOWN]
    ]
    headers = [
        say(lang, "окружение", "environment"),
        say(lang, "состояние", "state"),
        say(lang, "причина", "reason"),
        say(lang, "кто", "by"),
        say(lang, "начало", "started"),
    ]
    return table(headers, rows)


# The tools whose calls go on as tasks when slow, by the task's kind: a task of theirs that
# ended is answered as the call would have been.
_FOLLOWED: Mapping[str, Answer | None] = {spec.followed_as: spec.answer for spec in TOOLS if spec.followed_as}


def _task(result: dict[str, Any], lang: Lang) -> str:
    status, outcome = result.get("status"), result.get("result") or {}
    kind, task_id = markdown_text(result.get("kind")), markdown_text(result.get("id"))
    if status in ("queued", "running") and result.get("kind") in _FOLLOWED:
        return say(
            lang,
            f"Ещё выполняется (задача {task_id}): результат появится здесь, когда она закончится, "
            f"или спросите «статус задачи {task_id}».",
            f"Still running (task {task_id}): the result will show here when it ends, "
            f"or ask “status of task {task_id}”.",
        )
    if status in ("queued", "running"):
        return say(
            lang,
            f"Задача {kind} запущена (id {task_id}), сейчас: {status}. Спросите «статус задачи {task_id}».",
            f"The {kind} task has started (id {task_id}), now {status}. Ask “status of task {task_id}”.",
        )
    if status == "failed":
        problem = (result.get("error") or {}).get("message", "")
        return say(
            lang, f"Задача {kind} не удалась: {_cell(problem)}", f"The {kind} task failed: {_cell(problem)}"
        )
    if isinstance(outcome, dict) and outcome.get("valid") is False:
        findings = outcome.get("findings", [])
        errors = markdown_text(outcome.get("errors", len(findings)))
        title = markdown_text(outcome.get("title"))
        head = say(
            lang,
            f"Проверка нашла ошибки: {errors} — дашборд «{title}» не прошёл валидацию.",
            f"Validation found {errors} error(s): “{title}” is not valid.",
        )
        rows = [
            (item.get("severity"), item.get("message", item))
            for item in findings[:_ROWS_SHOWN]
            if isinstance(item, dict)
        ]
        return (
            f"{head}\n\n{table([say(lang, 'уровень', 'severity'), say(lang, 'что', 'finding')], rows)}"
            if rows
            else head
        )
    if isinstance(outcome, dict) and outcome.get("valid") is True:
        title = markdown_text(outcome.get("title"))
        return say(
            lang,
            f"Дашборд «{title}» прошёл проверку без ошибок.",
            f"“{title}” passed validation with no errors.",
        )
    details = (
        ", ".join(
            f"{_cell(key)}: {_cell(value)}"
            for key, value in outcome.items()
            if not isinstance(value, (dict, list))
        )
        if isinstance(outcome, dict)
        else ""
    )
    return say(lang, f"Задача {kind} выполнена.", f"The {kind} task is done.") + (
        f" {details}" if details else ""
    )


def _created(what_ru: str, what_en: str) -> Callable[[dict[str, Any], Lang], str]:
    def render(result: dict[str, Any], lang: Lang) -> str:
        name = (
            result.get("title")
            or result.get("table_name")
            or result.get("name")
            or result.get("file_name")
            or result.get("id")
        )
        linked = link(name, result.get("url"))
        shown = linked if result.get("url") else f"«{linked}»" if lang == "ru" else f"“{linked}”"
        where = markdown_text(result.get("env_id")) if result.get("env_id") else None
        return say(
            lang,
            f"Готово: {what_ru} {shown}" + (f" в {where}" if where else "") + ".",
            f"Done: {what_en} {shown}" + (f" in {where}" if where else "") + ".",
        )

    return render


def _capabilities(text: str, lang: Lang) -> str:
    lines = [line[2:] for line in text.splitlines() if line.startswith("- ")]
    rows = []
    for line in lines:
        name, _, descriptions = line.partition(": ")
        english, _, russian = descriptions.partition(" / ")
        # the catalogue's own names, read as code; anything else is escaped as any cell is
        shown = Markdown(f"`{name}`") if re.fullmatch(r"[a-z_]+", name) else name
        rows.append((shown, russian if lang == "ru" else english))
    head = say(
        lang,
        f"Вот что я могу для вашей роли. Примеры: {examples('ru')}.",
        f"Here is what I can do for your role. Try: {examples('en')}.",
    )
    return (
        f"{head}\n\n{table([say(lang, 'инструмент', 'tool'), say(lang, 'что делает', 'what it does')], rows)}"
    )


def _rows(columns: Sequence[str]) -> Callable[[Any, Lang], str]:
    def render(result: Any, lang: Lang) -> str:
        items = [item for item in result if isinstance(item, dict)] if isinstance(result, list) else []
        if not items:
            return say(lang, "Пусто: ничего не нашлось.", "Nothing was found.")
        shown = [[_yes_no(item.get(column), lang) for column in columns] for item in items[:_ROWS_SHOWN]]
        return say(lang, f"Найдено: {len(items)}.", f"Found: {len(items)}.") + f"\n\n{table(columns, shown)}"

    return render


def _yes_no(value: Any, lang: Lang) -> Any:
    if isinstance(value, bool):
        return say(lang, "да", "yes") if value else say(lang, "нет", "no")
    return "—" if value is None else _value(value, lang)


def _code(result: Any, lang: Lang) -> str:
    return _code_block("sql", str(result.get("sql", ""))) if isinstance(result, dict) else _cell(result)


# The views an answer declaration names (the catalogue's ``Answer.view``); "capabilities" is
# the agent's own text, read before any JSON.
VIEWS: Mapping[str, Callable[[Any, Lang], str]] = {
    "dashboards": _dashboards,
    "health": _health,
    "sql": _sql,
    "catalogue": _catalogue,
    "access": _access,
    "environments": _environments,
    "windows": _windows,
    "code": _code,
}


def _task_renderer(task: dict[str, Any]) -> Callable[[Any, Lang], str] | None:
    return _renderer(_FOLLOWED.get(str(task["kind"])))


def _renderer(declared: Answer | None) -> Callable[[Any, Lang], str] | None:
    if declared is None:
        return None
    if declared.view == "made":
        return _created(declared.ru, declared.en)
    if declared.view == "rows":
        return _rows(declared.columns)
    return VIEWS.get(declared.view)


def failure(tool: str, detail: Mapping[str, Any], lang: Lang) -> str:
    code = str(detail.get("code", "error"))
    # the facts a known cause names (an environment, a file, a detail) are ops' or Superset's
    # words: escaped; a flag or a number stays what it is, for the wording to test
    facts = {
        key: value if isinstance(value, (bool, int, float)) else markdown_text(value)
        for key, value in detail.items()
    }
    if (known := explained(code, lang, facts)) is not None:
        return known
    named, code_shown, message = markdown_text(tool), markdown_text(code), _cell(detail.get("message", ""))
    return say(
        lang,
        f"Не получилось: {named} ответил отказом {code_shown} — «{message}». "
        "Уточните запрос или попробуйте позже.",
        f"That did not work: {named} refused with {code_shown} — “{message}”. Rephrase, or try again later.",
    )


def _inline_code(text: str) -> str:
    """``text`` as a code span (a name, not words of the answer) that no backtick inside it closes."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    text = " ".join(text.split())
    padded = f" {text} " if text.startswith("`") or text.endswith("`") else text
    return f"{fence}{padded}{fence}"


def _code_block(language: str, text: str) -> str:
    """``text`` in a fence longer than any run of backticks inside it, which therefore cannot
    close it early and let the rest render as Markdown."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{language}\n{text}\n{fence}"


def rendered(tool: str, content: str, lang: Lang) -> str:
    """One tool's result as the person reads it."""
    declared = catalogue_tool(tool).answer if tool in ARGS else None
    try:
        result = json.loads(content)
    except ValueError:  # the agent's own text: the capabilities it lists
        return _capabilities(content, lang) if declared == Answer("capabilities") else _cell(content)
    if isinstance(result, dict) and isinstance(result.get("error"), dict):
        return failure(tool, result["error"], lang)
    if isinstance(result, dict) and {"id", "kind", "status"} <= set(result):
        if result["status"] == "success" and (render := _task_renderer(result)) is not None:
            return render(result.get("result") or {}, lang)  # a statement followed: its rows
        return _task(result, lang)
    if render := _renderer(declared):
        return render(result, lang)
    if isinstance(result, dict):
        rows = [(key, value) for key, value in result.items()]
        return (
            say(lang, "Готово.", "Done.")
            + "\n\n"
            + table([say(lang, "поле", "field"), say(lang, "значение", "value")], rows)
        )
    return say(lang, "Готово.", "Done.") + f" {_cell(result)}"
