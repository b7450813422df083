"""One turn's next step, by frames: the tool whose action words stand affirmed in the message (or,
for a read, whose typed slots the message fills: a task's id, a statement, a table's words), its
arguments read by each slot's reader from the words, the live system and the conversation's last
objects; else one precise question. Once the call has its result, the answer from it."""

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol, get_origin

import sqlglot
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from sqlglot import exp
from sqlglot.errors import SqlglotError

from sstools.agent.answers import examples, failure, found_issues, rendered
from sstools.agent.context import TurnContext
from sstools.agent.fence import TOOL_RESULT, unfenced
from sstools.agent.language import Lang, say
from sstools.agent.markdown import markdown_text
from sstools.agent.planner.asked_data import (
    LABEL_CHARS,
    DataQuestion,
    Place,
    Unclear,
    asks_data,
    data_question,
    place_named,
)
from sstools.agent.planner.grounded import find, similar
from sstools.agent.planner.reading import DASHBOARD_NOUNS, Reading, unexplained
from sstools.common.catalogue import ALWAYS_OFFERED, ARGS, ASKED_OF_A_DASHBOARD, Tier, tool
from sstools.common.language import in_order, phrase_stems
from sstools.common.outline import EnvOutline

THREAD_KEY = "sstools_thread"  # in the planner's messages: the objects the turn named, typed
_FOLLOW_UP_WORDS = 8


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


_REFERS_BACK = frozenset(
    phrase_stems(
        "it its them their this that these those same again also too его него ему их он она оно они этот эти"
        " этого этому тот"
        " тем там туда тоже также теперь снова"
    )
)
_SMALL_TALK = frozenset(
    phrase_stems(
        "hi hello hey thanks thank cool great nice haha lol ok okay привет спасибо пасиб здравствуй ок"
        " круто класс хаха"
    )
)
_TITLES_SHOWN = 10
# The argument a search's words go to when no marker leads them.
_SEARCH_TEXT = "query"
# A read the router finds on meaning alone is made when it is among its first few.
_ROUTED_ON_MEANING = 3
_ENV_ARGS = ("env_id", "source_env")  # an environment, never a name "that branch" points back to


class Ground(Protocol):
    """The live system as the person sees it, cached (:mod:`sstools.agent.grounding`)."""

    async def titles(self, env_id: str) -> dict[int, str] | None: ...
    async def relate(
        self, queries: Sequence[str], labels: Sequence[str]
    ) -> Sequence[Sequence[float]] | None: ...
    async def outline(self, env_id: str) -> EnvOutline | None: ...


@dataclass(frozen=True)
class Thread:
    """What earlier turns leave a follow-up: their last call and the objects they named."""

    last: Call | None = None
    env: str | None = None
    dashboards: tuple[int, ...] = ()
    question: DataQuestion | None = None

    def kept(self) -> dict[str, Any]:
        question = self.question.model_dump(mode="json") if self.question else None
        return {"env": self.env, "dashboards": list(self.dashboards), "question": question}


@dataclass
class Slots:
    """What filling one frame found: its arguments, or what is missing, and the objects named."""

    args: dict[str, Any] = field(default_factory=dict)
    missing: str | None = None
    dashboards: tuple[int, ...] = ()
    question: DataQuestion | None = None


def earlier_thread(messages: Sequence[BaseMessage]) -> Thread:
    """The last call of earlier turns, and the objects the planner kept with its messages."""
    thread = Thread()
    for message in messages:
        if not isinstance(message, AIMessage):
            continue
        for call in message.tool_calls:
            args = dict(call["args"])
            ids = args.get("dashboard_ids") or ([args["dashboard_id"]] if args.get("dashboard_id") else [])
            thread = Thread(
                Call(call["name"], args),
                args.get("env_id") or thread.env,
                tuple(ids) or thread.dashboards,
                thread.question,
            )
        if kept := message.response_metadata.get(THREAD_KEY):
            question = kept.get("question")
            thread = Thread(
                thread.last,
                kept.get("env") or thread.env,
                tuple(kept.get("dashboards") or ()) or thread.dashboards,
                DataQuestion.model_validate(question) if question else thread.question,
            )
    return thread


