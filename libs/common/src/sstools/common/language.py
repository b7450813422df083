"""The language layer: how every part of the agent reads a person's words — the router's keyword
tier, the fast path, the built-in planner — in Russian or English.

A message is a list of :class:`Word`\\ s: normalised, stemmed, each with the clause it stands in
and where it stands in the text. Matching whole stems, never substrings, keeps "env" out of
"environment" and "доступ" (access) out of "доступные" (available), while "дашбордов" still finds
"дашборд". A word is negated when a negation stands before it in its clause with at most one other
word between, not counting filler ("не надо ничего делать", "don't bother to deploy"), or when a
negation and a word that is no state follow right after it ("бэкап не делай", "backup is not
needed"); a state verb stops it ("почему не работает дашборд" negates nothing).
"""

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache

import snowballstemmer

# A word, "n't" on its own (it is "not"), or a run of the punctuation that ends a clause.
_WORD_OR_BREAK = re.compile(r"[^\W_]+?(?=n['’]t\b)|n['’]t\b|[^\W_]+|[.,;:!?()\n—–]+")
_CYRILLIC = re.compile(r"[а-яё]", re.IGNORECASE)
_RUSSIAN = snowballstemmer.stemmer("russian")
_ENGLISH = snowballstemmer.stemmer("english")
_QUOTED = re.compile(r"(?<!\w)[«\"“”'`]([^«»\"“”'`\n]{1,200})[»\"“”'`](?!\w)")
_ASKS = re.compile(r"\?\s*$")


@lru_cache(maxsize=65536)
def stem(token: str) -> str:
    token = token.lower().replace("ё", "е")
    stemmer = _RUSSIAN if _CYRILLIC.search(token) else _ENGLISH
    return str(stemmer.stemWord(token))


def _stems(*texts: str) -> frozenset[str]:
    """The stems of the words of ``texts`` (a text may hold several, space-separated)."""
    return frozenset(stem(word) for text in texts for word in text.split())


# Words that end one request and start another: "не делай бэкап, а покажи окружения".
CLAUSE_WORDS = frozenset(
    {"а", "но", "зато", "лучше", "просто", "только", "сначала", "затем", "потом", "but", "just", "then"}
    | {"first", "instead", "only", "и", "and"}
)
# Words that put requests in order: "check it, then deploy", "сначала проверь, потом задеплой",
# "if it is up, validate".
_SEQUENCE = _stems(
    *("then", "after", "afterwards", "next", "first", "if"),
    *("сначала", "потом", "затем", "после", "далее", "если"),
)
NEGATIONS = _stems(
    *("не", "нет", "без", "никаких", "вместо", "отмена", "отмени", "отменить", "пропусти", "забей", "отбой"),
    *("not", "no", "never", "without", "instead", "dont", "skip", "rather", "forget", "scrap", "cancel"),
)
# Words that may stand between a negation and what it negates without counting.
_FILLER = _stems(
    *("надо", "нужно", "стоит", "следует", "пока", "сейчас", "еще", "пожалуйста", "сегодня", "никакой"),
    *("никакого", "ничего", "этот", "это", "сам", "нам", "мне", "будем", "нибудь", "снова", "опять"),
    *("do", "need", "to", "a", "an", "the", "any", "please", "yet", "now", "of", "bother", "want"),
    *("should", "us", "me", "it", "go", "ahead", "and", "than", "new", "another", "again", "anything"),
    *("is", "are", "be", "will", "would", "have", "let", "s", "we", "there", "thing", "that"),
    *("новый", "новую", "новое", "туда"),
)
# "не работает", "doesn't load": the negation is about a state, not a request.
_STATE_WORDS = _stems(
    *("работает", "работают", "грузится", "открывается", "отвечает", "видно", "вижу", "получается"),
    *("упало", "упал", "падает", "сломалось", "знаю", "понимаю", "уверен", "помню", "вышло", "нашел"),
    *("work", "works", "working", "load", "loading", "respond", "show", "showing", "know"),
    *("sure", "understand", "remember", "find", "found", "exist", "exists", "broken", "fail", "failing"),
)
# The prepositions of a place: a negation before one refuses the place ("не на проде, а на деве").
_PLACES = _stems("на", "в", "во", "из", "с", "со", "on", "in", "at", "to", "from")
# The words that give a thing what it has ("dashboards with errors", "дашборды с ошибками").
_HAVING = _stems("with", "having", "containing", "с", "со")
# "не … ли", "isn't it": a question, not a refusal; "ли" stands within a few words of what it asks.
_QUESTION_REACH = 6
_QUESTION_WORDS = _stems("ли", "разве", "неужели")


# Words that name nothing a question is about: function words, and the verbs of asking.
FUNCTION_STEMS = _stems(
    "the a an of in on at to for from by with and or is are was were be do does did have has",
    "how many much what which who whom whose where when why this that these those there here it",
    "its me my our we us you your all any some each every per please show tell give list find",
    "get count number can could would will shall should may might must i he she they them their",
    "than then also only just about into out up как какие какой каких сколько что кто где когда",
    "почему зачем это этот эта эти тот та те там тут все всех всего каждый каждого каждой по в",
    "во на с со из у о об от до для за под над при и или а но не ни ли же бы мне нам нас вы вам",
    "ваш наш мой покажи скажи выведи дай найди посчитай подсчитай есть было был была были будет",
    "число количество всего штук сумма пожалуйста плиз now right still ever single just already",
    "today сейчас сегодня уже ещё еще вообще время всё теперь тогда самое same thing things again too",
    "use using pull fetch display return используй возьми выгрузи вытащи выдай",
)


