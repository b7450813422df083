"""Keyword tier: the catalogue's RU+EN phrases matched on word stems, with negation honoured.

A phrase matches when its stems appear in order inside one clause with at most one other word
between neighbours ("права на доступ" still finds "права доступа"). A one-word phrase whose
stem has four letters or more also matches a word one typo away ("bakcup", "задчи"). A match is negated when
a negation ("не", "без", "don't", "no need to") stands before it in the same clause with at
most one other word between, not counting filler ("не надо делать бэкап", "не создавай
датасет"); a state verb stops it ("почему не работает дашборд" negates nothing). A tool the
user negated anywhere is not offered, whatever else matched it. Every tool is looked at; nothing
returns early.
"""

from collections.abc import Iterable
from dataclasses import dataclass, field

from sstools.common.catalogue import TOOLS, ToolSpec
from sstools.common.routing.text import Word, phrase_stems, stem, words

_MAX_GAP = 1
_MIN_FUZZY_LENGTH = 4


def _stems(*texts: str) -> frozenset[str]:
    return frozenset(stem(text) for text in texts)


NEGATIONS = _stems(
    "не",
    "нет",
    "без",
    "никаких",
    "вместо",
    "not",
    "no",
    "never",
    "without",
    "instead",
    "dont",
    "skip",
    "rather",
)
# Words that may stand between a negation and what it negates without counting.
_NEGATION_FILLER = _stems(
    "надо",
    "нужно",
    "стоит",
    "следует",
    "пока",
    "сейчас",
    "еще",
    "пожалуйста",
    "сегодня",
    "никакой",
    "никакого",
    "ничего",
    "этот",
    "это",
    "do",
    "need",
    "to",
    "a",
    "an",
    "the",
    "any",
    "please",
    "yet",
    "now",
    "of",
    "bother",
    "want",
    "should",
    "us",
    "me",
    "it",
    "go",
    "ahead",
    "and",
    "than",
    "new",
    "another",
    "again",
    "новый",
    "новую",
    "новое",
    "снова",
    "опять",
)
# "не работает", "doesn't load": the negation is about a state, not a request.
_STATE_WORDS = _stems(
    "работает",
    "работают",
    "грузится",
    "открывается",
    "отвечает",
    "видно",
    "вижу",
    "получается",
    "work",
    "works",
    "working",
    "load",
    "loading",
    "open",
    "respond",
    "show",
    "showing",
)


@dataclass(frozen=True)
class KeywordMatch:
    tool: str
    hits: int
    first_position: int


@dataclass
class KeywordResult:
    matches: list[KeywordMatch] = field(default_factory=list)
    # Tools the user said not to use: offered by no tier.
    negated: set[str] = field(default_factory=set)

    @property
    def tools(self) -> list[str]:
        return [match.tool for match in self.matches]


class KeywordIndex:
    def __init__(self, tools: Iterable[ToolSpec] = TOOLS) -> None:
        # Phrases that stem alike ("дашборд", "дашборды") count once.
        self._phrases: list[tuple[str, tuple[str, ...]]] = sorted(
            {(spec.name, phrase_stems(phrase)) for spec in tools for phrase in spec.keywords}
        )
        # Phrases by their first stem, so a message only visits the phrases its words can start.
        self._by_first_stem: dict[str, list[tuple[str, tuple[str, ...]]]] = {}
        for tool_name, phrase in self._phrases:
            self._by_first_stem.setdefault(phrase[0], []).append((tool_name, phrase))
        single_words = {phrase[0] for _, phrase in self._phrases if len(phrase) == 1}
        vocabulary = (
            {word for _, phrase in self._phrases for word in phrase}
            | NEGATIONS
            | _NEGATION_FILLER
            | _STATE_WORDS
        )
        self._fuzzy = _TypoIndex(
            (word for word in single_words if len(word) >= _MIN_FUZZY_LENGTH), vocabulary
        )

    def match(self, text: str) -> KeywordResult:
        message = [self._fuzzy.correct(word) for word in words(text)]
        hits: dict[str, list[int]] = {}
        negated: set[str] = set()
        for start, word in enumerate(message):
            for tool_name, phrase in self._by_first_stem.get(word.stem, ()):
                end = _phrase_end(message, start, phrase)
                if end is None:
                    continue
                if _is_negated(message, start) or _is_negated_after(message, end):
                    negated.add(tool_name)
                else:
                    hits.setdefault(tool_name, []).append(start)
        ranked = sorted(
            (
                KeywordMatch(name, len(positions), min(positions))
                for name, positions in hits.items()
                if name not in negated
            ),
            key=lambda match: (-match.hits, match.first_position),
        )
        return KeywordResult(ranked, negated)