class Planner:
    def __init__(
        self,
        reading: Reading,
        context: TurnContext,
        lang: Lang,
        routed: Sequence[str],
        thread: Thread,
        ground: Ground | None,
    ) -> None:
        self.reading = reading.of_last(thread.last.tool, _REFERS_BACK) if thread.last else reading
        self.context = context
        self.lang = lang
        self.routed = routed
        self.thread = thread
        self.ground = ground
        self.kept = thread

    def say(self, ru: str, en: str) -> str:
        return say(self.lang, ru, en)

    async def after(self, done: Sequence[Done]) -> list[Call] | Reply:
        """The next change the message asks for once the last one has succeeded (not failed,
        rejected, still running as a task, or a check that found problems); else the outcomes,
        and what was asked but not done, said, never dropped."""
        reading, last = self.reading, done[-1]
        # a change named inside a text a call took ("по причине переезда") was not asked for
        texts = [
            reading.after(markers) for name in reading.acts for markers in tool(name).frame.texts.values()
        ]
        spans = [
            (start, start + len(text)) for text in texts if text and (start := reading.text.find(text)) >= 0
        ]
        inside = {
            name
            for name, at in reading.named_at.items()
            if any(start <= reading.words[at].start < end for start, end in spans)
        }
        # changes asked together are made one after another; reads too, where the words order them
        ordered = in_order(reading.words)
        asked = sorted(
            (name for name in reading.acts if (ordered or not _reads(name)) and name not in inside),
            key=lambda name: reading.named_at[name],
        )
        left = [name for name in asked if name not in {call.tool for call in done}]
        running = isinstance(last.result, dict) and last.result.get("status") in ("queued", "running")
        chained = ordered or not _reads(last.tool)
        if left and chained and not (last.failed or running or found_issues(last.result)):
            await self._read_titles()
            ids = last.args.get("dashboard_ids") or (
                [last.args["dashboard_id"]] if "dashboard_id" in last.args else []
            )
            self.thread = Thread(self.thread.last, self.thread.env, tuple(ids) or self.thread.dashboards)
            slots = await self._fill(left[0])
            if slots is not None and slots.missing is None:
                return [Call(left[0], slots.args)]
            if slots is not None:  # what the next change lacks, asked after what was done
                known = _MISSING.get(slots.missing or "")
                asked_back = self.say(*known) if known else str(slots.missing)
                return Reply(f"{(await self.answer(done)).text}\n\n{asked_back}", asks_back=True)
        reply = await self.answer(done)
        if not left or not chained:
            return reply
        examples_ru = ", ".join(f"«{tool(name).example[0]}»" for name in left)
        examples_en = ", ".join(f"“{tool(name).example[1]}”" for name in left)
        rest = (
            self.say(
                "Остальное из запроса не сделано — попросите, когда задача закончится, например: "
                f"{examples_ru}.",
                f"The rest of the request was not done — ask for it once the task ends, e.g. {examples_en}.",
            )
            if running
            else self.say(
                f"Остальное из запроса не сделано; попросите отдельно, например: {examples_ru}.",
                f"The rest of the request was not done; ask for it on its own, e.g. {examples_en}.",
            )
        )
        return Reply(f"{reply.text}\n\n{rest}")

    async def answer(self, done: Sequence[Done]) -> Reply:
        said = []
        for call in done:
            if call.failed and isinstance(call.result, dict):
                said.append(failure(call.tool, call.result.get("error", {}), self.lang))
            else:
                content = (
                    call.result
                    if isinstance(call.result, str)
                    else json.dumps(call.result, ensure_ascii=False)
                )
                said.append(rendered(call.tool, content, self.lang))
        found = tuple(
            board["id"]
            for call in done
            if isinstance(call.result, dict) and isinstance(call.result.get("dashboards"), list)
            for board in call.result["dashboards"]
            if isinstance(board, dict) and isinstance(board.get("id"), int)
        )
        if found:  # "deploy it" after a search: the dashboards it found
            self.kept = replace(self.kept, dashboards=found)
        if (
            self.kept.question
            and any(call.args.get("sql") == self.kept.question.statement() for call in done)
            and (applied := self.kept.question.conditions())
        ):
            said.insert(0, self.say("Условия: ", "Conditions: ") + ", ".join(map(markdown_text, applied)))
        return Reply("\n\n".join(said))

    async def next_step(self) -> list[Call] | Reply:
        reading = self.reading
        if reading.unknown_env and not (reading.target_env or reading.source_env):
            known = ", ".join(markdown_text(env.id) for env in self.context.environments)
            unknown = markdown_text(reading.unknown_env)
            return self._ask(
                f"Окружения «{unknown}» нет; есть: {known}. Какое имеется в виду?",
                f"There is no “{unknown}” environment; there are: {known}. Which one?",
            )
        question: Reply | None = None
        asked_change = False
        await self._read_titles()
        follow = self.thread.last.tool if self.thread.last and self._follows(self.thread.last.tool) else None
        candidates, unnamed = await self._candidates()
        for name in candidates:
            # a question about what the words asked outranks a guess at something else; about a
            # change they asked, the last read again too ("deploy it" of several found)
            if question is not None and name not in reading.acts and (name != follow or asked_change):
                break
            slots = await self._fill(name)
            if slots is None:
                continue
            if slots.missing is None:
                boards = slots.dashboards or self.boards or self.thread.dashboards
                self.kept = Thread(
                    self.thread.last,
                    slots.args.get("env_id") or self.thread.env,
                    boards,
                    slots.question or self.thread.question,
                )
                return [Call(name, slots.args)]
            if question is None and name not in unnamed:
                asked = _MISSING.get(slots.missing)
                question = self._ask(*asked) if asked else Reply(slots.missing, asks_back=True)
                asked_change = name in reading.acts and not _reads(name)
        if question is not None:
            return question
        if reading.refused and not reading.named:
            return Reply(self.say("Хорошо, ничего не делаю.", "All right, I will not do anything."))
        if reading.stems & _SMALL_TALK:
            return Reply(
                self.say(
                    "Пожалуйста! Спросите, например, «покажи дашборды» или «что сломано на проде?».",
                    "You are welcome! Ask, for example, “show dashboards” or “what is broken in prod?”.",
                )
            )
        return self._ask(
            f"Не понял, что сделать. Например: {examples('ru')}.",
            f"I did not understand what to do. For example: {examples('en')}.",
        )

    async def _read_titles(self) -> None:
        """The dashboards whose titles the words spell where the data is; a title is a name,
        never words about data ("Sales Overview" of a sales table) — in the page's environment,
        where dashboards come from, either."""
        reading = self.reading
        self._env_for_data = reading.target_env or reading.source_env or self.context.env
        self.boards = await self._titled(self._env_for_data)
        if not self.reading.taken and self.context.env and self.context.env != self._env_for_data:
            await self._titled(self.context.env)

    @property
    def _asks_of_dashboard(self) -> bool:
        """A question of a dashboard by its title and of nothing else ("<title> норм?"), or its
        title with words that name no tool and refuse nothing ("check <title>")."""
        reading, last = self.reading, self.thread.last
        if not self.boards or reading.acts:
            return False
        # "and <title>?" after a call goes on with that call
        said = not (reading.named or reading.doubts or (last and self._follows(last.tool)))
        return reading.asks or said

    def _ask(self, ru: str, en: str) -> Reply:
        return Reply(self.say(ru, en), asks_back=True)

    async def _candidates(self) -> tuple[list[str], set[str]]:
        """Tools the words name, first asked first: a change, then a question about data that
        spells its table, then the reads named; the frames a typed thing of the message fills
        (a task's id, a statement, a table or value of the data); the tools named only by the
        noun of their object; the last call again for a short follow-up; the router's other
        reads. A change is proposed only on words that name it affirmed, or on a verb the router
        reads as it for a dashboard the words name (:meth:`_meant_change`). And the router's
        tools the words do not name: made if their frame fills, never asked about."""
        reading = self.reading
        # named as often, the frame that takes as many dashboards as the message names leads
        fits = {
            name: _needs(name, "dashboard_ids") == reading.many or not _needs_dashboards(name)
            for name in reading.named
        }
        nearness = await self._nearness(fits)
        named = sorted(
            (name for name in reading.named if name != ALWAYS_OFFERED),
            key=lambda name: (
                name not in reading.qualifying,
                -reading.named[name],
                name in reading.guessed,
                not fits[name],
                -nearness.get(name, 0.0),
                reading.named_at[name],
            ),
        )
        acts = [name for name in named if name in reading.acts]
        typed = sorted(
            (
                name
                for name in ARGS
                if (reading.task_id and _needs(name, "task_id"))
                or (reading.sql and _needs(name, "sql"))
                or (_takes(name, "database_id") and _needs(name, "sql"))
            ),
            key=lambda name: named.index(name) if name in named else len(named),
        )
        spelt = [
            name for name in typed if not reading.sql and asks_data(reading) and await self._spells_table()
        ]
        # a question about data in words, of no table the words spell, where no action is named
        # and nothing but data ("сколько собак в базе?")
        data_only = (
            not acts
            and not reading.stems & _SMALL_TALK
            # a change named only by the noun of its object is never proposed ("which branch …")
            and all(_takes(name, "database_id") or not _reads(name) for name in named)
        )
        typed = [name for name in typed if reading.sql or reading.task_id or spelt or data_only]
        last = self.thread.last
        follow = [last.tool] if last and self._follows(last.tool) else []
        ordered = [*typed] if (reading.task_id or reading.sql) else []
        ordered += follow if follow and await self._about_last_table() else []
        if in_order(reading.words):  # "check it, then deploy": what is said first is done first
            ordered += sorted(acts, key=lambda name: reading.named_at[name])
        # changes asked together are all made, in the order said
        ordered += sorted((name for name in acts if not _reads(name)), key=reading.named_at.__getitem__)
        meant = self._meant_change()
        ordered += spelt + acts + typed + ([meant] if meant else [])
        ordered += [ASKED_OF_A_DASHBOARD] * (self._asks_of_dashboard and reading.asks)
        ordered += [name for name in named if name not in acts] + follow
        # the router's reads the words do not name: made if their frame fills, never asked about;
        # none where the words refuse something and name nothing else ("нет, ничего не надо")
        unnamed = {name for name in self.routed if name not in ordered}
        if reading.named or not reading.doubts:
            ordered += [name for name in self.routed if _reads(name) and name != ALWAYS_OFFERED]
        # a title and words that name no tool: what the router reads of it first, else its state
        ordered += [ASKED_OF_A_DASHBOARD] * self._asks_of_dashboard
        ordered += [ALWAYS_OFFERED] * (ALWAYS_OFFERED in reading.named)
        candidates = [
            name
            for name in dict.fromkeys(ordered)
            if name in ARGS
            and name not in reading.refused
            and (
                _reads(name)
                or name in reading.acts
                or name in (*follow, meant)
                or _object_spelt(reading, name)
            )
        ]
        return candidates, unnamed

    def _meant_change(self) -> str | None:
        """The router's first tool, a change of a dashboard, where the words name its dashboard
        and no action, ask nothing and refuse nothing: meant by a verb no declaration lists
        ("закатай <title> на прод"), proposed only for the person to confirm."""
        reading, first = self.reading, next(iter(self.routed), None)
        if first is None or first not in ARGS or _reads(first) or reading.acts or reading.asks:
            return None
        if reading.doubts or not _takes_dashboards(first):
            return None
        # the verb the router read by meaning: a word of the message no declaration explains
        return first if (reading.taken or reading.dashboard_ids) and unexplained(reading) else None

    async def _nearness(self, fits: Mapping[str, bool]) -> dict[str, float]:
        """For tools the words name alike (as many words, as surely), how near the whole message
        is to each one's description by meaning ("is the LLM provider up?": its state, not the
        list of providers)."""
        reading = self.reading
        alike: dict[tuple[int, bool, bool], list[str]] = {}
        for name in reading.named:
            alike.setdefault((reading.named[name], name in reading.guessed, fits[name]), []).append(name)
        tied = [name for names in alike.values() if len(names) > 1 for name in names]
        if not tied or self.ground is None:
            return {}
        described = [say(self.lang, tool(name).description_ru, tool(name).description_en) for name in tied]
        scores = await self.ground.relate([reading.text[:LABEL_CHARS]], described)
        return dict(zip(tied, scores[0], strict=True)) if scores else {}

    async def _about_last_table(self) -> bool:
        """Whether the words spell a column or value of the last question's table ("what about
        the closed ones?", "а по командам?"), and no table of their own."""
        question, reading = self.thread.question, self.reading
        if question is None or self.ground is None or reading.sql:
            return False
        outline = await self.ground.outline(self.thread.env or self._env_for_data or "")
        tables = [table for db in outline.databases for table in db.tables] if outline else []
        usable = [index for index, word in enumerate(reading.words) if index not in reading.taken]
        if await find(reading.words, usable, [table.name for table in tables], None):
            return False
        last = next((table for table in tables if table.name == question.table), None)
        labels = [column.name for column in last.columns] if last else []
        labels += [value for column in (last.columns if last else ()) for value in column.values or ()]
        return bool(await find(reading.words, usable, labels, None))

    async def _spells_table(self) -> bool:
        """Whether the words spell a table of the environment's data (read only when they hold
        words no tool's declaration has)."""
        if self.ground is None or not self._env_for_data or not unexplained(self.reading):
            return False
        outline = await self.ground.outline(self._env_for_data)
        return outline is not None and isinstance(await place_named(self.reading, outline, None), Place)

    async def _fill(self, name: str) -> Slots | None:
        """The frame's arguments, each by its slot's reader; None when the message gives the
        frame nothing of its own to go on (a read the words do not name, with no typed slot
        the message fills)."""
        reading, spec = self.reading, tool(name)
        model = ARGS[name]
        fields = model.model_fields
        slots = Slots()
        evidence = (
            name in reading.named
            or (self.thread.last is not None and name == self.thread.last.tool)
            or (name == ASKED_OF_A_DASHBOARD and self._asks_of_dashboard)
            or name == self._meant_change()
            or (
                not reading.named
                and not reading.refused  # "ничего не меняй, я только читаю" asks for nothing
                and name in self.routed[:_ROUTED_ON_MEANING]
                and not reading.stems & _SMALL_TALK
                # a dashboard the words name is what the read is of
                and (_takes_dashboards(name) or not (reading.taken or reading.dashboard_ids))
            )
        )
        target = self._env(name)
        for field_name, info in fields.items():
            key = info.alias or field_name
            needed = info.is_required() or field_name in getattr(model, "ONE_OF", ())
            value: Any = None
            if field_name == "env_id":
                value = target if needed or reading.target_env or reading.source_env else None
            elif field_name == "source_env":
                value = self._source(target)
            elif field_name in ("dashboard_id", "dashboard_ids"):
                ids = await self._dashboards(
                    name,
                    target,
                    needed or (field_name == "dashboard_ids" and bool(self.reading.dashboard_ids)),
                )
                slots.dashboards = ids
                value = (ids[0] if ids else None) if field_name == "dashboard_id" else (list(ids) or None)
                evidence = evidence or bool(ids and reading.dashboard_ids)
            elif field_name == "task_id":
                value = reading.task_id
                evidence = evidence or bool(value)
            elif field_name == "sql":
                value = reading.sql
                evidence = evidence or bool(value)
            elif field_name in spec.frame.texts:
                others = [m for key, marks in spec.frame.texts.items() if key != field_name for m in marks]
                value = _fitted(reading.after(spec.frame.texts[field_name], others), info.metadata)
                if get_origin(info.annotation) is dict:  # "map a to b", "базу a замапь на b"
                    value = _mapping(reading, spec.frame.texts[field_name])
                evidence = evidence or bool(value)
                if value is None and field_name == _SEARCH_TEXT:  # what is looked for: quoted, or a title
                    value = next(iter(reading.quoted), None) or self._titles_said() or _before_noun(reading)
                if value is None and needed:  # quoted, said in a clause of its own, or the default
                    said = (
                        _named_like(reading, info.metadata)
                        or self._named_before(info.metadata)
                        or [
                            text
                            for text in (*reading.quoted[:1], *reading.untold()[-1:])
                            if _fits(text, _patterns(info.metadata))
                        ][:1]
                    )
                    default = spec.frame.defaults.get(field_name)
                    value = said[0] if said else self.say(*default) if default else None
            elif field_name in spec.frame.flags:
                value = True if reading.flag(spec.frame.flags[field_name]) else None
            if value is not None:
                slots.args[key] = value
        if "database_id" in fields or "table" in fields or "table_name" in fields:
            grounded = await self._data(name, target, slots)
            if not grounded and not evidence and slots.missing is None:
                return None
            evidence = True
        if not evidence:
            return None
        if self._follows(name):  # what the message does not say again, the last call said
            slots.missing = None if slots.missing in _MISSING else slots.missing
            await self._carried(fields, slots, target)
        if slots.missing is None:
            slots.missing = next(
                (
                    (info.alias or field_name)
                    for field_name, info in fields.items()
                    if (info.is_required() and (info.alias or field_name) not in slots.args)
                ),
                None,
            )
            if (
                slots.missing is None
                and (one_of := getattr(model, "ONE_OF", ()))
                and not set(one_of) & set(slots.args)
            ):
                slots.missing = one_of[0]
        if slots.missing in ("dashboard_id", "dashboard_ids"):
            slots.missing = await self._which_dashboard(target)
        return slots

    def _named_before(self, constraints: Sequence[Any]) -> list[str]:
        """For an argument of a pattern the words point back to ("that branch", "туда"): the
        last call's first text of that pattern."""
        patterns = _patterns(constraints)
        last = self.thread.last
        if not patterns or last is None or not self.reading.stems & _REFERS_BACK:
            return []
        return [
            value
            for key, value in last.args.items()
            if key not in _ENV_ARGS and isinstance(value, str) and _fits(value, patterns)
        ][:1]

    def _follows(self, name: str) -> bool:
        """Whether the message goes on from the last call: its tool again in a few words, or
        words that point back at it ("его", "the same", "теперь")."""
        last = self.thread.last
        if last is None or self.reading.doubts:  # "don't, cancel that" repeats nothing
            return False
        return (last.tool == name and len(self.reading.words) <= _FOLLOW_UP_WORDS) or bool(
            self.reading.stems & _REFERS_BACK
        )

    async def _carried(self, fields: Mapping[str, Any], slots: Slots, target: str | None) -> None:
        """The last call's arguments the frame takes and the message leaves unsaid; a database
        of another environment by its name there."""
        last = self.thread.last
        assert last is not None
        for key, value in last.args.items():
            if key in fields or any(info.alias == key for info in fields.values()):
                slots.args.setdefault(key, value)
        database = last.args.get("database_id")
        was = last.args.get("env_id")
        if database and "database_id" in fields and was and target and was != target and self.ground:
            before, after = await self.ground.outline(was), await self.ground.outline(target)
            named = next((db.name for db in before.databases if db.id == database), None) if before else None
            moved = next((db.id for db in after.databases if db.name == named), None) if after else None
            if slots.args.get("database_id") == database and moved:
                slots.args["database_id"] = moved

    def _env(self, name: str) -> str | None:
        reading = self.reading
        if reading.target_env:
            return reading.target_env
        if reading.source_env and not _takes(name, "source_env"):
            return reading.source_env
        if self.thread.last is not None and name == self.thread.last.tool and self.thread.env:
            return self.thread.env
        if _takes(name, "source_env"):  # a change that moves something goes to production
            production = [env.id for env in self.context.environments if env.production]
            if production and self.context.env not in production:
                return production[0]
        if self.thread.env and reading.stems & _REFERS_BACK:  # "bring it back": where the last call was
            return self.thread.env
        if (
            tool(name).policy.tier is Tier.DANGEROUS
            and self.context.env_source == "default"
            and not (_takes(name, "source_env") or _takes_many(name) or _takes(name, "dashboard_id"))
        ):
            return None  # a dangerous change of an environment nobody named: asked, not the default
        return self.context.env

    def _source(self, target: str | None) -> str | None:
        if self.reading.source_env:
            return self.reading.source_env
        production = {env.id for env in self.context.environments if env.production}
        if self.context.env and self.context.env != target and self.context.env not in production:
            return self.context.env
        return next(
            (env.id for env in self.context.environments if env.id not in production and env.id != target),
            None,
        )

    async def _dashboards(self, name: str, target: str | None, needed: bool) -> tuple[int, ...]:
        """Ids the words give; else titles the words spell in the environment the dashboards are
        in; else, where the request needs one or refers back, the conversation's last."""
        reading = self.reading
        ids = reading.dashboard_ids or (reading.numbers if needed else ())
        if ids:
            return ids
        env = self._source(target) if _takes(name, "source_env") else target
        matched = await self._titled(env) if env != self._env_for_data else self.boards
        if matched:
            return matched if _takes_many(name) else matched[:1]
        focus = self.context.focus  # "this dashboard", asked from the dashboard on screen
        if (
            focus is not None
            and focus.type == "dashboard"
            and focus.id
            and (needed or reading.stems & _REFERS_BACK)
        ):
            return (focus.id,)
        one = _takes_many(name) or len(self.thread.dashboards) == 1  # of several, which is asked
        if needed or reading.stems & _REFERS_BACK:
            return self.thread.dashboards if one else ()
        return ()

    def _titles_said(self) -> str | None:
        """The words of the message a dashboard's title took, as written."""
        return " ".join(self.reading.words[i].text for i in sorted(self.reading.taken)) or None

    async def _titled(self, env: str | None) -> tuple[int, ...]:
        """The dashboards whose titles the words spell, in the order the words name them; the
        words they take are no longer read as anything else."""
        titles = await self.ground.titles(env) if self.ground and env else None
        usable = [index for index, word in enumerate(self.reading.words) if len(word.text) > 1]
        found = await find(self.reading.words, usable, list((titles or {}).values()), None)
        self.reading = self.reading.titled(frozenset(i for item in found for i in item.words))
        at = {item.label: min(item.words) for item in found}
        return tuple(
            board
            for board, title in sorted((titles or {}).items(), key=lambda item: at.get(item[1], 0))
            if title in at
        )

    async def _which_dashboard(self, env: str | None) -> str:
        titles = await self.ground.titles(env) if self.ground and env else None
        listed = ", ".join(
            f"{board} — {markdown_text(title)}"
            for board, title in list((titles or {}).items())[:_TITLES_SHOWN]
        )
        return self.say(
            "Какой дашборд? Назовите его id или название" + (f"; есть: {listed}." if listed else "."),
            "Which dashboard? Give its id or title" + (f"; there are: {listed}." if listed else "."),
        )

    async def _data(self, name: str, env: str | None, slots: Slots) -> bool:
        """A database, a table and (for a statement in words) its SQL, from the outline: whether
        the words named any of it."""
        if self.ground is None or env is None or (outline := await self.ground.outline(env)) is None:
            return False
        if statement := self.reading.sql or self._carried_statement(name):
            return await self._statement_place(statement, outline, slots)
        if not _needs(name, "sql"):  # a table to look at, or to register: that one spelt, never a guess
            place = await place_named(self.reading, outline, self.ground.relate if _reads(name) else None)
            if isinstance(place, Place) and not (place.by_name or _reads(name)):
                place = None  # "add a new dataset": a value's word ("new") names no table to register
            if place is None and (database := await self._database(outline)):
                slots.args["database_id"] = database
                return True
            if isinstance(place, Place):
                table = "table" if _takes(name, "table") else "table_name"
                slots.args.update(
                    {
                        "database_id": place.database.id,
                        table: place.table.name,
                        "schema": place.table.schema_name,
                    }
                )
            elif isinstance(place, Unclear):
                slots.missing = self._several(place.tables)
            return place is not None
        earlier = self.thread.question if self.thread.last and self.thread.last.tool == name else None
        question = await data_question(self.reading, outline, self.ground.relate, earlier)
        if isinstance(question, Unclear):
            # the person's words and the names whoever made the table chose: shown as text
            words = ", ".join(f"«{markdown_text(word)}»" for word in question.words)
            columns = ", ".join(map(markdown_text, question.columns))
            table = markdown_text(question.table or "")
            slots.missing = (
                self._several(question.tables)
                if question.tables
                else self.say(
                    f"В таблице {table} не нашёл, что значит {words}; её колонки: {columns}. "
                    "Уточните условие.",
                    f"I could not tell what {words} means in table {table}; its columns: {columns}. "
                    "Which condition?",
                )
            )
        elif question is not None:
            slots.question = question
            slots.args.update(
                database_id=question.database_id, sql=question.statement(), schema=question.schema_name
            )
        elif asks_data(self.reading) and unexplained(self.reading):  # a question about data, of no table
            listed = ", ".join(
                f"{table.schema_name}.{table.name}" for db in outline.databases for table in db.tables
            )
            slots.missing = self.say(
                f"О какой таблице речь? Есть: {markdown_text(listed)}.",
                f"Which table is it about? There are: {markdown_text(listed)}.",
            )
        return question is not None

    async def _database(self, outline: EnvOutline) -> int | None:
        """The database the words name ("which tables has the warehouse?")."""
        usable = [index for index, word in enumerate(self.reading.words) if index not in self.reading.taken]
        named = await find(self.reading.words, usable, [db.name for db in outline.databases], None)
        return next((db.id for db in outline.databases if named and db.name == named[0].label), None)

    def _several(self, tables: Sequence[str]) -> str:
        listed = ", ".join(map(markdown_text, tables))
        return self.say(
            f"О какой таблице речь: {listed}?",
            f"Which table do you mean: {listed}?",
        )

    def _carried_statement(self, name: str) -> str | None:
        """The statement the person gave the last call, which the words point back at ("теперь
        выполни его"); one written from a question is changed by what they add instead."""
        last, question = self.thread.last, self.thread.question
        if last is None or not _needs(name, "sql") or not self._follows(name):
            return None
        given = last.args.get("sql")
        written = question is not None and given == question.statement()
        return given if isinstance(given, str) and not written else None

    async def _statement_place(self, statement: str, outline: EnvOutline, slots: Slots) -> bool:
        """The database the words name ("in the warehouse database"), else the one a statement's
        tables are in, when exactly one has them all; of one that names no table ("SELECT 1"), the
        environment's first."""
        if database := await self._database(outline):
            slots.args.setdefault("database_id", database)
            return True
        try:
            tree = sqlglot.parse_one(statement)
        except SqlglotError:
            return False
        own = {cte.alias_or_name.lower() for cte in tree.find_all(exp.CTE)}  # WITH c AS (…): no table
        named = {table.name.lower() for table in tree.find_all(exp.Table)} - own
        if not named and outline.databases:
            slots.args.setdefault("database_id", min(db.id for db in outline.databases))
            return True
        holding = [
            db for db in outline.databases if named and named <= {table.name.lower() for table in db.tables}
        ]
        if len(holding) == 1:
            slots.args.setdefault("database_id", holding[0].id)
        elif holding:
            listed = ", ".join(f"{db.id} — {markdown_text(db.name)}" for db in holding)
            slots.missing = self.say(
                f"В какой базе выполнить запрос? Таблицы есть в: {listed}.",
                f"Which database should it run in? The tables are in: {listed}.",
            )
        return bool(holding)


