"""What a message says, read once with the language layer: the tools its words name (affirmed or
refused), the environments, ids, quotes and statement it holds, and the free texts and flags the
tools' frames mark. Nothing here knows a tool by name: each frame is the catalogue's."""

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from sstools.agent.context import KIND_WORDS, Environment, env_aliases
from sstools.agent.planner.grounded import similar
from sstools.agent.sqltext import split_sql
from sstools.common.catalogue import TOOLS
from sstools.common.language import (
    FUNCTION_STEMS,
    Word,
    asks,
    describes,
    is_negation,
    negated,
    phrase_stems,
    qualifies,
    quoted,
    vocabulary,
    words,
)

_QUOTES = re.compile(r"(?<!\w)[«\"“”'`][^«»\"“”'`\n]{1,200}[»\"“”'`](?!\w)")
_UUID = re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b", re.I)
_NUMBER = re.compile(r"(?<![\w.#/-])#?(\d{1,9})(?![\w.%/-])")
_FROM = frozenset({"from", "из", "с", "со", "off"})
_TO = frozenset({"to", "into", "onto", "в", "во", "на", "in", "on", "at", "для", "for"})
_TO_ENV = frozenset({"on", "in", "to", "на", "в", "во", "for", "для"})  # before an environment
_EXCEPT = frozenset({"except", "кроме", "без", "not", "не", "трогай", "touch"})
# The nouns an id or a title stands beside: "дашборд 5", "the Sales board".
DASHBOARD_NOUNS = frozenset(phrase_stems("дашборд дэшборд даш дашик борд dashboard board панель"))
# The nouns of what tools act on: a tool they alone name follows one named by what is asked.
OBJECT_NOUNS = DASHBOARD_NOUNS | frozenset(
    phrase_stems(
        "table tables таблица таблицы база базе database db бд schema схема column колонки maintenance"
        " window windows обслуживание обслуживания техработы окно окна environment environments окружение"
        " окружения среда стенд branch ветка ветку ветке бранч техобслуживание мейнтенанс downtime даунтайм"
    )
)
_JOINS = frozenset({"and", "и", "or", "или", "&"})
# A bare number that counts or dates something is no object's id.
_COUNTING = frozenset(
    phrase_stems("top топ first last первые последние rows строк строки записей records limit лимит")
)
_PHRASE_REACH = 5  # words a phrase's next word may stand after its last, function words included
_READS = frozenset(spec.name for spec in TOOLS if not spec.may_change)
# Each tool's own words; a word that alone names another tool splits a phrase it stands in.
_OWN_STEMS = {
    spec.name: frozenset(stem for phrase in spec.keywords for stem in phrase_stems(phrase)) for spec in TOOLS
}
# Every stem of a tool's phrases: a word that is one is read as declared, never as another's typo.
_KEYWORD_STEMS = frozenset().union(*_OWN_STEMS.values())
# The language layer's own words (negations, filler, states): read as themselves, never as typos.
_LANGUAGE = vocabulary()
_NAMING_STEMS = (
    frozenset(
        stems[0] for spec in TOOLS for phrase in spec.keywords if len(stems := phrase_stems(phrase)) == 1
    )
    - FUNCTION_STEMS
)
# Each tool's keyword phrases, a (stem, as written) pair per word: a phrase the message spells with a
# typo or two — its words in order in one clause, each by its stem, a word ``similar`` to it
# ("deplpy", "maintenace") or one that starts with it ("деплойни") — names the tool, guessed.
_SPELLINGS = sorted(
    {
        (spec.name, tuple((word.stem, word.text.lower()) for word in words(phrase)))
        for spec in TOOLS
        for phrase in spec.keywords
    }
)


