"""What a run of the graph is told beside its input (:class:`RunContext`, LangGraph's
``context_schema``: never kept in a checkpoint), and of it what the model is told about the turn
beside the person's words (:class:`TurnContext`): the configured environments, the one the turn
works in (and why that one), the page's language, and the object the page shows.

It reaches the model as one system message placed before the thread for this call only (never
kept in it): prose for a language model, and the same facts as data for the offline planner. The
system message names only validated values (environment ids, the object's type and id); the
page's object name, set by whoever edits Superset, reaches the model as fenced data beside the
person's message (:meth:`TurnContext.page_data`), never in the system role.
"""

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

from langchain_core.messages import BaseMessage, SystemMessage

from sstools.agent.fence import PAGE, fenced
from sstools.agent.language import DEFAULT_LANG, Lang, as_lang
from sstools.common.catalogue import Role
from sstools.common.policy import normalise_env

_DATA_KEY = "sstools_context"
EnvSource = Literal["message", "page", "last", "default", "none"]


@dataclass(frozen=True)
class Environment:
    id: str
    name: str
    production: bool


@dataclass(frozen=True)
class Focus:
    """The object the page shows: ui_context's objectType, objectId and objectName."""

    type: str
    id: int | None = None
    name: str | None = None


@dataclass(frozen=True)
class TurnContext:
    environments: tuple[Environment, ...] = ()
    env: str | None = None
    env_source: EnvSource = "none"
    lang: Lang = DEFAULT_LANG  # the turn's: its message's, else (SQL alone, a resume) the page's
    focus: Focus | None = None

    def message(self) -> SystemMessage:
        return SystemMessage(self.prose(), additional_kwargs={_DATA_KEY: asdict(self)})

    def prose(self) -> str:
        listed = ", ".join(
            f"{env.id}{' (production)' if env.production else ''}" for env in self.environments
        )
        lines = [f"Configured environments: {listed or 'none'}."]
        if self.env:
            why = {
                "message": "the person's request",
                "page": "the environment selected on the page",
                "last": "the environment the person used last",
                "default": "the default (the first non-production environment)",
                "none": "",
            }[self.env_source]
            lines.append(
                f"Unless the person names another, work in {self.env} ({why}); tool arguments must "
                "still name the environment."
            )
        if self.focus is not None and self.focus.type == "sqllab":
            lines.append(
                "The person is in SQL Lab: a query they ask for runs there unless they name another."
            )
        elif self.focus is not None:
            shown = f"{self.focus.type}"
            if self.focus.id is not None:
                shown += f" id {self.focus.id}"
            if self.focus.name:
                shown += " (its title is in the page context block)"
            lines.append(f'The page shows {shown}: "this {self.focus.type}" means it.')
        # named outright: a small model told "the language of the message" answered Russian
        # questions in English, the language of the tools' results
        language = "Russian" if self.lang == "ru" else "English"
        lines.append(
            f"Answer in {language}, the language of this turn, whatever language tool results, "
            "names or these instructions are in. State the outcome first; show lists as Markdown tables."
        )
        return " ".join(lines)

    def page_data(self) -> str | None:
        """The page's object name as fenced data, for the model's view beside the person's
        message; None when the page names nothing."""
        if self.focus is None or not self.focus.name:
            return None
        named = {"type": self.focus.type, "id": self.focus.id, "title": self.focus.name}
        return fenced(PAGE, json.dumps(named, ensure_ascii=False))


@dataclass(frozen=True)
class RunContext:
    """One run of the graph — a send, or a card's answer resumed — as the chat starts it: who
    asks (their token goes to ops with every call), in which language and environment, with the
    role ops gave them and the tools the turn was routed to."""

    user_token: str
    username: str
    lang: Lang
    tool_names: tuple[str, ...]  # the routed tools: the only ones bound to the model (FR-004)
    env_id: str | None = None  # the turn's: the submitted one, or the card's on a resume
    ui_env_id: str | None = None  # the page's, for a call that names none and a turn that did not
    user_role: Role | None = None  # as ops said it; None: unknown (ops still decides every call)
    turn: TurnContext | None = None  # what the model is told of the turn (a send's)
    prefetched: str | None = None  # the dashboards fetched ahead for a list request (fenced)


