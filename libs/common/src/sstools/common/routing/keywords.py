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
from sstools.common.language import Word, phrase_stems, words
from sstools.common.language import negated as refused
from sstools.common.language import vocabulary as language_stems

_MAX_GAP = 1
_MIN_FUZZY_LENGTH = 4
# No word is longer: a longer run of letters is corrected to nothing (its variants cost its square).
_MAX_FUZZY_LENGTH = 30


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
    def __init__(self, tools: Iterable[ToolSpec] = TOOLS, *, typos: bool = True) -> None:
        # Phrases that stem alike ("дашборд", "дашборды") count once.
        self._phrases: list[tuple[str, tuple[str, ...]]] = sorted(
            {(spec.name, phrase_stems(phrase)) for spec in tools for phrase in spec.keywords}
        )
        # Phrases by their first stem, so a message only visits the phrases its words can start.
        self._by_first_stem: dict[str, list[tuple[str, tuple[str, ...]]]] = {}
        for tool_name, phrase in self._phrases:
            self._by_first_stem.setdefault(phrase[0], []).append((tool_name, phrase))
        single_words = {phrase[0] for _, phrase in self._phrases if len(phrase) == 1}
        known = {word for _, phrase in self._phrases for word in phrase} | language_stems()
        fuzzy = (word for word in single_words if typos and len(word) >= _MIN_FUZZY_LENGTH)
        self._fuzzy = _TypoIndex(fuzzy, known)

    def match(self, text: str) -> KeywordResult:
        message = [self._fuzzy.correct(word) for word in words(text)]
        hits: dict[str, list[int]] = {}
        negated: set[str] = set()
        for start, word in enumerate(message):
            for tool_name, phrase in self._by_first_stem.get(word.stem, ()):
                end = _phrase_end(message, start, phrase)
                if end is None:
                    continue
                if refused(message, start, end):
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
        if not _MIN_FUZZY_LENGTH <= len(candidate) <= _MAX_FUZZY_LENGTH or candidate in self._vocabulary:
            return word
        if not candidate.isalpha():
            return word
        found: set[str] = set(self._by_deletion.get(candidate, ()))  # the word lacks a letter
        for variant in deletions(candidate):
            if variant in self._known:  # the word has an extra letter
                found.add(variant)
            found |= {known for known in self._by_deletion.get(variant, ()) if _one_edit(candidate, known)}
        found |= {swap for swap in swaps(candidate) if swap in self._known}
        return Word(min(found), word.clause, word.text, word.start, word.end) if len(found) == 1 else word


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