def _spells(word: Word, wanted: tuple[str, str]) -> bool:
    stem, written = wanted
    text = word.text.lower()
    if word.stem == stem or (word.stem in DASHBOARD_NOUNS and stem in DASHBOARD_NOUNS):
        return True  # a dashboard by its noun in either language ("создай dashboard")
    if word.stem in _KEYWORD_STEMS or word.stem in _LANGUAGE:  # "skipping" is no "ship"
        return False
    started = len(written) >= 5 and text.startswith(written)
    return similar(word.stem, stem) or similar(text, written) or started


@dataclass
class _Named:
    """Where the words name one tool: first where, which words, whether as declared."""

    at: int
    words: set[int]
    exact: bool = False
    acts: bool = False  # by more than the noun of its object ("dashboards" names only a search)


def _window(message: Sequence[Word], said: Sequence[int], last: int) -> list[int]:
    """Where a phrase's next word may stand after its word at ``last``: in its clause, with at
    most one word between that is not a function word ("what of all this can you do")."""
    window: list[int] = []
    between = 0
    for index in said:
        if index <= last:
            continue
        if message[index].clause != message[last].clause or between > 1 or index > last + _PHRASE_REACH:
            break
        window.append(index)
        between += message[index].stem not in FUNCTION_STEMS
    return window


def _named(message: Sequence[Word], said: Sequence[int]) -> tuple[dict[str, _Named], dict[str, set[int]]]:
    """The tools whose phrases the words spell, affirmed, as declared or with typos; and those
    refused ("don't deploy"), never by the noun of their object alone ("don't start maintenance,
    which windows are set?" refuses no list of windows)."""
    named: dict[str, _Named] = {}
    refused: dict[str, set[int]] = {}  # tool → the words that name it, refused
    for name, phrase in _SPELLINGS:
        acts = len(phrase) > 1 or phrase[0][0] not in OBJECT_NOUNS
        for start in said:
            if not _spells(message[start], phrase[0]):
                continue
            used = [start]
            for wanted in phrase[1:]:
                # one word may stand between (function words aside), not another tool's
                window = _window(message, said, used[-1])
                found = next((i for i in window if _spells(message[i], wanted)), None)
                between = [message[i].stem for i in window if i < found] if found is not None else []
                if found is None or any(stem in _NAMING_STEMS - _OWN_STEMS[name] for stem in between):
                    break
                used.append(found)
            if len(used) < len(phrase):
                continue
            # a read negated in a question is asked about ("ничего не отвалилось?"); a change never
            if negated(message, start, used[-1]) and not (message[used[-1]].asked and name in _READS):
                if acts:
                    refused.setdefault(name, set()).update(used)
                continue
            entry = named.setdefault(name, _Named(start, set()))
            entry.at = min(entry.at, start)
            entry.words.update(used)
            entry.exact |= all(message[i].stem == stem for i, (stem, _) in zip(used, phrase, strict=True))
            entry.acts |= acts and not describes(message[start])
    return {name: entry for name, entry in named.items() if name not in refused}, refused


