"""Words matched to the live system's names: a dashboard's title, a table, a column, a value a
column holds. A name matches by its words' stems (any case, one typo in a long word), or — across
languages, where a person says "питомцы" of a table named ``pets`` — by the router's embedding of
both, when one name is clearly nearest."""

import collections
import difflib
import itertools
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from sstools.common.language import FUNCTION_STEMS, Word, stem

# Similarity of the person's word to each name, a row per word; None when the model is away.
Relate = Callable[[Sequence[str], Sequence[str]], Awaitable[Sequence[Sequence[float]] | None]]
# multilingual-e5's cosines sit high: a name must reach this and lead the next one by the margin.
RELATED = 0.86
_MARGIN = 0.015
_NAME_PARTS = re.compile(r"[^\W_]+")


@dataclass(frozen=True)
class Found:
    label: str
    words: tuple[int, ...]  # which of the message's words name it
    exact: bool  # by spelling, not by meaning


def cyrillic(text: str) -> bool:
    return bool(re.search("[а-яё]", text, re.I))


def spoken(label: str) -> str:
    """A name as the model reads it: its parts as words ("owner_city" → "owner city")."""
    return " ".join(_NAME_PARTS.findall(label))


def parts(label: str) -> tuple[str, ...]:
    """A name's stems: ``owner_city`` → owner, citi; "Sales Overview" → sale, overview."""
    return tuple(stem(part) for part in _NAME_PARTS.findall(label.replace("ё", "е")))


_LATIN = str.maketrans(
    {"а": "a", "б": "b", "в": "v", "г": "g", "д": "d", "е": "e", "ж": "zh", "з": "z", "и": "i", "й": "y"}
    | {"к": "k", "л": "l", "м": "m", "н": "n", "о": "o", "п": "p", "р": "r", "с": "s", "т": "t", "у": "u"}
    | {"ф": "f", "х": "kh", "ц": "ts", "ч": "ch", "ш": "sh", "щ": "sch", "ъ": "", "ы": "y", "ь": "", "э": "e"}
    | {"ю": "yu", "я": "ya"}
)


# Latin spellings Cyrillic writes by sound: "тикет" is "ticket", "клиника" "clinic".
_SOUNDS = {"ck": "k", "c": "k", "q": "k", "w": "v", "x": "ks", "y": "i", "ph": "f"}
_HEARD = re.compile("ck|ph|[cqwxy]")
_HEARD_RATIO = 0.8


def similar(written: str, part: str) -> bool:
    """One typo in a word of five letters or more (in one of four, a letter changed or two
    swapped), two in one of nine: a letter missed, added, changed or two swapped — the first
    letter only so."""
    allowed = 2 if len(part) >= 9 else 1 if len(part) >= 5 or len(part) == len(written) == 4 else 0
    swapped = written[:2] == part[1::-1]
    if not allowed or (written[:1] != part[:1] and not swapped) or abs(len(written) - len(part)) > allowed:
        return False
    previous, row = None, list(range(len(part) + 1))
    for i, letter in enumerate(written, 1):
        current = [i] + [0] * len(part)
        for j, other in enumerate(part, 1):
            current[j] = min(row[j] + 1, current[j - 1] + 1, row[j - 1] + (letter != other))
            if previous and i > 1 and j > 1 and letter == part[j - 2] and written[i - 2] == other:
                current[j] = min(current[j], previous[j - 2] + 1)
        previous, row = row, current
    return row[-1] <= allowed


def _plural_of(written: str, part: str) -> bool:
    """The same English name, one of them plural, with a typo at most."""
    said, named = (text if text.endswith("s") else f"{text}s" for text in (written, part))
    return said == named or similar(said, named)


