"""Words of a message as the keyword tier sees them: normalised, split into clauses, stemmed.

Matching whole stems, never substrings, is what keeps "env" out of "environment" and
"доступ" (access) out of "доступные" (available), while "дашбордов" still finds "дашборд".
"""

import re
import unicodedata
from dataclasses import dataclass, field
from functools import lru_cache

import snowballstemmer

_WORD_OR_BREAK = re.compile(r"[^\W_]+|[.,;:!?()\n]+")
_CONTRACTION = re.compile(r"n['’]t\b", re.IGNORECASE)
_CYRILLIC = re.compile(r"[а-я]")
_RUSSIAN = snowballstemmer.stemmer("russian")
_ENGLISH = snowballstemmer.stemmer("english")

# Words that end one request and start another: "не делай бэкап, а покажи окружения".
CLAUSE_WORDS = frozenset({"а", "но", "зато", "лучше", "просто", "только", "but", "just", "then", "и", "and"})


@dataclass(frozen=True)
class Word:
    stem: str
    clause: int
    # The word as written (contractions spelt out): what the embedding tier reads.
    text: str = field(default="", compare=False)


def _spelt_out(text: str) -> str:
    return _CONTRACTION.sub(" not", unicodedata.normalize("NFKC", text))


@lru_cache(maxsize=65536)
def stem(token: str) -> str:
    stemmer = _RUSSIAN if _CYRILLIC.search(token) else _ENGLISH
    return str(stemmer.stemWord(token))


def words(text: str) -> list[Word]:
    """The stemmed words of ``text``, each with the number of the clause it stands in."""
    result: list[Word] = []
    clause = 0
    for written in _WORD_OR_BREAK.findall(_spelt_out(text)):
        if not written[0].isalnum():
            clause += 1
            continue
        token = written.lower().replace("ё", "е")
        if token in CLAUSE_WORDS:
            clause += 1
        result.append(Word(stem(token), clause, written))
    return result


def phrase_stems(phrase: str) -> tuple[str, ...]:
    return tuple(word.stem for word in words(phrase))