@dataclass(frozen=True)
class Reading:
    text: str  # the message's words (its statement taken out)
    words: tuple[Word, ...]
    sql: str | None
    quoted: tuple[str, ...]
    task_id: str | None
    dashboard_ids: tuple[int, ...]  # beside a dashboard's noun
    numbers: tuple[int, ...]  # every other bare number
    target_env: str | None
    source_env: str | None
    unknown_env: str | None  # a kind of environment none of the configured ones is
    acts: frozenset[str]  # those named by more than the noun of their object
    guessed: frozenset[str]  # those named only by a word one typo from theirs
    named_at: Mapping[str, int]  # where the words name each
    named_by: Mapping[str, frozenset[int]]  # tool → the words that name it, affirmed; most first
    refused_by: Mapping[str, frozenset[int]]  # tool → the words that name it to refuse it
    asks: bool  # a question ("?", "ли")
    envs: frozenset[str]  # the words that name an environment
    taken: frozenset[int] = frozenset()  # words a dashboard's title took: no data, no tool

    def titled(self, taken: frozenset[int]) -> "Reading":
        """This reading once a dashboard's title took ``taken``: a tool only they named ("Queue
        Health") is not named."""
        gone = {name for name, by in self.named_by.items() if by <= taken}
        named_by = {name: by for name, by in self.named_by.items() if name not in gone}
        refused_by = {name: by for name, by in self.refused_by.items() if not by <= taken}
        return replace(
            self,
            taken=taken,
            named_by=named_by,
            refused_by=refused_by,
            acts=self.acts - gone,
            guessed=self.guessed - gone,
        )

    @property
    def refused(self) -> frozenset[str]:
        """The tools named only to be refused ("don't deploy")."""
        return frozenset(self.refused_by)

    def of_last(self, last: str, pointing: frozenset[str]) -> "Reading":
        """This reading where words point back (``pointing``: "end it", "сними его") at the last
        call's tool: a tool whose phrase is an action said here and the last tool's object ("end
        maintenance" after a start of maintenance) is named by the action's word."""
        if not self.stems & pointing:
            return self
        objects = _OWN_STEMS[last] & OBJECT_NOUNS
        named_by, acts = dict(self.named_by), set(self.acts)
        for name, phrase in _SPELLINGS:
            rest = {stem for stem, _ in phrase[1:]}
            if name == last or name in named_by or len(phrase) < 2 or not rest <= objects:
                continue
            at = next(
                (
                    index
                    for index, word in enumerate(self.words)
                    if word.stem == phrase[0][0] and not negated(self.words, index)
                ),
                None,
            )
            if at is not None:
                named_by[name], acts = frozenset({at}), acts | {name}
        return replace(
            self,
            named_by=named_by,
            acts=frozenset(acts),
            named_at={**{name: min(by) for name, by in named_by.items()}, **self.named_at},
        )

    @property
    def named(self) -> Mapping[str, int]:
        """The tools the words name, affirmed, and how many words name each: most first."""
        return {name: len(by) for name, by in self.named_by.items()}

    @property
    def qualifying(self) -> frozenset[str]:
        """The tools named by what an object another one names is said to have ("dashboards with
        errors": their health, not their list)."""
        nouns = [i for by in self.named_by.values() for i in by if self.words[i].stem in OBJECT_NOUNS]
        return frozenset(
            name
            for name, by in self.named_by.items()
            if any(qualifies(self.words, min(by), noun) for noun in nouns if noun not in by)
        )

    @property
    def many(self) -> bool:
        """Whether it names several dashboards: by their ids, or by a plural noun."""
        plural = ("s", "ы", "ов", "ам", "ами", "ах")
        return len(self.dashboard_ids) > 1 or any(
            word.stem in DASHBOARD_NOUNS and word.text.lower().endswith(plural) for word in self.words
        )

    @property
    def doubts(self) -> bool:
        """Whether any word is a negation, whatever it negates ("нет, ничего не надо")."""
        return any(map(is_negation, self.words))

    @property
    def stems(self) -> frozenset[str]:
        return frozenset(word.stem for word in self.words)

    def affirmed(self, index: int) -> bool:
        return not negated(self.words, index)

    def after(self, markers: Sequence[str], others: Sequence[str] = ()) -> str | None:
        """The text a marker phrase leads to: the quote right after it, else its clause's words
        up to the next punctuation, another argument's marker (``others``) or an environment
        the words name ("reason: nightly upgrade", "с тегом finance", "branch named x/y", "tagged
        ops on dev")."""
        stems = [word.stem for word in self.words]
        for marker in sorted(markers, key=len, reverse=True):
            at = _at(stems, phrase_stems(marker))
            if at is None:
                continue
            end = at + len(phrase_stems(marker))
            while (chained := _leading(stems[end:], markers)) is not None:  # "branch named x"
                end += chained
            rest = self.text[self.words[end - 1].end :]
            quote = next((item for item in self.quoted if rest.lstrip(" :—-«\"'“`").startswith(item)), None)
            if quote:
                return quote
            found = re.match(r"[\s:—-]*((?:[^,.;!?\n]|\.(?=\w))+)", rest)
            if not found:
                continue
            start = self.words[end - 1].end + found.start(1)
            stop = next(
                (
                    self.words[index].start
                    for index in range(end, len(self.words))
                    if self.words[index].start > start
                    and (
                        _leading(stems[index:], others) is not None
                        or (
                            stems[index] in _TO_ENV
                            and index + 1 < len(self.words)
                            and self.words[index + 1].text.lower() in self.envs
                        )
                    )
                ),
                start + len(found[1]),
            )
            text = self.text[start : min(stop, start + len(found[1]))].strip()
            said = words(text)
            if said and said[-1].stem in FUNCTION_STEMS:  # "called X with slug y": X
                while said and said[-1].stem in FUNCTION_STEMS:
                    said.pop()
                text = text[: said[-1].end] if said else ""
            if said:  # not "branch with …"
                return text
        return None

    def untold(self) -> list[str]:
        """The clauses that ask for nothing — no tool's action, no environment, no number —: why
        something is asked, when the message says so in a clause of its own ("закрой стенд на
        обслуживание, меняем диски", "we're moving the database")."""
        clauses: dict[int, list[int]] = {}
        for index, word in enumerate(self.words):
            clauses.setdefault(word.clause, []).append(index)
        return [
            self.text[self.words[clause[0]].start : self.words[clause[-1]].end]
            for clause in clauses.values()
            if len(clause) > 1
            and not any(entry.acts for entry in _named(self.words, clause)[0].values())
            and not any(
                word.text.isdigit() or word.text.lower() in self.envs
                for word in map(self.words.__getitem__, clause)
            )
        ]

    def flag(self, markers: Sequence[str]) -> bool:
        stems = [word.stem for word in self.words]
        return any(_at(stems, phrase_stems(marker)) is not None for marker in markers)