def run_context(given: object) -> RunContext:
    """The run's context as LangGraph hands it to a node, the gate or a tool; a run started
    without one has no one to act for, and nothing of it runs."""
    if not isinstance(given, RunContext):
        raise TypeError(f"the graph was run without a RunContext (got {type(given).__name__})")
    return given


def environments_of(
    configured: Mapping[str, bool], names: Mapping[str, str] | None = None
) -> tuple[Environment, ...]:
    return tuple(
        Environment(env, (names or {}).get(env, env), production) for env, production in configured.items()
    )


def default_env(environments: Sequence[Environment], last: str | None) -> tuple[str | None, EnvSource]:
    """The environment a turn that names none works in: the user's last one while it is still
    configured, else the first non-production one."""
    known = {env.id for env in environments}
    if last and last in known:
        return last, "last"
    first = next((env.id for env in environments if not env.production), None)
    return (first, "default") if first else (None, "none")


def context_in(messages: Sequence[BaseMessage]) -> TurnContext | None:
    """The turn's context, if the model was given one."""
    for message in messages:
        if isinstance(message, SystemMessage) and isinstance(
            data := message.additional_kwargs.get(_DATA_KEY), dict
        ):
            return _from_dict(data)
    return None


def _from_dict(data: dict[str, Any]) -> TurnContext:
    focus = data.get("focus")
    return TurnContext(
        environments=tuple(Environment(**env) for env in data.get("environments", ())),
        env=data.get("env"),
        env_source=data.get("env_source", "none"),
        lang=as_lang(data.get("lang")) or DEFAULT_LANG,
        focus=Focus(**focus) if isinstance(focus, dict) else None,
    )


# Words that name an environment's kind; an environment id is always its own name too.
KIND_WORDS = {
    "prod": (
        "prod",
        "production",
        "prd",
        "прод",
        "прода",
        "проде",
        "проду",
        "продом",
        "продакшн",
        "продакшен",
        "продакшене",
        "продакшне",
        "продакшена",
        "продакшна",
        "боевой",
        "боевом",
        "боевого",
        "продуктив",
        "продуктиве",
    ),
    "dev": (
        "dev",
        "develop",
        "development",
        "дев",
        "деве",
        "дева",
        "деву",
        "девом",
        "девелоп",
        "разработка",
        "разработки",
        "разработке",
    ),
    "staging": ("staging", "stage", "stg", "стейдж", "стейдже", "стейджа", "стейджинг", "стейджинге"),
}
_WORD = re.compile(r"[\w'-]+")


def env_aliases(environments: Sequence[Environment]) -> dict[str, str]:
    """Each word that names exactly one configured environment, and that environment."""
    aliases: dict[str, str] = {}
    by_kind: dict[str, list[str]] = {}
    for env in environments:
        kind = "prod" if env.production else normalise_env(env.id)
        if kind == "staging" and "stag" not in env.id and "stg" not in env.id:
            kind = None  # "test" names a test environment only by its own id
        if kind:
            by_kind.setdefault(kind, []).append(env.id)
    for kind, ids in by_kind.items():
        if len(ids) == 1:
            aliases.update({word: ids[0] for word in KIND_WORDS[kind]})
    for env in environments:
        aliases[env.id] = env.id
        aliases[env.name.lower()] = env.id
    return aliases


def named_envs(text: str, environments: Sequence[Environment]) -> frozenset[str]:
    """The configured environments the words of ``text`` name (by id, name or kind)."""
    aliases = env_aliases(environments)
    return frozenset(aliases[word] for word in map(str.lower, _WORD.findall(text)) if word in aliases)
