"""A question about data in words, made a statement over the table it names (or whose values it
names): a count, a count by a column, distinct values, the top N, an average, sum, maximum or
minimum of a column, N rows, the latest rows, or deleting rows — filtered by the values, numbers,
year or month it names — always schema-qualified, every column and value one the table really
has. A word that may name a condition but names nothing of the table is asked about."""

import calendar
import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict
from sqlglot import exp

from sstools.agent.planner.grounded import RELATED, Found, Relate, cyrillic, find, similar, spoken
from sstools.agent.planner.reading import Reading, content
from sstools.common.language import FUNCTION_STEMS, Word, negated, phrase_stems
from sstools.common.outline import EnvOutline, OutlineColumn, OutlineDatabase, OutlineTable
from sstools.common.sql import dialect_for_backend


def _stems(words: str) -> frozenset[str]:
    return frozenset(phrase_stems(words))


# the most specific first: "how many distinct customers" asks for distinct ones
_SHAPES = {
    "distinct": _stems("distinct unique different уникальных уникальные разных различных"),
    "avg": _stems("average avg mean средний средняя среднее средне"),
    "sum": _stems("sum сумма суммарный суммарно общая общий итого"),
    "max": _stems("maximum max максимальный максимальная наибольший"),
    "min": _stems("minimum min минимальный минимальная наименьший"),
    "delete": _stems("delete remove wipe truncate clear очисти удали удалить очистить сотри"),
    "count": _stems("сколько count количество число посчитай подсчитай many"),
}
# "посчитай выручку": a verb of counting asks for a sum where a word means a measure
_COMPUTE = _stems("count посчитай подсчитай calculate compute")
_GROUP = _stems("per by each every по каждому каждой разбивке разрезе group breakdown помесячно")
_DESCENDING = _stems("top топ largest biggest highest most longest больше крупные дорогие")
# "самый" stems as "сам" (oneself): the superlative is read as written
_SUPERLATIVE = frozenset({"самый", "самая", "самые", "самых", "самого", "самой"})  # not "то же самое"
_ASCENDING = _stems("smallest lowest cheapest least shortest меньше дешевые")
_LATEST = _stems("last latest newest recent последних последние свежих новых")
_ROWS = _stems("rows row records строк строки записей записи first первые")
_SHAPE_STEMS = frozenset().union(*_SHAPES.values(), _GROUP, _DESCENDING, _ASCENDING, _LATEST, _ROWS)
_DATA_NOUNS = _stems(
    "table tables таблица таблице таблицы database db base база базе бд data данные данных sql query запрос"
    " column columns колонка колонки столбец поле значение схема schema all все всё"
)
_MONTHS = {
    stem: number
    for number in range(1, 13)
    for stem in _stems(
        f"{calendar.month_name[number]} {calendar.month_abbr[number]} "
        + [
            "январь",
            "февраль",
            "март",
            "апрель",
            "май",
            "июнь",
            "июль",
            "август",
            "сентябрь",
            "октябрь",
            "ноябрь",
            "декабрь",
        ][number - 1]
    )
}
_DATE_TYPES = ("date", "time")
_NUMBER_TYPES = ("int", "numeric", "decimal", "float", "double", "real", "money", "number")
_TEXT_TYPES = ("char", "text", "string")
DEFAULT_ROWS = 10
# Nearness of a question to a table's description: below it, about no table; within the margin of
# the nearest, too near to tell apart (asked).
_ABOUT_TABLE = 0.76
_TABLE_MARGIN = 0.01
_TABLES_ASKED = 3
LABEL_CHARS = 200  # the router's bound on a text it relates
_WORDS_READ = 64  # a question about data is a sentence: words past these are not read for names
# A word this near a value (or a yes/no column), and this much nearer it than any name, may be a condition.
_CONDITION_AT = 0.82
_VALUE_LEAD = 0.01
_KEY = re.compile(r"(^|_)id$", re.I)  # a key column is counted by, never summed