def _leading(stems: Sequence[str], markers: Sequence[str]) -> int | None:
    """How many words one of the markers takes at the start of ``stems``, if one stands there."""
    for marker in markers:
        wanted = phrase_stems(marker)
        if wanted and tuple(stems[: len(wanted)]) == wanted:
            return len(wanted)
    return None


def _at(stems: Sequence[str], phrase: tuple[str, ...]) -> int | None:
    for index in range(len(stems) - len(phrase) + 1):
        if tuple(stems[index : index + len(phrase)]) == phrase:
            return index
    return None


def _envs(message: Sequence[Word], aliases: Mapping[str, str]) -> tuple[str | None, str | None, str | None]:
    """(target, source, unknown kind) the words name: "from dev to prod", "из дев в прод",
    "на проде"; never one refused ("не трогай прод", "except prod")."""
    mentions: list[tuple[str, str | None]] = []
    unknown = None
    known_kinds = {word for kind in KIND_WORDS.values() for word in kind}
    for index, word in enumerate(message):
        lowered = word.text.lower().removesuffix("'s")
        env = aliases.get(lowered) or aliases.get(lowered.split("-")[0])
        if env is None:
            if lowered in known_kinds and unknown is None and lowered not in ("stage", "develop"):
                unknown = word.text
            continue
        before = {item.text.lower() for item in message[max(0, index - 2) : index]}
        if before & _EXCEPT:
            continue
        hint = message[index - 1].text.lower() if index else ""
        mentions.append((env, "from" if hint in _FROM else "to" if hint in _TO else None))
    if not mentions:
        return None, None, unknown
    source = next((env for env, hint in mentions if hint == "from"), None)
    targets = [env for env, hint in mentions if hint != "from" and env != source]
    if source is None and len({env for env, _ in mentions}) > 1 and mentions[0][1] is None:
        source, targets = mentions[0][0], [env for env, _ in mentions[1:] if env != mentions[0][0]]
    return (targets[-1] if targets else None), source, None


