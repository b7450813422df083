"""The offline planner's next step in a turn: the call the request needs, the read that resolves
a name it needs first, one precise question when something cannot be known, or the answer once
the request's own call has a result.

Each step is decided afresh from the request's reading and what this turn's calls returned, so
a resumed run (after a confirmation) continues where it was without any state of its own.
"""

import difflib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from pydantic import ValidationError

from sstools.agent.answers import examples, failure, found_issues, rendered, table
from sstools.agent.context import TurnContext
from sstools.agent.fence import TOOL_RESULT, unfenced
from sstools.agent.language import Lang, say
from sstools.agent.markdown import markdown_text
from sstools.agent.planner.reading import (
    ENDING,
    PROBED_ROWS,
    SQL_TOOL,
    Request,
    asks_anything,
    described_sql,
    first_table,
    probed_values,
    table_named_in,
    value_words,
    values_probe,
)
from sstools.agent.planner.refining import refined
from sstools.common.catalogue import ARGS, tool
from sstools.common.routing.keywords import KeywordIndex
from sstools.common.sql import classify

SEARCH = "search_dashboards"
EXPLORE = "superset_explore_database"
_LISTING_SIZE = 100
# How much better the best fuzzy title match must be than the next to be taken without asking.
_CLEAR_LEAD = 0.1
_CLOSE_ENOUGH = 0.72
_SPELLED = 0.85
_NEARLY_SPELLED_WORDS = 60
_FOLLOW_UP_WORDS = 8
# A routed tool the planner acts on when its own reading found none: one the message's words
# name, or one that only reads. A change is never proposed on the embedding tier's word alone:
# near the tuning set's examples, small talk ("thanks, that's all") looks like ending maintenance.
_KEYWORDS = KeywordIndex()
_TABLES_WANTED = re.compile(r"\btables\b|таблиц[ыа]?\b|талиц\w*|what\s+tables|какие\s+табл\w*", re.I)
_COLUMNS_WANTED = re.compile(r"columns?|колонк\w*|столбц\w*|\bfields\b|\bполя\b", re.I)
# A request about a table in an environment with several databases: so many are explored (two
# reads each, counted against the person's budget) to find the one that has it; more are asked.
_DATABASES_SEARCHED = 3
# and in a database, so many schemas for it when its default one does not have it
_SCHEMAS_SEARCHED = 3
_SYSTEM_SCHEMA = re.compile(r"information_schema$|pg_|sys$|mysql$|performance_schema$", re.I)


def _other_clause(words: str) -> str | None:
    """A clause of the message that names no tool: why it is asked, when it says so."""
    clauses = [clause.strip() for clause in re.split(r"[,;:—–]|\s-\s", words) if clause.strip()]
    return next(
        (clause for clause in reversed(clauses[1:]) if not asks_anything(clause) and len(clause) > 3),
        None,
    )


def _changed(done: "Done") -> bool:
    """Whether a call of the turn may have changed something (a read-only statement did not)."""
    if done.tool == SQL_TOOL:
        return not classify(str(done.args.get("sql", ""))).read_only
    return tool(done.tool).may_change


def _running(done: "Done") -> bool:
    """Whether a call answered with an ops task that has not ended (it outlived the tool's wait)."""
    return isinstance(done.result, dict) and done.result.get("status") in ("queued", "running")


def _default_schema(schemas: Sequence[str]) -> str:
    return next((name for name in schemas if name in ("main", "public")), schemas[0])


_ANOTHER = re.compile(
    r"(?:ещё|еще)\s+(?:один|одну|одно|раз)\b|\banother\s+one\b|\bone\s+more\b|\bsame\s+for\b"
    r"|то\s+же\s+(?:самое\s+)?(?:для|с)\b",
    re.I,
)
_MAINTENANCE_SHOWN = {"start_maintenance", "list_maintenance_events"}
_STATE_QUESTION = re.compile(
    r"работа\w*|отвеча\w*|жив\w*|доступн\w*|respond\w*|working|alive|\bup\b|healthy|\bok\b", re.I
)


def _needs(tool_name: str, field: str) -> bool:
    """Whether a call cannot do without an argument, as its declaration says: the field is
    required, or one of the alternatives the model names (``ONE_OF``)."""
    model = ARGS[tool_name]
    found = model.model_fields.get(field)
    return found is not None and (found.is_required() or field in getattr(model, "ONE_OF", ()))


def _takes(tool_name: str, field: str) -> bool:
    return field in ARGS[tool_name].model_fields


@dataclass(frozen=True)
class Call:
    tool: str
    args: dict[str, Any]