class DataQuestion(BaseModel):
    """What a question about data asks, typed: kept in the thread, so a follow-up changes it."""

    model_config = ConfigDict(frozen=True)

    database_id: int
    backend: str | None
    schema_name: str
    table: str
    measure: str = "count"  # count | distinct | avg | sum | max | min | top | rows | delete
    column: str | None = None  # the measured or ordering column
    group_by: str | None = None
    filters: tuple[tuple[str, str | int | bool], ...] = ()
    period: tuple[str, str, str] | None = None  # a date column, from, to (ISO dates, to excluded)
    descending: bool = True
    limit: int | None = None

    def statement(self) -> str:
        def column(name: str | None) -> exp.Column:
            return exp.column(name or "", quoted=True)

        table = exp.table_(self.table, db=self.schema_name, quoted=True)
        conditions: list[exp.Expr] = [column(name).eq(exp.convert(value)) for name, value in self.filters]
        if self.period:
            name, start, end = self.period
            conditions += [column(name) >= exp.Literal.string(start), column(name) < exp.Literal.string(end)]
        where = exp.and_(*conditions) if conditions else None
        if self.measure == "delete":
            deleted = exp.delete(table)
            return (deleted.where(where) if where else deleted).sql(dialect=self._dialect())
        measured: exp.Expr = {
            "count": exp.Count(this=exp.Star()),
            "distinct": exp.Count(this=exp.Distinct(expressions=[column(self.column)])),
            "avg": exp.Avg(this=column(self.column)),
            "sum": exp.Sum(this=column(self.column)),
            "max": exp.Max(this=column(self.column)),
            "min": exp.Min(this=column(self.column)),
        }.get(self.measure, exp.Star())
        query = exp.select(*([column(self.group_by)] if self.group_by else []), measured).from_(table)
        query = query.where(where) if where else query
        if self.group_by:
            query = query.group_by(column(self.group_by)).order_by(
                exp.Ordered(this=exp.Literal.number(2), desc=True)
            )
        elif self.measure in ("top", "rows") and self.column:
            query = query.order_by(exp.Ordered(this=column(self.column), desc=self.descending))
        return (query.limit(self.limit) if self.limit else query).sql(dialect=self._dialect())

    def _dialect(self) -> str:
        return dialect_for_backend(self.backend) or "postgres"

    def conditions(self) -> list[str]:
        """The conditions it applies, as a person reads them."""
        said = [f"{name} = {value}" for name, value in self.filters]
        return said + ([f"{self.period[1]} ≤ {self.period[0]} < {self.period[2]}"] if self.period else [])


@dataclass(frozen=True)
class Unclear:
    """Why no statement was made: the words that name nothing of the table, or the tables a
    question may be about."""

    table: str | None = None
    words: tuple[str, ...] = ()
    tables: tuple[str, ...] = ()
    columns: tuple[str, ...] = ()


@dataclass(frozen=True)
class Place:
    """The table a message names, and the words it leaves for the rest of the question."""

    database: OutlineDatabase
    table: OutlineTable
    usable: tuple[int, ...]
    by_name: bool = True  # the words spell its name (not only what it holds, or its meaning)


def _typed(column: OutlineColumn, kinds: Sequence[str]) -> bool:
    return any(kind in (column.type or "").lower() for kind in kinds)


def _shape_stem(word: Word) -> str:
    """The word's stem, or the shape word it is a typo of ("сколко" of "сколько")."""
    if word.text.lower() in _SUPERLATIVE:
        return "top"
    if word.stem in _SHAPE_STEMS or word.stem in FUNCTION_STEMS:
        return word.stem
    # a long word only: "list" is no typo of "last"
    return next((shape for shape in _SHAPE_STEMS if len(shape) >= 5 and similar(word.stem, shape)), word.stem)


def _shape_word(stem: str) -> bool:
    return stem in _SHAPE_STEMS