def _ids(text: str, message: Sequence[Word]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(ids beside a dashboard's noun — "dashboards 1 and 2", "дашборд #5" —, other bare numbers
    that count nothing)."""
    beside: list[int] = []
    bare: list[int] = []
    for found in _NUMBER.finditer(text):
        before = [word for word in message if word.end <= found.start()][-4:]
        chain = [word.stem for word in reversed(before)]
        # back over "1, 2 и" to the noun
        while chain and (chain[0] in _JOINS or chain[0].isdigit()):
            chain.pop(0)
        if chain and (chain[0] in DASHBOARD_NOUNS or chain[0] in ("id", "№")):
            beside.append(int(found[1]))
        elif not (before and before[-1].stem in _COUNTING) and not 1900 <= int(found[1]) <= 2100:
            bare.append(int(found[1]))
    return tuple(dict.fromkeys(beside)), tuple(dict.fromkeys(bare))


def read(text: str, environments: Sequence[Environment]) -> Reading:
    plain, sql = split_sql(text.replace("ё", "е").replace("Ё", "Е"))
    aliases = env_aliases(environments)
    if sql is not None:  # what trails the statement ("— run it on dev", "… on prod please") is words
        names = "|".join(re.escape(name) for name in sorted(aliases, key=len, reverse=True))
        tail = re.search(
            r"(?:\s*[—–]\s+.*|\s*,\s+[^\s,]*[а-яё].*|\s+(?:please|pls|пожалуйста|плиз)\W*"
            + (rf"|\s+(?:on|in|at|на|в|во)\s+(?:{names})\b.*" if names else "")
            + r")$",
            sql,
            re.I | re.S,
        )
        if tail:
            plain, sql = f"{plain} {tail[0]}", sql[: tail.start()].strip().rstrip(";").strip()
    message = tuple(words(plain))
    # a quoted name asks for nothing ("create the branch 'release-7'")
    unquoted = _QUOTES.sub(lambda found: " " * len(found[0]), plain)
    said = [index for index, word in enumerate(message) if unquoted[word.start : word.end].strip()]
    naming, refused = _named(message, said)
    # most words named first; a tool named only by the noun of its object follows one named by
    # what is asked of it
    named = sorted(
        naming.items(),
        key=lambda item: (-len(item[1].words), not item[1].acts, item[1].at),
    )
    task = _UUID.search(plain)
    beside, bare = _ids(_UUID.sub(" ", plain), message)
    target, source, unknown = _envs(message, aliases)
    return Reading(
        text=plain,
        words=message,
        sql=sql or None,
        quoted=tuple(quoted(plain)),
        task_id=task[0].lower() if task else None,
        dashboard_ids=beside,
        numbers=bare,
        target_env=target,
        source_env=source,
        unknown_env=unknown,
        acts=frozenset(name for name, entry in named if entry.acts),
        guessed=frozenset(name for name, entry in named if not entry.exact),
        named_at={name: entry.at for name, entry in named},
        named_by={name: frozenset(entry.words) for name, entry in named},
        refused_by={name: frozenset(by) for name, by in refused.items()},
        asks=asks(plain),
        envs=frozenset(aliases),
    )


def content(reading: Reading, taken: frozenset[str] = frozenset()) -> list[Word]:
    """The words that may name something of the data: not a tool's word, a number or filler."""
    return [
        word
        for index, word in enumerate(reading.words)
        if word.stem not in taken
        and index not in reading.taken
        and not word.text.isdigit()
        and len(word.text) > 1
        and word.stem not in FUNCTION_STEMS
    ]


def unexplained(reading: Reading) -> list[Word]:
    """The words no tool's declaration, no environment and no function of language accounts
    for: what may name something of the data."""
    return [
        word
        for word in content(reading)
        if word.stem not in _KEYWORD_STEMS and word.text.lower() not in reading.envs
    ]