# Chat shorthand, read as the word it stands for ("wat r u good 4", "скока заказов").
_SHORTHAND = (
    {"n't": "not", "n’t": "not", "u": "you", "r": "are", "ur": "your", "pls": "please"}
    | {"plz": "please", "thx": "thanks", "rn": "now", "wat": "what", "чё": "что", "чо": "что", "шо": "что"}
    | {"скока": "сколько", "щас": "сейчас", "пж": "пожалуйста", "плз": "пожалуйста"}
)


@dataclass(frozen=True)
class Word:
    stem: str
    clause: int
    # The word as written ("n't" spelt out): what the embedding tier reads.
    text: str = field(default="", compare=False)
    start: int = field(default=0, compare=False)  # where it stands in the text
    end: int = field(default=0, compare=False)
    asked: bool = field(default=False, compare=False)  # its clause ends with "?"


def words(text: str) -> list[Word]:
    """The stemmed words of ``text``, each with the number of the clause it stands in."""
    result: list[Word] = []
    clause = opened = 0  # the clause, and where its words start in ``result``
    for found in _WORD_OR_BREAK.finditer(unicodedata.normalize("NFKC", text)):
        written = found[0]
        if not written[0].isalnum():
            if "?" in written:
                result[opened:] = [replace(word, asked=True) for word in result[opened:]]
            clause, opened = clause + 1, len(result)
            continue
        token = _SHORTHAND.get(written.lower(), written.lower())
        if token in CLAUSE_WORDS:
            clause, opened = clause + 1, len(result)
        result.append(
            Word(
                stem(token),
                clause,
                token if token != written.lower() else written,
                found.start(),
                found.end(),
            )
        )
    return result


def phrase_stems(phrase: str) -> tuple[str, ...]:
    return tuple(word.stem for word in words(phrase))


# A participle says what a thing is, not what to do ("shipped orders", "was it deployed?",
# "оплаченных заказов", "он задеплоен?").
_PARTICIPLE = re.compile(
    r"\w{3,}ed|\w{3,}(?:нн|ённ)(?:ый|ая|ое|ые|ых|ым|ой|ого|ому|ую|ыми)|\w{4,}[её]н[аоы]?"
)


def describes(word: Word) -> bool:
    """Whether the word is a participle: a state named, never an action asked for."""
    return bool(_PARTICIPLE.fullmatch(word.text.lower())) and word.stem != word.text.lower()


def is_negation(word: Word) -> bool:
    """Any sign of doubt: a negation anywhere, whatever it negates."""
    return word.stem in NEGATIONS


def negated(message: Sequence[Word], first: int, last: int | None = None) -> bool:
    """Whether the words ``first``..``last`` are refused: a negation before them in their
    clause, or right after them (object first: "бэкап не делай", "the backup is not needed")."""
    last = first if last is None else last
    clause = message[first].clause
    near = message[max(0, first - _QUESTION_REACH) : last + _QUESTION_REACH + 1]
    if any(word.stem in _QUESTION_WORDS and word.clause == clause for word in near):
        return False
    others = 0
    for earlier in range(first - 1, -1, -1):
        word = message[earlier]
        if word.clause != clause or word.stem in _STATE_WORDS:
            break
        if word.stem in NEGATIONS:
            return True
        if word.stem not in _FILLER:
            others += 1
            if others > 1:
                break
    near = [word for word in message[last + 1 : last + 4] if word.clause == message[last].clause]
    following = [word for word in near if word.stem not in _FILLER or word.stem in NEGATIONS]
    if following and following[0].stem in NEGATIONS:  # "дашборды не на деве": not there, not them
        after = near[near.index(following[0]) + 1 :]
        return not (after and after[0].stem in _PLACES) and (
            len(following) == 1 or following[1].stem not in _STATE_WORDS
        )
    return False


def qualifies(message: Sequence[Word], first: int, thing: int) -> bool:
    """Whether the words from ``first`` on say what the word at ``thing`` has: "with" stands
    right after it, in its clause, and before them ("dashboards with errors": errors)."""
    having = thing + 1
    return (
        having < first
        and message[having].stem in _HAVING
        and all(word.clause == message[thing].clause for word in message[thing : first + 1])
    )


def in_order(message: Sequence[Word]) -> bool:
    """Whether the words put what they ask in an order ("X, then Y"): each is done as said."""
    return any(word.stem in _SEQUENCE for word in message)


def asks(text: str) -> bool:
    """Whether the message is a question: it ends with "?" or asks with "ли"."""
    return bool(_ASKS.search(text)) or any(word.stem in _QUESTION_WORDS for word in words(text))


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
    meaningful = [word.stem for word in clause if word.stem not in _FILLER]
    return len(meaningful) >= 2 and meaningful[0] in NEGATIONS and meaningful[1] not in _STATE_WORDS


def quoted(text: str) -> list[str]:
    """The texts the person put in quotes, in order."""
    return [found[1].strip() for found in _QUOTED.finditer(text) if found[1].strip()]


def vocabulary() -> frozenset[str]:
    """The stems this layer itself reads: never "corrected" as a typo of another word."""
    return NEGATIONS | _FILLER | _STATE_WORDS
