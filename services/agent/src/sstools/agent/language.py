"""Which language a person wrote in, so the answer comes back in it: Russian or English, and the
page's language when the words alone do not say (only SQL, an id, a name).

Names, SQL, quoted titles, tables, code and addresses are not words of the text: "задеплой
<дашборд> на prod" is Russian, "deploy дашборд 3 to prod" English.
"""

import re
from typing import Literal, get_args

from sstools.agent.sqltext import split_sql

Lang = Literal["ru", "en"]
LANGS: tuple[Lang, ...] = get_args(Lang)
DEFAULT_LANG: Lang = "ru"

# Data, not words: Markdown table rows, code blocks and addresses. Every pattern here that can
# start anywhere starts only where its run starts: a long run would otherwise be read once from
# each of its characters.
_DATA = re.compile(r"^\s*\|.*$|```.*?```|`[^`]*`|(?<!\S)\S+://\S+", re.M | re.S)
# Names made of words: a branch "fix/legacy-kpis", a slug "sales-overview", a table "user_id".
_NAMES = re.compile(r"(?<![A-Za-z0-9.])[A-Za-z0-9.]*[/_-][A-Za-z0-9./_-]*")
_QUOTED = re.compile(r"[«\"“'`][^«»\"“”'`]*[»\"”'`]")
_CYRILLIC_WORD = re.compile(r"\b[а-яё]+\b", re.I)  # "а shipped?": one letter is Russian too
# A title written in Cyrillic inside an English sentence ("show the Отчёт по продажам board"):
# a capitalised word past a sentence's start and the Cyrillic words that run on from it.
_CYRILLIC_TITLE = re.compile(r"(?<![.!?:][ \t])(?<=[ \t])[А-ЯЁ][а-яё]*(?:[ \t]+[а-яё]+)*")
_FIRST_LATIN_VERB = re.compile(r"\s*[A-Z][a-z]{1,}\b(?!\s+[A-Z])")
_LATIN_WORD = re.compile(r"\b[a-z]{2,}\b")  # lower-case only: a capitalised word is likely a name
# Words an English speaker and a Russian speaker type alike: they tell nothing. Russian speakers
# name the objects of their trade in English inside Russian sentences.
_SHARED = frozenset(
    {"dev", "prod", "staging", "sql", "id", "ok", "llm", "url", "json", "csv", "pdf", "xlsx"}
    | {"dashboard", "dataset", "database", "table", "chart", "query", "schema", "title", "copy", "slug"}
    | {"tag", "dashboards", "datasets", "databases", "tables", "charts"}
    | {"select", "count", "group", "where", "limit", "join", "sum", "avg", "distinct"}
)

# Russian speakers write their trade's English nouns and SQL words in Russian sentences;
# English speakers write Russian only in names: a Russian word counts for two English ones.
_RUSSIAN_WEIGHT = 2


def say(lang: Lang, ru: str, en: str) -> str:
    return ru if lang == "ru" else en


def as_lang(value: object) -> Lang | None:
    return value if value in LANGS else None


def language_of(text: str, fallback: Lang) -> Lang:
    """The question's language; ``fallback`` (the page's) when it has no words of either."""
    words = _NAMES.sub(" ", _QUOTED.sub(" ", split_sql(_DATA.sub(" ", text))[0])).strip()
    russian = len(_CYRILLIC_WORD.findall(_CYRILLIC_TITLE.sub(" ", words)))
    english = sum(1 for word in _LATIN_WORD.findall(words) if word not in _SHARED)
    english += bool(_FIRST_LATIN_VERB.match(words))  # "Run SELECT …": its capital is the sentence's
    if russian == english == 0:
        return fallback
    return "ru" if _RUSSIAN_WEIGHT * russian > english else "en"