_MISSING = {
    "env_id": ("В каком окружении?", "In which environment?"),
    "task_id": ("Какая задача? Пришлите её полный id.", "Which task? Please send its full id."),
    "sql": (
        "Какой запрос выполнить? Пришлите SQL или спросите о таблице.",
        "Which query? Send the SQL or ask about a table.",
    ),
    "database_id": ("В какой базе данных?", "In which database?"),
    "reason": (
        "По какой причине? Она будет показана пользователям.",
        "For what reason? It is shown to the users.",
    ),
    "message": ("С каким сообщением коммита?", "With which commit message?"),
    "branch": ("В какую ветку?", "On which branch?"),
    "name": ("Как назвать ветку?", "What should the branch be called?"),
    "title": ("Какое название дать?", "What title should it have?"),
    "table_name": ("Из какой таблицы?", "From which table?"),
    "dashboard_id": ("Какой дашборд или датасет?", "Which dashboard or dataset?"),
    "source_env": ("Из какого окружения?", "From which environment?"),
}


def _patterns(constraints: Sequence[Any]) -> list[str]:
    """The patterns an argument's constraints hold (a branch's)."""
    return [item.pattern for item in constraints if isinstance(getattr(item, "pattern", None), str)]


def _fits(text: str, patterns: Sequence[str]) -> bool:
    return all(re.fullmatch(pattern, text) for pattern in patterns)