def _usable(reading: Reading) -> list[int]:
    kept = {id(word) for word in content(reading) if word.text.lower() not in reading.envs}
    return [
        index
        for index, word in enumerate(reading.words)
        if id(word) in kept
        and word.stem not in _DATA_NOUNS
        and not _shape_word(_shape_stem(word))
        and word.stem not in _MONTHS
    ][:_WORDS_READ]


def asks_data(reading: Reading) -> bool:
    """Whether the words ask something of data: a count, an aggregate, rows."""
    return any(_shape_word(_shape_stem(word)) for word in reading.words)


async def place_named(
    reading: Reading, outline: EnvOutline, relate: Relate | None, question: bool = False
) -> Place | Unclear | None:
    """The one table the words name (in the database they name, if they name one): by spelling;
    else, for a ``question`` about data, the one the whole question is nearest by meaning (its
    name, columns and values), the names and values it spells counting for it — with no model,
    the one whose values it spells most ("сколько отменённых заказов" of a status column); else
    the one a word means."""
    message, usable = reading.words, _usable(reading)
    places = [(db, table) for db in outline.databases for table in db.tables]
    databases = await find(message, usable, [db.name for db in outline.databases], None)
    usable = [index for index in usable if not any(index in found.words for found in databases)]
    if databases:
        places = [(db, table) for db, table in places if db.name in {found.label for found in databases}]
    tables = await find(
        message, usable, sorted({table.name for _, table in places}), None if question else relate
    )
    if tables:
        best = max(tables, key=lambda found: len(found.words))
        named = [(db, table) for db, table in places if table.name == best.label]
        left = tuple(index for index in usable if index not in best.words)
    else:
        named = await _nearest(reading, usable, places, relate if question else None)
        left = tuple(usable)
    if len(named) > 1:
        return Unclear(tables=tuple(f"{db.name}: {table.schema_name}.{table.name}" for db, table in named))
    return Place(named[0][0], named[0][1], left, any(found.exact for found in tables)) if named else None


async def _nearest(
    reading: Reading,
    usable: Sequence[int],
    places: Sequence[tuple[OutlineDatabase, OutlineTable]],
    relate: Relate | None,
) -> list[tuple[OutlineDatabase, OutlineTable]]:
    """The tables the question is about: of those whose columns and values the words spell most,
    the nearest by meaning, or those too near to tell apart."""
    spelt = []
    for _, table in places:
        labels = [column.name for column in table.columns]
        labels += [value for column in table.columns for value in column.values or ()]
        spelt.append(len(await find(reading.words, usable, labels, None)))
    most = max(spelt, default=0)
    places = [place for place, count in zip(places, spelt, strict=True) if count == most]
    scores = (
        await relate([reading.text[:LABEL_CHARS]], [_described(table) for _, table in places])
        if relate and places
        else None
    )
    if scores is None:  # no model: the tables the words spell something of
        return places if most else []
    ranked = sorted(zip(scores[0], range(len(places)), strict=True), reverse=True)
    if ranked[0][0] < _ABOUT_TABLE and not most:
        return []
    near = [places[at] for score, at in ranked if ranked[0][0] - score < _TABLE_MARGIN][:_TABLES_ASKED]
    return await _nearest_by_word(reading, usable, near, relate) if relate and len(near) > 1 else near


async def _nearest_by_word(
    reading: Reading,
    usable: Sequence[int],
    places: Sequence[tuple[OutlineDatabase, OutlineTable]],
    relate: Relate,
) -> list[tuple[OutlineDatabase, OutlineTable]]:
    """Of tables the question is about as near, the one a word of it is clearly nearest to — its
    name, a column, a value written in another script ("собак" of a ``dog``) —, else all."""
    words = [reading.words[index].text for index in usable]
    labels = [
        [table.name, *(column.name for column in table.columns)]
        + [value for column in table.columns for value in column.values or ()]
        for _, table in places
    ]
    flat = [label for table in labels for label in table]
    scores = await relate(words, flat) if words else None
    if scores is None:
        return list(places)
    best = []
    for table in labels:
        best.append(
            max(
                (
                    score
                    for word, row in zip(words, scores, strict=True)
                    for score, label in zip(row, flat, strict=True)
                    if label in table and cyrillic(label) != cyrillic(word)
                ),
                default=0.0,
            )
        )
    ranked = sorted(zip(best, range(len(places)), strict=True), reverse=True)
    return [places[ranked[0][1]]] if ranked[0][0] - ranked[1][0] >= _TABLE_MARGIN else list(places)


