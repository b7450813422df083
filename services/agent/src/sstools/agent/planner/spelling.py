"""A message's misspelt words put right before it is read: a word that is not one the tools'
declarations use, one typo (a letter missing, extra, wrong, or two swapped) away from exactly one
that is ("deplpy" → deploy, "dashbaord" → dashboard). Inflections are not typos: a word whose stem
is known already ("orders", "дашбордов") is kept as written, and so are names (capitalised, or
joined by "/", "_", "-", "." or "@") and anything with a digit or shorter than five letters."""

import re
from collections.abc import Iterable
from functools import cache

from sstools.common.catalogue import TOOLS
from sstools.common.language import stem
from sstools.common.routing.keywords import deletions, swaps

# Five letters or more, and no longer than a word gets: a longer run is not a word to correct.
_SHORTEST_MEANT = 5
# A word inside a name ("fix/legacy-kpis", "user_id", "q3.revenue") is part of the name: left as it is.
_WORD = re.compile(r"(?<![\w/@-])(?<!\w\.)[^\W\d_]{5,30}(?![\w/@-]|\.\w)")


def _variants(word: str) -> set[str]:
    """Every string one deletion away, and every one with two neighbours swapped."""
    return deletions(word) | swaps(word)


def one_typo(first: str, second: str) -> bool:
    if len(first) == len(second):
        differ = [index for index, (a, b) in enumerate(zip(first, second, strict=True)) if a != b]
        return len(differ) == 1 or (
            len(differ) == 2
            and differ[1] == differ[0] + 1
            and first[differ[0]] == second[differ[1]]
            and first[differ[1]] == second[differ[0]]
        )
    shorter, longer = sorted((first, second), key=len)
    return len(longer) - len(shorter) == 1 and shorter in _variants(longer)


class Speller:
    def __init__(self, texts: Iterable[str]) -> None:
        self._known = {word.lower() for text in texts for word in _WORD.findall(text)}
        self._stems = {stem(word) for word in self._known}
        self._by_variant: dict[str, set[str]] = {}
        for word in self._known:
            for variant in _variants(word) | {word}:
                self._by_variant.setdefault(variant, set()).add(word)

    def word(self, written: str) -> str:
        lowered = written.lower()
        named = written[0].isupper() and not written.isupper()
        if named or lowered in self._known or stem(lowered) in self._stems:
            return written
        found: set[str] = set()
        for variant in _variants(lowered) | {lowered}:
            found |= self._by_variant.get(variant, set())
        # a word of five letters is one typo from too many others to be put right as one of them
        found = {word for word in found if len(word) > _SHORTEST_MEANT and one_typo(word, lowered)}
        return found.pop() if len(found) == 1 else written

    def text(self, text: str) -> str:
        return _WORD.sub(lambda match: self.word(match.group(0)), text)


# The words of questions about rows and objects, which no tool's declaration needs to say.
_QUESTION_WORDS = (
    *("сколько", "состояние", "покажи", "проверь", "количество", "последние", "таблицы", "колонки"),
    *("average", "distinct", "columns", "tables", "create", "search", "dashboards", "where"),
)


@cache
def speller(nouns: tuple[str, ...] = ()) -> Speller:
    """One speller over every tool's descriptions and keywords, both languages, the words of
    questions and the ``nouns`` of the things asked about."""
    return Speller(
        [
            *(
                text
                for spec in TOOLS
                for text in (spec.description_en, spec.description_ru, *spec.keywords_en, *spec.keywords_ru)
            ),
            *_QUESTION_WORDS,
            *nouns,
        ]
    )