def _spelt(word: Word, part: str) -> bool:
    """The word is the name's part: by stem, with one typo in a long word, or written in Cyrillic
    letters ("тикетов" of ``tickets``)."""
    if word.stem == part or similar(word.stem, part) or (len(part) >= 5 and word.stem.startswith(part)):
        return True  # or a longer word of the same root: "хирургические" of "хирургия"
    if part.isascii() and _plural_of(word.stem, part):
        return True  # a plural the stemmer keeps: "SLA" of "SLAs", "SALs" of "SLAs"
    if not part.isascii() or word.text.isascii():
        return False
    heard = _HEARD.sub(lambda found: _SOUNDS[found[0]], part)
    written = word.text.lower().translate(_LATIN)[: len(heard) + 1]
    return (
        len(heard) >= 4 < len(word.text)
        and difflib.SequenceMatcher(None, written, heard).ratio() >= _HEARD_RATIO
    )


def spelled(message: Sequence[Word], label: str, usable: Sequence[int]) -> tuple[int, ...] | None:
    """The words that spell every part of ``label``, in any order, or None."""
    used: list[int] = []
    for part in parts(label):
        index = next((i for i in usable if i not in used and _spelt(message[i], part)), None)
        if index is None and part not in FUNCTION_STEMS:  # "opened_at" is named by "opened"
            return None
        used += [index] if index is not None else []
    return tuple(used) or None


async def find(
    message: Sequence[Word],
    usable: Sequence[int],
    labels: Sequence[str],
    relate: Relate | None,
    by_part: bool = False,
) -> list[Found]:
    """The labels the words name, most words first: by spelling — ``by_part``, a name also by one
    of its parts no other name has ("city" of ``owner_city``) —, then by meaning for the words
    spelling left (each word names at most one label)."""
    found: list[Found] = []
    taken: set[int] = set()
    for label in sorted(
        labels, key=lambda item: -len([part for part in parts(item) if part not in FUNCTION_STEMS])
    ):
        spelt = spelled(message, label, [i for i in usable if i not in taken])
        if spelt:
            found.append(Found(label, spelt, True))
            taken.update(spelt)
    shared = collections.Counter(part for label in labels for part in set(parts(label)))
    for label in labels if by_part else ():
        own = [
            part
            for part in parts(label)
            if shared[part] == 1 and len(part) >= 3 and part not in FUNCTION_STEMS
        ]
        spelt = next(
            (
                words
                for part in own
                if (words := spelled(message, part, [i for i in usable if i not in taken]))
            ),
            None,
        )
        if spelt and label not in {item.label for item in found}:
            found.append(Found(label, spelt, True))
            taken.update(spelt)
    left = [i for i in usable if i not in taken and message[i].text.isalpha()]
    others = [label for label in labels if label not in {item.label for item in found}]
    if relate is None or not left or not others:
        return found
    # each word, and each two neighbours ("причине визита" of ``visit_reason``)
    phrases = [(i,) for i in left] + [(i, j) for i, j in itertools.pairwise(left) if j == i + 1]
    scores = await relate(
        [" ".join(message[i].text for i in phrase) for phrase in phrases],
        [spoken(x) for x in others],
    )
    if scores is None:
        return found
    candidates = []
    for phrase, row in zip(phrases, scores, strict=True):
        # within one script the model hears spelling, not meaning ("приёмов" is near "осмотр"):
        # a name written as the words are is matched by spelling alone
        script = cyrillic(message[phrase[0]].text)
        row = [score if cyrillic(label) != script else -1.0 for score, label in zip(row, others, strict=True)]
        ranked = sorted(range(len(others)), key=lambda column: -row[column])
        lead = row[ranked[0]] - (row[ranked[1]] if len(ranked) > 1 else 0.0)
        if row[ranked[0]] >= RELATED and lead >= _MARGIN:
            candidates.append((row[ranked[0]], phrase, others[ranked[0]]))
    for _, phrase, label in sorted(candidates, reverse=True):
        if not taken & set(phrase) and label not in {item.label for item in found}:
            found.append(Found(label, phrase, False))
            taken.update(phrase)
    return found