def _described(table: OutlineTable) -> str:
    """A table as the model reads it: its name, its columns, some of its values."""
    columns = " ".join(column.name for column in table.columns)
    values = " ".join(value for column in table.columns for value in (column.values or ())[:4])
    return f"{table.name}: {columns}; {values}".replace("_", " ")[:LABEL_CHARS]


async def data_question(
    reading: Reading, outline: EnvOutline, relate: Relate | None, earlier: DataQuestion | None = None
) -> DataQuestion | Unclear | None:
    """The question's statement; Unclear when it names a table but not all it says; None when it
    names no table (and no earlier question it changes)."""
    place = await place_named(reading, outline, relate, question=asks_data(reading))
    if not (isinstance(place, Place) and place.by_name) and (earlier or not asks_data(reading)):
        # "а по приоритету?" goes on with the earlier table; a table only meant is asked about
        place = None
    if isinstance(place, Unclear):
        return place
    if place is not None:
        fresh = DataQuestion(
            database_id=place.database.id,
            backend=place.database.backend,
            schema_name=place.table.schema_name,
            table=place.table.name,
        )
        return await _shaped(reading, fresh, place, relate)
    for db in outline.databases if earlier else ():
        for table in db.tables:
            if earlier and (db.id, table.schema_name, table.name) == (
                earlier.database_id,
                earlier.schema_name,
                earlier.table,
            ):
                return await _shaped(reading, earlier, Place(db, table, tuple(_usable(reading))), relate)
    return None


