"""SQL, read locally with sqlglot: what a statement does, and how it reads when formatted.

Only one statement that reads and changes nothing counts as read-only; several statements,
DML, DDL, row locks (SELECT ... FOR UPDATE), data-changing CTEs and anything sqlglot cannot
parse count as changing something, which makes SQL execution dangerous and admin-only.
"""

from dataclasses import dataclass

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError

_CHANGING = (
    exp.Insert,
    exp.Update,
    exp.Delete,
    exp.Merge,
    exp.Create,
    exp.Drop,
    exp.Alter,
    exp.Command,
    exp.TruncateTable,
    exp.Lock,
)


class SqlNotParsed(ValueError):
    """The text is not SQL this service can read."""


@dataclass(frozen=True)
class SqlShape:
    statements: int
    read_only: bool
    kinds: list[str]


def _parse(sql: str, dialect: str) -> list[exp.Expr]:
    try:
        trees = [tree for tree in sqlglot.parse(sql, read=dialect) if tree is not None]
    except (ParseError, ValueError) as error:
        raise SqlNotParsed(f"not valid {dialect} SQL: {error!s:.200}") from None
    if not trees:
        raise SqlNotParsed("no SQL statement given")
    return trees


def classify(sql: str, dialect: str = "postgres") -> SqlShape:
    try:
        trees = _parse(sql, dialect)
    except SqlNotParsed:
        return SqlShape(statements=0, read_only=False, kinds=["unparsed"])
    kinds = [type(tree).__name__.lower() for tree in trees]
    single_query = len(trees) == 1 and isinstance(trees[0], exp.Query)
    changes = any(tree.find(*_CHANGING) is not None for tree in trees)
    locks = any(tree.args.get("locks") for tree in trees)
    return SqlShape(len(trees), single_query and not changes and not locks, kinds)


def format_sql(sql: str, dialect: str = "postgres") -> str:
    """The statements pretty-printed, one after another; ``SqlNotParsed`` for what is not SQL."""
    trees = _parse(sql, dialect)
    return ";\n\n".join(tree.sql(dialect=dialect, pretty=True) for tree in trees)