class _TypoIndex:
    """Known keyword stems reachable from a word by one deletion, insertion, substitution or swap."""

    def __init__(self, known: Iterable[str], vocabulary: set[str]) -> None:
        self._known = frozenset(known)
        # A word that is itself part of some phrase is never "corrected" into another one.
        self._vocabulary = frozenset(vocabulary)
        self._by_deletion: dict[str, set[str]] = {}
        for word in self._known:
            for variant in deletions(word):
                self._by_deletion.setdefault(variant, set()).add(word)

    def correct(self, word: Word) -> Word:
        candidate = word.stem
        if len(candidate) < _MIN_FUZZY_LENGTH or candidate in self._vocabulary or not candidate.isalpha():
            return word
        found: set[str] = set(self._by_deletion.get(candidate, ()))  # the word lacks a letter
        for variant in deletions(candidate):
            if variant in self._known:  # the word has an extra letter
                found.add(variant)
            found |= {known for known in self._by_deletion.get(variant, ()) if _one_edit(candidate, known)}
        found |= {swap for swap in swaps(candidate) if swap in self._known}
        return Word(min(found), word.clause) if len(found) == 1 else word


def deletions(word: str) -> set[str]:
    return {word[:index] + word[index + 1 :] for index in range(len(word))}


def swaps(word: str) -> set[str]:
    return {
        word[:index] + word[index + 1] + word[index] + word[index + 2 :] for index in range(len(word) - 1)
    }


def _one_edit(first: str, second: str) -> bool:
    """Same length and one letter different (the substitution the deletion index over-reports)."""
    return len(first) == len(second) and sum(a != b for a, b in zip(first, second, strict=True)) == 1


def _phrase_end(message: list[Word], start: int, phrase: tuple[str, ...]) -> int | None:
    """Where the phrase that starts at ``start`` ends, or None if the rest of it is not there."""
    position, clause = start, message[start].clause
    for wanted in phrase[1:]:
        window = message[position + 1 : position + 2 + _MAX_GAP]
        step = next(
            (
                offset
                for offset, candidate in enumerate(window, 1)
                if candidate.stem == wanted and candidate.clause == clause
            ),
            None,
        )
        if step is None:
            return None
        position += step
    return position


def affirmed(text: str) -> str:
    """``text`` without the clauses a negation opens ("не выкатывай на прод, …", "…, do not ping
    them"): what the person does ask for. The embedding tier reads meaning, not negations, and
    would offer the very tool such a clause refuses."""
    clauses: dict[int, list[Word]] = {}
    for word in words(text):
        clauses.setdefault(word.clause, []).append(word)
    return " ".join(word.text for clause in clauses.values() if not _refuses(clause) for word in clause)


def _refuses(clause: list[Word]) -> bool:
    """The clause's first word that is not filler is a negation, and what follows it no state."""
    meaningful = [word.stem for word in clause if word.stem not in _NEGATION_FILLER]
    return len(meaningful) >= 2 and meaningful[0] in NEGATIONS and meaningful[1] not in _STATE_WORDS


def _is_negated_after(message: list[Word], end: int) -> bool:
    """Object first, then the negated verb: "бэкап не делай", "запрос не выполняй"."""
    following = [word for word in message[end + 1 : end + 3] if word.clause == message[end].clause]
    return len(following) == 2 and following[0].stem in NEGATIONS and following[1].stem not in _STATE_WORDS


def _is_negated(message: list[Word], position: int) -> bool:
    clause = message[position].clause
    others = 0
    for earlier in range(position - 1, -1, -1):
        word = message[earlier]
        if word.clause != clause or word.stem in _STATE_WORDS:
            return False
        if word.stem in NEGATIONS:
            return True
        if word.stem not in _NEGATION_FILLER:
            others += 1
            if others > 1:
                return False
    return False
