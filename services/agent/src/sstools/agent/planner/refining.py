"""A follow-up that changes the last query instead of asking a new one: naming another status
swaps the one a count filters on, "by <column>" groups the count. Only a
single plain SELECT is changed; anything else is left to be asked again in full."""

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from sstools.agent.planner.reading import GROUP_BY, column_of, conditions_in


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


def refined(sql: str, words: str) -> str | None:
    """``sql`` as the follow-up ``words`` change it, or None when they change nothing in it (or it
    is not one plain SELECT)."""
    try:
        query = sqlglot.parse_one(sql)
    except SqlglotError:
        return None
    if not isinstance(query, exp.Select) or query.args.get("joins") or query.find(exp.Subquery):
        return None
    before = query.sql()
    for condition in conditions_in(words):
        query = _with_condition(query, exp.condition(condition))
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