@dataclass(frozen=True)
class Reply:
    text: str
    asks_back: bool = False


@dataclass(frozen=True)
class Done:
    """A call this turn made, and what it returned (parsed JSON, or the raw text)."""

    tool: str
    args: dict[str, Any]
    result: Any
    failed: bool


@dataclass(frozen=True)
class Earlier:
    """What earlier turns leave for a follow-up: their last call and the dashboard last named."""

    last_call: Call | None = None
    dashboard_id: int | None = None
    sql: str | None = None
    table: str | None = None  # the table last explored, queried or registered


@dataclass
class _Needs:
    """What one step found missing: a read to make first, or a question to ask."""

    call: Call | None = None
    question: str | None = None
    details: list[str] = field(default_factory=list)


def turn_calls(messages: Sequence[BaseMessage]) -> list[Done]:
    """The calls made since the turn's message, each with its result."""
    results = {message.tool_call_id: message for message in messages if isinstance(message, ToolMessage)}
    done = []
    for message in messages:
        if not isinstance(message, AIMessage):
            continue
        for call in message.tool_calls:
            answer = results.get(str(call["id"]))
            if answer is None:
                continue
            content = unfenced(TOOL_RESULT, str(answer.content))
            try:
                parsed: Any = json.loads(content)
            except ValueError:
                parsed = content
            failed = answer.status == "error" or (
                isinstance(parsed, dict) and isinstance(parsed.get("error"), dict)
            )
            done.append(Done(call["name"], dict(call["args"]), parsed, failed))
    return done


def earlier_turns(messages: Sequence[BaseMessage]) -> Earlier:
    last_call: Call | None = None
    dashboard: int | None = None
    sql: str | None = None
    table: str | None = None
    for done in turn_calls(messages):
        last_call = Call(done.tool, done.args)
        sql = done.args.get("sql") or sql
        table = (
            done.args.get("table")
            or done.args.get("table_name")
            or first_table(done.args.get("sql"))
            or table
        )
        ids = done.args.get("dashboard_ids") or []
        dashboard = done.args.get("dashboard_id") or (ids[-1] if ids else None) or dashboard
        if (
            done.tool == SEARCH
            and isinstance(done.result, dict)
            and len(done.result.get("dashboards", [])) == 1
        ):
            dashboard = done.result["dashboards"][0]["id"]
    return Earlier(last_call, dashboard, sql, table)


def _titles(boards: Sequence[Mapping[str, Any]], lang: Lang) -> str:
    return table(
        ["id", say(lang, "название", "title")], [(board["id"], board["title"]) for board in boards[:10]]
    )


def _spelled(written: str, title: str, *, nearly: bool) -> bool:
    """Whether words of the message spell a title: exactly, or (``nearly``) close enough for a
    typo in a long one."""
    if written == title:
        return True
    return nearly and len(title) >= 8 and difflib.SequenceMatcher(None, written, title).ratio() >= _SPELLED


def _score(name: str, title: str) -> float:
    name, title = name.casefold(), title.casefold()
    if name == title:
        return 1.0
    whole = difflib.SequenceMatcher(None, name, title).ratio()
    part = 0.9 if name in title or title in name else 0.0
    return max(whole, part)