def _fitted(text: str | None, constraints: Sequence[Any]) -> str | None:
    """The text, or its first word where the argument's pattern takes no spaces (a branch)."""
    patterns = _patterns(constraints)
    if text is None or _fits(text, patterns):
        return text
    first = text.split()[0].strip("«»\"'“”`,.")
    return first if _fits(first, patterns) else None


# "a to b", "a → b", "a=b", "a на b": one name mapped to another
_PAIR = re.compile(r"([\w.-]+)\s*(?:->|→|=>|=|\bto\b|\bonto\b|\binto\b|\bна\b|\bв\b)\s*([\w.-]+)", re.I)


def _mapping(reading: Reading, markers: Sequence[str]) -> dict[str, str] | None:
    """The pairs the clauses of a mapping's marker give, the marker either side ("map a to b",
    "базу a замапь на b")."""
    marking = {stem for marker in markers for stem in phrase_stems(marker)}
    clauses = {word.clause for word in reading.words if word.stem in marking}
    pairs: dict[str, str] = {}
    for clause in sorted(clauses):
        said = [word for word in reading.words if word.clause == clause]
        text = reading.text[said[0].start : said[-1].end]
        for word in said:  # the marker's words out, so that "замапь на b" pairs no verb
            if word.stem in marking:
                start, end = word.start - said[0].start, word.end - said[0].start
                text = text[:start] + " " * (end - start) + text[end:]
        pairs |= {
            source: target
            for source, target in _PAIR.findall(text)
            if not {source.lower(), target.lower()} & reading.envs  # "from dev to prod" maps no database
        }
    return pairs or None


