"""A follow-up that changes the last query instead of asking a new one: naming another status
swaps the one a count filters on ("а closed?" after "… в статусе open"), "by <column>" groups the
count. Only a single plain SELECT is changed; anything else is left to be asked again in full."""

from collections.abc import Mapping, Sequence

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from sstools.agent.planner.reading import GROUP_BY, column_of, conditions_in, value_words, values_held

# A follow-up that swaps a value is short: "а closed?", "what about the urgent ones?"
_SWAP_WORDS = 6


def _column_compared(condition: exp.Expr) -> str | None:
    if isinstance(condition, exp.EQ) and isinstance(condition.left, exp.Column):
        return condition.left.name.lower()
    return None


def _with_condition(query: exp.Select, condition: exp.Expr) -> exp.Select:
    """``condition`` in place of one on the same column, else added to the WHERE."""
    column = _column_compared(condition)
    where = query.args.get("where")
    if where is not None:
        for compared in where.find_all(exp.EQ):
            if column is not None and _column_compared(compared) == column:
                compared.replace(condition)
                return query
    return query.where(condition, copy=False)


def _with_value(query: exp.Select, value: str) -> exp.Select:
    """The one text value the query filters on, swapped for ``value``."""
    where = query.args.get("where")
    compared = [
        condition
        for condition in (where.find_all(exp.EQ) if where is not None else [])
        if isinstance(condition.right, exp.Literal) and condition.right.is_string
    ]
    if len(compared) == 1:
        compared[0].set("expression", exp.Literal.string(value))
    return query


def refined(sql: str, words: str, held: Mapping[str, Sequence[str]] | None = None) -> str | None:
    """``sql`` as the follow-up ``words`` change it, or None when they change nothing in it (or it
    is not one plain SELECT); ``held``: the values the table's text columns hold, when read."""
    try:
        query = sqlglot.parse_one(sql)
    except SqlglotError:
        return None
    if not isinstance(query, exp.Select) or query.args.get("joins") or query.find(exp.Subquery):
        return None
    before = query.sql()
    conditions = conditions_in(words) + values_held(words, held or {})
    for condition in conditions:
        query = _with_condition(query, exp.condition(condition))
    values = value_words(words)
    if not conditions and values and len(words.split()) <= _SWAP_WORDS and not GROUP_BY.search(words):
        query = _with_value(query, values[0])
    if (grouping := GROUP_BY.search(words)) is not None:
        column = column_of(grouping.group(1))
        table = query.find(exp.Table)
        already = {expression.name.lower() for expression in query.args.get("group") or []}
        counts = query.find(exp.AggFunc) is not None  # rows are grouped only to count or sum them
        if counts and column not in ("id", *already) and table is not None and column != table.name.lower():
            query.set("expressions", [exp.column(column), *query.expressions])
            query = query.group_by(column, copy=False)
    after = query.sql()
    return after if after != before else None