class Planner:
    """One turn's reasoning: the request, the context, and what the turn's calls returned."""

    def __init__(
        self,
        request: Request,
        context: TurnContext,
        lang: Lang,
        routed: Sequence[str],
        done: Sequence[Done],
        earlier: Earlier,
    ) -> None:
        self.request = request
        self.context = context
        self.lang = lang
        self.routed = [name for name in routed if name != "show_capabilities"]
        self.done = done
        self.earlier = earlier

    def say(self, ru: str, en: str) -> str:
        return say(self.lang, ru, en)

    def _repeats(self) -> bool:
        """A short message naming only another environment or object: the last call again."""
        request = self.request
        return (
            not request.intent
            and self.earlier.last_call is not None
            and len(request.words.split()) <= _FOLLOW_UP_WORDS
            and bool(
                request.target_env or request.source_env or request.dashboard_name or request.dashboard_ids
            )
        )

    def intent(self) -> str | None:
        request = self.request
        if request.intent:
            return request.intent
        last = self.earlier.last_call
        if last is not None and last.tool in _MAINTENANCE_SHOWN and ENDING.search(request.words):
            return "end_maintenance"  # the window just started or listed
        if last is not None and last.tool == "list_llm_providers" and _STATE_QUESTION.search(request.words):
            return "get_llm_status"  # whether the providers just listed answer
        if self._earlier_sql != self.earlier.sql:
            return SQL_TOOL  # "а shipped?": the last query, changed
        if self._repeats() and last is not None:
            return last.tool
        if last is not None and (self._flags(last.tool) or _ANOTHER.search(request.words)):
            return last.tool  # "and the charts too", "one more from bills": the last call again
        if request.negated or request.small_talk:
            return None
        if self._names_values:
            return SQL_TOOL  # "only the urgent ones": the last query, filtered by a value its table holds
        named = _KEYWORDS.match(request.words).tools
        return next((name for name in self.routed if name in named or not tool(name).may_change), None)

    def next_step(self) -> list[Call] | Reply:
        intent = self.intent()
        if intent is None:
            return self._without_a_tool()
        if (
            _needs(intent, "env_id")
            and self.request.unknown_env
            and not (self.request.target_env or self.request.source_env)
        ):
            known = ", ".join(markdown_text(env.id) for env in self.context.environments)
            unknown = markdown_text(self.request.unknown_env)  # the person's words, shown as typed
            return Reply(
                self.say(
                    f"Окружения «{unknown}» нет; есть: {known}. Какое имеется в виду?",
                    f"There is no “{unknown}” environment; there are: {known}. Which one?",
                ),
                asks_back=True,
            )
        if changes := [done for done in self.done if _changed(done)]:
            following = self._following(changes)
            if following is None:
                return self._outcomes(changes)  # the changes asked for are made: their outcomes
            intent = following
        needs = _Needs()
        args = self._arguments(intent, needs)
        if args is not None and needs.call is None and needs.question is None:
            final = next((done for done in self.done if done.tool == intent and done.args == args), None)
            return self._answer(final) if final is not None else [Call(intent, args)]
        if failed := next((done for done in self.done if done.failed), None):  # a read it needed
            return self._answer(failed)
        if needs.call is not None:
            if any(done.tool == needs.call.tool and done.args == needs.call.args for done in self.done):
                return Reply(
                    self.say(
                        "Не удалось найти нужное. Уточните запрос.",
                        "I could not find what is needed. Please be more specific.",
                    ),
                    asks_back=True,
                )
            return [needs.call]
        question = needs.question or self.say("Уточните, что именно сделать.", "What exactly should I do?")
        return Reply("\n\n".join([question, *needs.details]), asks_back=True)

    def _without_a_tool(self) -> Reply:
        if self.request.negated:
            return Reply(self.say("Хорошо, ничего не делаю.", "All right, I will not do anything."))
        if self.request.small_talk:
            return Reply(
                self.say(
                    "Пожалуйста! Спросите, например, «покажи дашборды» или «что сломано на проде?».",
                    "You are welcome! Ask, for example, “show dashboards” or “what is broken in prod?”.",
                )
            )
        return Reply(
            self.say(
                f"Не понял, что сделать. Например: {examples('ru')}.",
                f"I did not understand what to do. For example: {examples('en')}.",
            ),
            asks_back=True,
        )

    def _following(self, changes: Sequence[Done]) -> str | None:
        """The next change the request asks for after those made, once the last one has
        succeeded: not failed, rejected, still running as a task, or a check that found problems."""
        last = changes[-1]
        if last.failed or _running(last) or found_issues(last.result):
            return None
        made = {done.tool for done in changes}
        return next((name for name in self.request.then if name not in made), None)

    def _outcomes(self, changes: Sequence[Done]) -> Reply:
        """Each change's outcome, in order; and what the request asked for that was not made —
        after one that failed or was rejected, or that still runs — said, never dropped."""
        said = [self._answer(done).text for done in changes]
        made = {done.tool for done in changes}
        if left := [name for name in self.request.then if name not in made]:
            asked = ", ".join(f"«{tool(name).example[0]}»" for name in left)
            asked_en = ", ".join(f"“{tool(name).example[1]}”" for name in left)
            said.append(
                self.say(
                    "Остальное из запроса не сделано — попросите, когда задача закончится, "
                    f"например: {asked}.",
                    f"The rest of the request was not done — ask for it once the task ends, e.g. {asked_en}.",
                )
                if _running(changes[-1])
                else self.say(
                    f"Остальное из запроса не сделано; попросите отдельно, например: {asked}.",
                    f"The rest of the request was not done; ask for it on its own, e.g. {asked_en}.",
                )
            )
        return Reply("\n\n".join(said))

    def _answer(self, final: Done) -> Reply:
        if final.failed and isinstance(final.result, dict):
            return Reply(failure(final.tool, final.result.get("error", {}), self.lang))
        content = (
            final.result if isinstance(final.result, str) else json.dumps(final.result, ensure_ascii=False)
        )
        return Reply(rendered(final.tool, content, self.lang))

    # -- arguments ---------------------------------------------------------------------------

    def _env(self) -> str | None:
        return (
            self.request.target_env
            or self.request.source_env
            or (
                self.earlier.last_call.args.get("env_id")
                if self.earlier.last_call and (self._repeats() or self._earlier_sql != self.earlier.sql)
                else None
            )
            or self.context.env
        )

    def _source_env(self, target: str | None) -> str | None:
        if self.request.source_env:
            return self.request.source_env
        if self.context.env and self.context.env != target:
            production = {env.id for env in self.context.environments if env.production}
            if self.context.env not in production:
                return self.context.env
        return next(
            (env.id for env in self.context.environments if not env.production and env.id != target), None
        )

    def _arguments(self, intent: str, needs: _Needs) -> dict[str, Any] | None:
        request = self.request
        last = self.earlier.last_call
        if (
            self._repeats()
            and last is not None
            and intent == last.tool
            and not (request.dashboard_name or request.dashboard_ids)
            and "env_id" in last.args
        ):
            return {**last.args, "env_id": request.target_env or request.source_env}
        flags = self._flags(intent)
        if (
            flags
            and last is not None
            and intent == last.tool
            and not (request.dashboard_name or request.dashboard_ids or request.title or request.sql)
        ):
            return {**last.args, **flags}  # "with charts too": the last call, with what this one adds
        # What each argument is read from follows its declared type and whether it is required.
        if not ARGS[intent].model_fields:
            return {}
        if not _needs(intent, "env_id"):
            return self._simple(intent, {}, needs)
        env = self._env()
        if env is None:
            needs.question = self.say("В каком окружении?", "In which environment?")
            return None
        args: dict[str, Any] = {"env_id": env}
        if _takes(intent, "source_env"):
            return self._between(intent, args, needs)
        many = _needs(intent, "dashboard_ids")
        if _takes(intent, "dashboard_id") or (_takes(intent, "dashboard_ids") and not many):
            dashboard = self._dashboard(env, needs, required=_needs(intent, "dashboard_id"))
            if needs.call or needs.question:
                return None
            args.update(flags)
            if _takes(intent, "dashboard_ids"):  # some of the environment's dashboards, or all
                return {**args, "dashboard_ids": [dashboard]} if dashboard else args
            if dashboard:
                args["dashboard_id"] = dashboard
            if _needs(intent, "title"):  # a new dashboard made from this one
                args["title"] = (
                    request.title
                    if request.title and request.title != request.dashboard_name
                    else self._copy_title()
                )
            return args
        if many:
            return self._commit(args, needs)
        if _needs(intent, "database_id"):
            return self._with_database(intent, args, needs)
        return self._simple(intent, args, needs)

    def _flags(self, intent: str) -> dict[str, Any]:
        """The switches the words set that the tool takes: charts copied too, no cache."""
        request = self.request
        said = {"duplicate_charts": request.with_charts, "force": request.uncached}
        return {name: True for name, on in said.items() if on and _takes(intent, name)}

    def _production(self) -> str | None:
        """The one production environment, when there is exactly one."""
        production = [env.id for env in self.context.environments if env.production]
        return production[0] if len(production) == 1 else None

    def _between(self, intent: str, args: dict[str, Any], needs: _Needs) -> dict[str, Any] | None:
        """Dashboards taken from one environment to another. To: the environment named, else the
        production one; from: the one named, else the page's when it is not the target, else the
        first non-production one; the dashboards, as they are called there."""
        target = self.request.target_env or self._production()
        source = self._source_env(target)
        if target is None or source is None or source == target:
            needs.question = self.say(
                "Откуда и куда? Например: «из dev в prod».",
                "From where to where? For example: “from dev to prod”.",
            )
            return None
        moved: dict[str, Any] = {"env_id": target, "source_env": source}
        if _takes(intent, "database_mapping") and self.request.database_mapping:
            moved["database_mapping"] = dict(self.request.database_mapping)
        if _takes(intent, "dashboard_ids"):
            boards = self._dashboards(source, needs)
            return {**args, **moved, "dashboard_ids": boards} if boards else None
        dashboard = self._dashboard(source, needs, required=True)
        return {**args, **moved, "dashboard_id": dashboard} if dashboard else None

    def _copy_title(self) -> str:
        named = self._named_title() or self.say("дашборда", "dashboard")
        return self.say(f"{named} (копия)", f"{named} (copy)")

    def _named_title(self) -> str | None:
        for done in self.done:
            if done.tool == SEARCH and isinstance(done.result, dict):
                for board in done.result.get("dashboards", []):
                    if (
                        board["id"] in (self.request.dashboard_ids or ())
                        or _score(self.request.dashboard_name or "", board["title"]) >= _CLOSE_ENOUGH
                    ):
                        return str(board["title"])
        return self.request.dashboard_name

    def _simple(self, intent: str, args: dict[str, Any], needs: _Needs) -> dict[str, Any] | None:
        request = self.request
        last = self.earlier.last_call
        last_started = last.args.get("env_id") if last and last.tool in _MAINTENANCE_SHOWN else None
        if intent == SEARCH:
            if request.search_query:
                return {**args, "query": request.search_query}
            query = (
                request.dashboard_name
                if request.dashboard_name and not request.tag and not request.owner
                else None
            )
            return {
                **args,
                **{
                    key: value
                    for key, value in (("query", query), ("tag", request.tag), ("owner", request.owner))
                    if value
                },
            }
        if intent == "get_task_status":
            if request.task_id is None:
                needs.question = self.say("Какой задачи? Нужен её id.", "Which task? I need its id.")
                return None
            return {"task_id": request.task_id}
        if intent == "list_maintenance_events":
            return {"env_id": request.target_env} if request.target_env else {}
        if intent == "start_maintenance":
            reason = request.reason or _other_clause(request.words)
            return {**args, "reason": reason or self.say("Плановые работы", "Planned maintenance")}
        if intent == "end_maintenance" and last_started and not (request.target_env or request.source_env):
            return {"env_id": last_started}
        if intent == "superset_format_sql":
            if request.sql is None:
                needs.question = self.say("Какой SQL отформатировать?", "Which SQL should I format?")
                return None
            return {"sql": request.sql, **({"dialect": request.dialect.lower()} if request.dialect else {})}
        if intent == "superset_create_dashboard":
            title = request.title or request.colon_value
            if not title:
                needs.question = self.say(
                    "Как назвать новый дашборд?", "What should the new dashboard be called?"
                )
                return None
            published = {} if request.published is None else {"published": request.published}
            return {
                **args,
                "title": title.strip(),
                **({"slug": request.slug} if request.slug else {}),
                **published,
            }
        if intent == "create_branch":
            name = request.branch or request.title
            if not name:
                needs.question = self.say("Как назвать ветку?", "What should the branch be called?")
                return None
            start = re.search(
                r"\b(?:from|off|от|из)\s+(?:(?:the\s+)?branch\s+|ветки\s+)?([A-Za-z0-9][\w./-]*)",
                request.words,
            )
            return {"name": name, **({"start": start.group(1).rstrip("./")} if start else {})}
        if intent == EXPLORE:
            return self._explore(args, needs)
        try:  # any other tool: called once what the words gave fills what it requires
            ARGS[intent].model_validate(args)
            return args
        except ValidationError:
            needs.question = self.say("Уточните, что сделать.", "What exactly should I do?")
            return None

    # -- resolving names -----------------------------------------------------------------------

    def _searches(self, env: str) -> list[Done]:
        return [
            done
            for done in self.done
            if done.tool == SEARCH and done.args.get("env_id") == env and not done.failed
        ]

    def _dashboard(self, env: str, needs: _Needs, *, required: bool) -> int | None:
        """The dashboard the request means, in ``env``: by id, by the page's focus or the thread
        ("it"), or by name through search; None when it must ask first (``needs`` says how)."""
        request = self.request
        if request.dashboard_ids:
            return request.dashboard_ids[0]
        focus = self.context.focus
        if request.dashboard_name is None:
            if focus is not None and focus.type == "dashboard" and focus.id is not None:
                return focus.id
            if self.earlier.dashboard_id is not None and (request.refers_back or request.intent is None):
                return self.earlier.dashboard_id
            if self.earlier.dashboard_id is not None and required:
                return self.earlier.dashboard_id
            if not required:
                return None
            # a title written the way its words are not read as one ("it" names none: asked at once)
            if not request.refers_back:
                listed = self._listed(env)
                if listed is None:
                    needs.call = Call(SEARCH, {"env_id": env, "page_size": _LISTING_SIZE})
                    return None
                if spelled := self._titles_in_words(listed):
                    return int(spelled[0]["id"])
                if listed:
                    needs.details.append(_titles(listed, self.lang))
            needs.question = self.say(
                "Какой дашборд? Назовите его или дайте id.", "Which dashboard? Give its name or id."
            )
            return None
        return self._by_name(env, request.dashboard_name, needs)

    def _listed(self, env: str) -> list[dict[str, Any]] | None:
        """Every dashboard of ``env`` (its first hundred), once a listing was made this turn."""
        listing = [done for done in self._searches(env) if not done.args.get("query")]
        return listing[0].result.get("dashboards", []) if listing else None

    def _titles_in_words(self, boards: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        """The dashboards whose whole title the message spells out, or nearly (a typo or two),
        longest first, none inside another, in the order the message names them."""
        words = re.findall(r"[\w&'-]+", self.request.words.casefold())
        nearly = len(words) <= _NEARLY_SPELLED_WORDS  # each window of a message is compared to each title
        found: list[tuple[int, dict[str, Any]]] = []
        for board in sorted(boards, key=lambda item: len(item["title"]), reverse=True):
            title = " ".join(re.findall(r"[\w&'-]+", board["title"].casefold()))
            size = len(title.split())
            at = next(
                (
                    start
                    for start in range(len(words) - size + 1)
                    if _spelled(" ".join(words[start : start + size]), title, nearly=nearly)
                ),
                None,
            )
            if title and at is not None and not any(title in other["title"].casefold() for _, other in found):
                found.append((at, board))
        return [board for _, board in sorted(found, key=lambda item: item[0])]

    def _by_name(self, env: str, name: str, needs: _Needs) -> int | None:
        searches = self._searches(env)
        if not searches:
            needs.call = Call(SEARCH, {"env_id": env, "query": name})
            return None
        boards = [board for done in searches for board in done.result.get("dashboards", [])]
        unique = list({board["id"]: board for board in boards}.values())
        ranked = sorted(unique, key=lambda board: _score(name, board["title"]), reverse=True)
        scores = [_score(name, board["title"]) for board in ranked]
        if (
            ranked
            and scores[0] >= _CLOSE_ENOUGH
            and (len(ranked) == 1 or scores[0] - scores[1] >= _CLEAR_LEAD)
        ):
            return int(ranked[0]["id"])
        listed = self._listed(env)
        if listed is None:  # then every title, to find the one the words spell or resemble
            needs.call = Call(SEARCH, {"env_id": env, "page_size": _LISTING_SIZE})
            return None
        if spelled := self._titles_in_words(listed):
            return int(spelled[0]["id"])
        name, env = markdown_text(name), markdown_text(env)  # shown as typed, never as Markdown
        if len(ranked) > 1 and scores[0] >= _CLOSE_ENOUGH:
            close = [board for board, score in zip(ranked, scores, strict=True) if score >= _CLOSE_ENOUGH]
            needs.question = self.say(
                f"Под «{name}» подходят несколько дашбордов в {env}. Какой?",
                f"Several dashboards in {env} match “{name}”. Which one?",
            )
            needs.details.append(_titles(close, self.lang))
            return None
        needs.question = self.say(
            f"В {env} нет дашборда «{name}». Какой вы имели в виду?",
            f"There is no dashboard “{name}” in {env}. Which one did you mean?",
        )
        if listed:
            needs.details.append(_titles(listed, self.lang))
        return None

    def _dashboards(self, env: str, needs: _Needs) -> list[int] | None:
        """Several dashboards by id, or by the titles the message spells out."""
        if self.request.dashboard_ids:
            return list(self.request.dashboard_ids)
        if self.request.dashboard_name is None:
            single = self._dashboard(env, needs, required=True)
            return [single] if single else None
        listed = self._listed(env)
        if listed is None:
            needs.call = Call(SEARCH, {"env_id": env, "page_size": _LISTING_SIZE})
            return None
        if spelled := self._titles_in_words(listed):
            return [int(board["id"]) for board in spelled]
        single = self._by_name(env, self.request.dashboard_name, needs)
        return [single] if single else None

    def _commit(self, args: dict[str, Any], needs: _Needs) -> dict[str, Any] | None:
        """Dashboards put on a branch with a message: the branch named, or the one just made."""
        request = self.request
        last = self.earlier.last_call
        branch = request.branch or (last.args.get("name") if last and last.tool == "create_branch" else None)
        if not (branch and request.reason):
            needs.question = self.say(
                "Для коммита нужны ветка, дашборды и сообщение: например «закоммить дашборд 3 в ветку "
                "fixes, сообщение: …».",
                "A commit needs a branch, the dashboards and a message: for example “commit dashboard 3 "
                "on branch fixes, message: …”.",
            )
            return None
        boards = self._dashboards(args["env_id"], needs)
        return (
            {**args, "branch": branch, "dashboard_ids": boards, "message": request.reason} if boards else None
        )

    def _database(self, env: str, needs: _Needs, about_table: bool = False) -> int | None:
        """The database the request is about: the one it names; the only one; else, for a
        request about a table, the one of a few whose default schema has a table the words name
        (each explored first); else a question."""
        listing = self._explored(env)
        if listing is None:
            needs.call = Call(EXPLORE, {"env_id": env})
            return None
        databases = listing["databases"]
        named = (self.request.database_name or "").casefold()
        words = set(re.findall(r"[\w.-]+", self.request.words.casefold()))
        chosen = [db for db in databases if db["name"].casefold() == named or db["name"].casefold() in words]
        if len(chosen) == 1:
            return int(chosen[0]["id"])
        if len(databases) == 1:
            return int(databases[0]["id"])
        if about_table and len(databases) <= _DATABASES_SEARCHED:
            holding = []
            for database in databases:
                place = self._table_place(env, int(database["id"]), needs)
                if needs.call is not None:
                    return None  # a database is explored first
                if place is not None and place[1] is not None:
                    holding.append(int(database["id"]))
            if len(holding) == 1:
                return holding[0]
        rows = [(db["id"], db["name"]) for db in databases]
        shown = markdown_text(env)
        needs.question = self.say(f"В какой базе данных {shown}?", f"Which database in {shown}?")
        if rows:
            needs.details.append(table(["id", say(self.lang, "база", "database")], rows))
        return None

    def _explored(self, env: str, **where: Any) -> dict[str, Any] | None:
        """What this turn's exploration of exactly ``where`` (database, schema, table) returned."""
        return next(
            (
                done.result
                for done in self.done
                if done.tool == EXPLORE
                and not done.failed
                and isinstance(done.result, dict)
                and done.args.get("env_id") == env
                and {key: done.args.get(key) for key in ("database_id", "schema", "table")}
                == {key: where.get(key) for key in ("database_id", "schema", "table")}
            ),
            None,
        )

    def _table_place(self, env: str, database: int, needs: _Needs) -> tuple[str, str | None] | None:
        """(schema, the table the words name or None) in ``database``: in the schema the words
        name, else in its default one or, failing that, the next few; None while still to be
        explored (``needs.call``) or when it has no such schema."""
        schema_named = self.request.schema or (self.request.table or "").rpartition(".")[0]
        schemas = (self._explored(env, database_id=database) or {}).get("schemas")
        if schemas is None:
            needs.call = Call(EXPLORE, {"env_id": env, "database_id": database})
            return None
        if not schemas or (schema_named and schema_named not in schemas):
            return None
        default = _default_schema(schemas)
        others = [name for name in schemas if name != default and not _SYSTEM_SCHEMA.match(name)]
        looked = [schema_named] if schema_named else [default, *others][:_SCHEMAS_SEARCHED]
        for schema in looked:
            tables = (self._explored(env, database_id=database, schema=schema) or {}).get("tables")
            if tables is None:
                needs.call = Call(EXPLORE, {"env_id": env, "database_id": database, "schema": schema})
                return None
            named = [str(name) for name in tables]
            if found := table_named_in(self.request, named, self._statement, self.earlier.table):
                return schema, found
        return looked[0], None

    @property
    def _statement(self) -> str | None:
        """The statement the request runs as it stands: its own, or the last one (as this follow-up
        changes it) when it names no table of its own."""
        request = self.request
        if request.sql is not None or request.table is not None:
            return request.sql
        return self._earlier_sql

    @cached_property
    def _earlier_sql(self) -> str | None:
        """The last query, as this follow-up changes it (unchanged when it does not): parsed once
        a step, though the intent, the environment and the arguments all ask."""
        last, sql = self.earlier.last_call, self.earlier.sql
        if sql is None or last is None or last.tool != SQL_TOOL:
            return sql
        return refined(sql, self.request.words) or sql

    @cached_property
    def _names_values(self) -> bool:
        """Whether a short follow-up to a query names values the query does not filter on yet."""
        last, request = self.earlier.last_call, self.request
        return (
            last is not None
            and last.tool == SQL_TOOL
            and request.sql is None
            and not request.intent
            and self._earlier_sql == self.earlier.sql
            and len(request.words.split()) <= _FOLLOW_UP_WORDS
            and bool(value_words(request.words))
        )

    def _table_found(self, env: str, database: int, needs: _Needs) -> tuple[str, str] | None:
        """(schema, table) the request is about in ``database``; None while a read comes first
        (``needs.call``) or when none is found (``needs.question``, with the tables there are)."""
        place = self._table_place(env, database, needs)
        if needs.call is not None:
            return None
        if place is None or place[1] is None:
            needs.question = self.say("Какая таблица имеется в виду?", "Which table do you mean?")
            tables = (self._explored(env, database_id=database, schema=place[0]) or {}) if place else {}
            if tables.get("tables"):
                needs.details.append(", ".join(markdown_text(name) for name in tables["tables"][:100]))
            return None
        return place[0], str(place[1])

    def _values_held(
        self, env: str, database: int, needs: _Needs
    ) -> tuple[str, list[dict[str, Any]], dict[str, list[str]]] | None:
        """The table the request is about in ``database``, its columns, and the values its text
        columns hold that the words may name (read once, when they may name some); None while
        a read comes first (``needs.call``) or when no table is found (``needs.question``)."""
        found = self._table_found(env, database, needs)
        if found is None:
            return None
        schema, table_name = found
        where = {"database_id": database, "schema": schema, "table": table_name}
        columns = (self._explored(env, **where) or {}).get("columns")
        if columns is None:
            needs.call = Call(EXPLORE, {"env_id": env, **where})
            return None
        held: dict[str, list[str]] = {}
        if probe := values_probe(self.request.words, table_name, columns):
            looked = {"env_id": env, "database_id": database, "sql": probe, "limit": PROBED_ROWS}
            done = next((done for done in self.done if done.tool == SQL_TOOL and done.args == looked), None)
            if done is None:
                needs.call = Call(SQL_TOOL, looked)
                return None
            if isinstance(done.result, dict) and not done.failed:
                held = probed_values(done.result)
        return table_name, columns, held

    def _with_database(self, intent: str, args: dict[str, Any], needs: _Needs) -> dict[str, Any] | None:
        """A statement (as written, the last one as this follow-up changes it, or one written from
        the table's real columns for a question about its rows), or a table to register, with the
        database that has it."""
        request, env, statement = self.request, args["env_id"], self._statement
        last = self.earlier.last_call
        again = last is not None and last.tool == SQL_TOOL and last.args.get("env_id") == env
        if intent == SQL_TOOL and request.sql is None and statement and again:
            assert last is not None
            database = last.args["database_id"]
            if self._names_values:
                found = self._values_held(env, database, needs)
                if found is None:
                    return None
                changed = refined(statement, request.words, found[2])
                if changed is None:  # "looks good": no value of the table, nothing to run again
                    needs.question = self.say(
                        "Что изменить в запросе? Назовите значение или колонку.",
                        "What should change in the query? Name a value or a column.",
                    )
                    return None
                statement = changed
            return {**args, "database_id": database, "sql": statement}
        # a table is looked for among the real ones when a word of the request may be its name
        may_name = request.table or self.earlier.table or re.search(r"[A-Za-z_]{3,}", request.words)
        if intent == SQL_TOOL and statement is None and not may_name:
            needs.question = self.say(
                "Какой запрос выполнить? Пришлите SQL или назовите таблицу.",
                "Which query should I run? Send the SQL or name the table.",
            )
            return None
        database = self._database(env, needs, about_table=True)
        if database is None:
            return None
        if intent == SQL_TOOL and statement is not None:
            return {**args, "database_id": database, "sql": statement}
        if intent == "superset_create_dataset":
            place = self._table_found(env, database, needs)
            return (
                {**args, "database_id": database, "table_name": place[1], "schema": place[0]}
                if place
                else None
            )
        found = self._values_held(env, database, needs)
        if found is None:
            return None
        table_name, columns, held = found
        databases = (self._explored(env) or {}).get("databases") or []
        backend = next((db.get("backend") for db in databases if db.get("id") == database), None)
        sql = described_sql(request, table_name, columns, held, backend)
        return {**args, "database_id": database, "sql": sql}

    def _explore(self, args: dict[str, Any], needs: _Needs) -> dict[str, Any] | None:
        """Databases; or, for tables or a table's columns, one step deeper at a time: the
        database, its schema (the default one), then its tables or the table's columns."""
        request = self.request
        wants_tables = bool(_TABLES_WANTED.search(request.words)) and not _COLUMNS_WANTED.search(
            request.words
        )
        if request.database_name is None and request.table is None and not wants_tables:
            return args
        about_table = not wants_tables and request.table is not None
        database = self._database(args["env_id"], needs, about_table=about_table)
        if database is None:
            return None
        explored = [
            done
            for done in self.done
            if done.tool == EXPLORE and done.args.get("database_id") == database and not done.failed
        ]
        schemas = next(
            (
                done.result.get("schemas")
                for done in explored
                if isinstance(done.result, dict) and done.result.get("schemas")
            ),
            None,
        )
        if schemas is None:
            return {**args, "database_id": database}
        schema = request.schema if request.schema in schemas else _default_schema(schemas)
        columns = {"table": request.table} if request.table and not wants_tables else {}
        return {**args, "database_id": database, "schema": schema, **columns}