def _period(reading: Reading, column: str | None) -> tuple[str, str, str] | None:
    """A year ("в 2025"), or a month of a year ("January 2026", "за март 2026"), on a date column."""
    years = [
        int(word.text) for word in reading.words if word.text.isdigit() and 1900 <= int(word.text) <= 2100
    ]
    month = next((_MONTHS[word.stem] for word in reading.words if word.stem in _MONTHS), None)
    if column is None or not years:
        return None
    year = years[0]
    if month is None:
        return column, f"{year}-01-01", f"{year + 1}-01-01"
    following = (year + month // 12, month % 12 + 1)
    return column, f"{year}-{month:02d}-01", f"{following[0]}-{following[1]:02d}-01"


def _after(stems: Sequence[str], markers: frozenset[str], named: Sequence[Found]) -> str | None:
    """The column named right after a marker ("by team", "по причине визита")."""
    for found in named:
        first = min(found.words)
        if any(stem in markers for stem in stems[max(0, first - 3) : first]):
            return found.label
    return None


async def _grouped_by(
    reading: Reading,
    usable: Sequence[int],
    found: Sequence[Found],
    table: OutlineTable,
    relate: Relate | None,
) -> Found | None:
    """The column a word right after a grouping marker means, when no name was spelt there: the
    text column it is nearest to, by a margin."""
    message, taken = reading.words, {i for item in found for i in item.words}
    after = next(
        (
            index
            for index in usable
            if index not in taken and any(word.stem in _GROUP for word in message[max(0, index - 2) : index])
        ),
        None,
    )
    columns = [
        column.name
        for column in table.columns
        if _typed(column, _TEXT_TYPES) and not _KEY.search(column.name)
    ]
    if after is None or relate is None or len(columns) < 2:
        return None
    scores = await relate([message[after].text], [spoken(name) for name in columns])
    if scores is None:
        return None
    ranked = sorted(zip(scores[0], columns, strict=True), reverse=True)
    return Found(ranked[0][1], (after,), False) if ranked[0][0] - ranked[1][0] >= _VALUE_LEAD else None


def _number_after(message: Sequence[Word], found: Found) -> int | None:
    """A number right after the words naming an id or numeric column ("пользователя 42")."""
    after = max(found.words) + 1
    return int(message[after].text) if after < len(message) and message[after].text.isdigit() else None


async def _idle(
    reading: Reading, left: Sequence[int], place: Place, filtered: Collection[str], relate: Relate | None
) -> tuple[list[int], dict[str, str | int | bool]]:
    """Of the words left, those that may mean a condition — a name ("у Пети"), or a word near by
    meaning to a value or a yes/no column of a column not ``filtered`` yet, nearer than to
    anything else of the table ("stuck" of a status column), but the word that names the table
    where no word spells it ("заказов" of ``orders``) — and of those, the conditions a word
    clearly means ("попугаев" of a ``parrot``). A value written in the word's own script is
    matched by spelling alone. With no model to ask, every word is asked about."""
    table, message = place.table, reading.words
    names = [index for index in left if _capitalised_inside(reading, index)]
    others = [index for index in left if index not in names]
    open_columns = [column for column in table.columns if column.name not in filtered]
    means: dict[str, tuple[str, str | bool]] = {
        value: (column.name, value) for column in open_columns for value in column.values or ()
    }
    means |= {column.name: (column.name, True) for column in open_columns if _typed(column, ("bool",))}
    conditions = list(means)
    if not others or not conditions:
        return names, {}
    labels = [*conditions, table.name]
    labels += [
        column.name for column in table.columns if column.name not in means and not _KEY.search(column.name)
    ]
    scores = (
        await relate([message[i].text for i in others], [spoken(label) for label in labels])
        if relate
        else None
    )
    if scores is None:
        return names + others, {}
    nearest = []
    for index, row in zip(others, scores, strict=True):
        script = cyrillic(message[index].text)
        ranked = sorted(
            (
                (score, label)
                for score, label in zip(row, conditions, strict=False)
                if cyrillic(label) != script
            ),
            reverse=True,
        ) or [(0.0, "")]
        nearest.append((ranked, row[len(conditions)], max(row[len(conditions) + 1 :])))
    naming = None
    if not place.by_name:
        at = max(range(len(others)), key=lambda at: nearest[at][1])
        naming = at if nearest[at][1] >= nearest[at][0][0][0] else None
    asked: list[int] = list(names)
    applied: dict[str, str | int | bool] = {}
    for at, (index, (ranked, named, column)) in enumerate(zip(others, nearest, strict=True)):
        (best, label), second = ranked[0], (ranked[1][0] if len(ranked) > 1 else 0.0)
        if at == naming or best < _CONDITION_AT or best - max(named, column) < _VALUE_LEAD:
            continue
        if best - second >= _VALUE_LEAD and means[label][0] not in applied:
            applied[means[label][0]] = means[label][1]
        else:
            asked.append(index)
    return asked, applied


def _capitalised_inside(reading: Reading, index: int) -> bool:
    """A capital letter inside a sentence, not at its start ("Use the sales table"): a name."""
    word = reading.words[index]
    before = reading.text[: word.start].rstrip()
    return word.text[:1].isupper() and bool(before) and before[-1] not in ".?!:;"


async def _measured(
    table: OutlineTable, numeric: Sequence[str], words: Sequence[str], relate: Relate | None
) -> str | None:
    """The column an aggregate is of: the numeric one the words name, else the table's only
    numeric column that is no key, else the one a word is clearly nearest ("стоимость" of
    ``fee_rub``)."""
    if numeric:
        return numeric[0]
    measures = [
        column.name
        for column in table.columns
        if _typed(column, _NUMBER_TYPES) and not _KEY.search(column.name)
    ]
    if len(measures) < 2 or not words or relate is None:
        return measures[0] if len(measures) == 1 else None
    scores = await relate(words, [spoken(name) for name in measures])
    if scores is None:
        return None
    best = max(((score, at) for row in scores for at, score in enumerate(row)), default=(0.0, 0))
    second = max((score for row in scores for at, score in enumerate(row) if at != best[1]), default=0.0)
    return measures[best[1]] if best[0] - second >= _VALUE_LEAD else None


async def _meant_measure(
    table: OutlineTable, words: Sequence[str], relate: Relate | None
) -> tuple[str, int] | None:
    """The numeric column a word means more than anything else of the table ("выручка",
    "money" of an ``amount``) — what a count by a column, or a ranking, sums instead —, and
    which word."""
    columns = [column for column in table.columns if not _KEY.search(column.name)]
    measures = {column.name for column in columns if _typed(column, _NUMBER_TYPES)}
    if not words or not measures or relate is None:
        return None
    labels = [*(column.name for column in columns), table.name]
    scores = await relate(words, [spoken(label) for label in labels])
    meant = []
    for at, row in enumerate(scores or ()):
        ranked = sorted(zip(row, labels, strict=True), reverse=True)
        score, label = ranked[0]
        other = max((value for value, name in ranked if name not in measures), default=0.0)
        if label in measures and score >= RELATED and score - other >= _VALUE_LEAD:
            meant.append((score, label, at))
    return max(meant)[1:] if meant else None


async def _shaped(
    reading: Reading, question: DataQuestion, place: Place, relate: Relate | None
) -> DataQuestion | Unclear | None:
    """``question`` with what the words add: a fresh one's shape, or an earlier one's changes
    ("а в Самаре?", "and by team"). A word that may name a condition, and plays no part in the
    statement, is asked about: a condition is never dropped."""
    message, table = reading.words, place.table
    stems = {_shape_stem(word) for word in message}
    columns = {column.name: column for column in table.columns}
    held = {
        value: column
        for column in table.columns
        for value in column.values or ()
        if _typed(column, _TEXT_TYPES)
    }
    dated = [name for name, column in columns.items() if _typed(column, _DATE_TYPES)]
    has_period = _period(reading, "") is not None
    # "opened in 2025": with a date, a word that spells a date column is that column first
    dates = await find(message, list(place.usable), dated, None) if has_period else []
    usable = [index for index in place.usable if not any(index in found.words for found in dates)]
    # a value or a column, one pass: spelling first, then meaning (a value when both spell alike)
    found_all = await find(
        message, usable, [*held, *(name for name in columns if name not in held)], relate, by_part=True
    )
    values = [found for found in found_all if found.label in held]
    named = dates + [found for found in found_all if found.label not in held]
    filters: dict[str, str | int | bool] = {held[found.label].name: found.label for found in values}
    # a key is counted by ("how many distinct customers"), never summed or ranked ("vets" spells
    # ``vet_id`` by its part)
    numbers = [found.label for found in named if _typed(columns[found.label], _NUMBER_TYPES)]
    numeric = [name for name in numbers if not _KEY.search(name)]
    texts = [
        found.label for found in named if not _typed(columns[found.label], (*_NUMBER_TYPES, *_DATE_TYPES))
    ]
    grouped = _after([word.stem for word in message], _GROUP, named)
    if grouped is None:  # "в каждом филиале": the word after the marker is a column, the nearest
        found_by = await _grouped_by(reading, usable, found_all, table, relate)
        if found_by is not None:
            named.append(found_by)
            texts.append(found_by.label)
            grouped = found_by.label
    measure = next((shape for shape, words in _SHAPES.items() if stems & words), None)
    if measure == "delete" and all(
        negated(message, i) for i, word in enumerate(message) if word.stem in _SHAPES["delete"]
    ):
        measure = None  # "не удаляй": nothing deleted
    unread = [i for i in usable if not any(i in found.words for found in found_all)]
    spare = [message[i].text for i in unread]
    ranked = bool(stems & (_DESCENDING | _ASCENDING))
    summed = None
    computed = measure == "count" and not stems & (_SHAPES["count"] - _COMPUTE)
    # a measure by meaning of a table the words spell: else the word meaning the table may be it
    if not numeric and (
        measure in ("avg", "sum", "max", "min")
        or (measure is None and (grouped or ranked))
        or (computed and place.by_name)
    ):
        summed = await _meant_measure(table, spare, relate)
        numeric = [summed[0]] if summed else []
    if (computed or (measure is None and grouped)) and any(name != grouped for name in numeric):
        measure = "sum"  # "amount per region", "посчитай часы по командам"
        numeric = [name for name in numeric if name != grouped]
    if measure in ("avg", "sum", "max", "min"):
        measured = await _measured(table, numeric, spare, relate)
    else:
        measured = next(iter(texts or numbers), None) if measure == "distinct" else None
    if measure in ("avg", "sum", "max", "min", "distinct") and measured is None:
        # of which column: asked, never an aggregate of nothing
        said = tuple(word.text for word in message if _shape_stem(word) in _SHAPES[measure])
        return Unclear(table.name, said, columns=tuple(columns))
    limit = next(
        (int(word.text) for word in message if word.text.isdigit() and not 1900 <= int(word.text) <= 2100),
        None,
    )
    for found in named:
        number = _number_after(message, found)
        if number is not None and found.label in numbers:  # "user 42": a filter, not a limit
            filters[found.label], limit = number, None if limit == number else limit
        elif "bool" in (columns[found.label].type or "").lower() and found.label != grouped:
            filters[found.label] = not negated(message, found.words[0])  # "neutered pets"
    if ranked and measure is None:
        by_text = next((name for name in texts if name not in filters), None)
        if numeric and by_text:  # "top 3 teams by hours spent": a sum by the text column
            measure, measured, grouped, limit = "sum", numeric[0], by_text, limit or 1
        elif numeric or (grouped and grouped in numeric):
            measure, measured, grouped = "top", (grouped if grouped in numeric else numeric[0]), None
        elif by_text or grouped:  # "which team has the most tickets"
            measure, grouped, limit = "count", grouped or by_text, limit or 1
    if measure is None and (stems & (_ROWS | _LATEST) or limit or ranked):
        measure, measured = "rows", (dated[0] if stems & _LATEST and dated else next(iter(numeric), None))
    played = {grouped, measured, *filters, *(found.label for found in dates[:1])}
    idle = [
        i
        for found in named
        if found.label not in played
        and _typed(columns[found.label], _NUMBER_TYPES)
        and _number_after(message, found) is not None
        for i in found.words
    ]  # "amount 100": a comparison not read
    left = [i for i in unread if not (summed and i == unread[summed[1]])]
    asked, meant = await _idle(reading, left, place, filters.keys(), relate)
    filters |= meant
    if idle or asked:
        words = tuple(message[i].text for i in sorted({*idle, *asked}))
        return Unclear(table.name, words, columns=tuple(columns))
    fresh = question.model_fields_set == {"database_id", "backend", "schema_name", "table"}
    if fresh and measure is None and not (grouped or filters or has_period):
        return None  # a table named, nothing asked of its data ("what columns does it have?")
    kept_group = question.group_by if measure is None else None
    if measure is None and not grouped:  # a change of an earlier question keeps what it asked
        measure, measured = question.measure, question.column
    period = _period(reading, dates[0].label if dates else next(iter(dated), None))
    return question.model_copy(
        update={
            "measure": measure or "count",
            "column": measured,
            "group_by": grouped or kept_group,
            "filters": tuple({**dict(question.filters), **filters}.items()),
            "period": period or question.period,
            "descending": not (stems & _ASCENDING),
            "limit": (limit or (5 if measure == "top" else DEFAULT_ROWS))
            if measure in ("top", "rows")
            else limit,
        }
    )