def _before_noun(reading: Reading) -> str | None:
    """The words right before a dashboard's noun that no declaration explains: what is looked
    for ("the sales dashboards", "legacy dashbaords")."""
    spare = {id(word) for word in unexplained(reading)}
    for index, word in enumerate(reading.words):
        if any(word.stem == noun or similar(word.stem, noun) for noun in DASHBOARD_NOUNS):
            said: list[str] = []
            for before in reversed(reading.words[:index]):
                if id(before) not in spare or before.clause != word.clause:
                    break
                said.insert(0, before.text)
            if said:
                return " ".join(said)
    return None


def _named_like(reading: Reading, constraints: Sequence[Any]) -> list[str]:
    """For an argument of a pattern (a branch): the one word of the message that is a name of
    parts ("feature/q3-sales"), not a word of the language."""
    patterns = _patterns(constraints)
    found = [
        word
        for word in re.findall(r"[\w./-]+", reading.text)
        if patterns and re.search(r"\w[/._-]\w", word) and _fits(word, patterns)
    ]
    return found[:1] if len(found) == 1 else []


def _object_spelt(reading: Reading, name: str) -> bool:
    """Whether the words give a name of the very pattern the tool's object takes, beside its noun
    ("ветку feature/x", its verb misspelt past reading): what a change named by its noun acts on."""
    return name in reading.named and any(
        info.is_required() and _named_like(reading, info.metadata)
        for info in ARGS[name].model_fields.values()
    )


def _needs(name: str, field_name: str) -> bool:
    found = ARGS[name].model_fields.get(field_name)
    return found is not None and found.is_required()


def _takes(name: str, field_name: str) -> bool:
    return field_name in ARGS[name].model_fields


def _reads(name: str) -> bool:
    return tool(name).policy.tier is Tier.READ


def _needs_dashboards(name: str) -> bool:
    return _needs(name, "dashboard_id") or _needs(name, "dashboard_ids")


def _takes_dashboards(name: str) -> bool:
    return _takes(name, "dashboard_id") or _takes_many(name)


def _takes_many(name: str) -> bool:
    return _takes(name, "dashboard_ids")
