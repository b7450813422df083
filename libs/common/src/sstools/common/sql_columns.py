"""Qualified names that PostgreSQL may read as a function call: attribute notation.

PostgreSQL reads ``t.f`` as the column ``f`` of the relation ``t`` when ``t`` has one, and
otherwise as the call ``f(t)`` of any function over ``t``'s row type; ``(expr).f`` is the same
for any composite value. The parser sees a column either way, so a function no allow-list
judged would run inside a "read". So, for PostgreSQL:

- a field selection on an expression (``(t).f``, ``(t.*).f``, ``(row).f``, a name of five
  parts) is not judged a read at all: :func:`qualified_names` answers a reason for it;
- a qualified name must name a relation of the query (in its own or an enclosing scope); one
  whose relation cannot be found, or names a catalog, is not a read either;
- a name over a derived table, a CTE, ``VALUES`` or a set-returning function must be among the
  columns the query itself gives it (its alias's column list, its select list, the known output
  of the function);
- a name over a stored table or view (directly, or through a derived table's ``*``) is a
  :class:`ColumnNeed`: the caller, which can ask the database for that table's columns, judges
  the statement a read only when the name is one of them.

Identifiers are compared as PostgreSQL resolves them: unquoted ones folded to lower case.
"""

from collections.abc import Sequence
from dataclasses import dataclass

from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.optimizer.normalize_identifiers import normalize_identifiers
from sqlglot.optimizer.scope import Scope, traverse_scope


@dataclass(frozen=True)
class TableRef:
    """A stored table or view as a query names it, with its alias's column list, which renames
    the table's first columns."""

    schema: str | None
    name: str
    renamed: tuple[str, ...] = ()

    def visible(self, columns: Sequence[str]) -> frozenset[str]:
        """The names the query sees, given the table's columns in order."""
        return frozenset((*self.renamed, *columns[len(self.renamed) :]))


@dataclass(frozen=True)
class ColumnNeed:
    """``reference`` is a column only if ``name`` is a column of one of ``tables``; otherwise
    PostgreSQL would call the function ``name`` over the row."""

    reference: str
    name: str
    tables: tuple[TableRef, ...]


@dataclass(frozen=True)
class QualifiedNames:
    reasons: list[str]  # why the statement is not a read, whatever the tables hold
    needs: list[ColumnNeed]  # names to find among stored tables' columns


# Set-returning functions of the allow-list whose output columns are fixed; any other function
# in FROM must be given a column list (``AS g(day)``), or one column named like its alias.
_RECORD_OUTPUTS = {
    name: ("key", "value") for name in ("json_each", "jsonb_each", "json_each_text", "jsonb_each_text")
}

# True: the name is the query's own; a tuple: it is a column when one of these tables has it.
_Presence = bool | tuple[TableRef, ...]


def _alias_columns(node: exp.Expr) -> tuple[str, ...]:
    alias = node.args.get("alias")
    if isinstance(alias, exp.TableAlias):
        return tuple(column.name for column in alias.columns)
    return ()


def _function_outputs(function: exp.Func, holder: exp.Expr) -> tuple[str, ...]:
    """The columns a function in FROM gives, by their names in the query."""
    renamed = _alias_columns(holder)
    if renamed:
        return renamed
    # sqlglot types none of these; lower case, as a quoted name in another case is another
    # function, which no allow-list has
    if isinstance(function, exp.Anonymous) and function.name.lower() in _RECORD_OUTPUTS:
        return _RECORD_OUTPUTS[function.name.lower()]
    # a function returning one value names its column after its alias (an unaliased function
    # is no relation a qualifier finds here: sqlglot names it "")
    alias = holder.args.get("alias")
    return (alias.name,) if isinstance(alias, exp.TableAlias) else ()


def _in_table(table: exp.Table, name: str) -> _Presence:
    if isinstance(table.this, exp.Func):  # a function in FROM
        return name in _function_outputs(table.this, table)
    if isinstance(table.this, exp.Identifier):
        return (TableRef(table.db or None, table.name, _alias_columns(table)),)
    return False


class _Columns:
    """Which columns each relation of one query has, as far as the query itself tells."""

    def __init__(self, scopes: dict[int, Scope]) -> None:
        self._scopes = scopes  # by id() of the expression that opens each scope

    def of_source(self, source: exp.Table | Scope, name: str) -> _Presence:
        if isinstance(source, exp.Table):
            return _in_table(source, name)
        return self._of_query(source.expression, name)

    def _of_query(self, query: exp.Expr, name: str) -> _Presence:
        """Whether a derived table, CTE, LATERAL, UNNEST or VALUES list has the column ``name``:
        its holder's column list first, then its select list and its stars."""
        holder = query.parent if isinstance(query.parent, (exp.Subquery, exp.CTE)) else query
        renamed = _alias_columns(holder)
        if renamed:
            return name in renamed
        if isinstance(query, exp.Lateral) and isinstance(query.this, exp.Subquery):
            return self._of_query(query.this.unnest(), name)
        if isinstance(query, exp.Lateral) and isinstance(query.this, exp.Func):
            return name in _function_outputs(query.this, query)
        if isinstance(query, exp.Unnest):
            return name in _function_outputs(query, query)
        while isinstance(query, exp.SetOperation):  # its columns are its first query's
            query = query.left
        if not isinstance(query, exp.Select):
            return False
        if name in query.named_selects:
            return True
        scope = self._scopes.get(id(query))
        found: tuple[TableRef, ...] = ()
        for source in self._starred(query, scope):
            presence = self.of_source(source, name)
            if presence is True:
                return True
            if isinstance(presence, tuple):
                found += presence
        return found or False

    def _starred(self, query: exp.Select, scope: Scope | None) -> list[exp.Table | Scope]:
        """The relations a select list's stars (``*``, ``t.*``) take every column of."""
        if scope is None:
            return []
        starred: list[exp.Table | Scope] = []
        for projection in query.expressions:
            if isinstance(projection, exp.Star):
                starred.extend(source for _, source in scope.selected_sources.values())
            elif isinstance(projection, exp.Column) and isinstance(projection.this, exp.Star):
                starred.extend([scope.sources[projection.table]] if projection.table in scope.sources else [])
        return starred

    def judge(self, column: exp.Column) -> str | ColumnNeed | None:
        """A reason, a need, or None for a name that is the query's own column."""
        written = column.sql()
        if column.args.get("catalog"):
            return f"qualified_name:{written}"
        source = _source(_enclosing(column, self._scopes), column.table)
        # schema.table.name names only an unaliased table of that schema
        in_schema = isinstance(source, exp.Table) and source.db == column.db and not source.alias
        if source is None or (column.db and not in_schema):
            return f"unresolved:{written}"
        presence = self.of_source(source, column.name)
        if presence is True:
            return None
        if presence is False:
            return f"not_a_column:{written}"
        return ColumnNeed(written, column.name, presence)


def _source(scope: Scope | None, qualifier: str) -> exp.Table | Scope | None:
    while scope is not None:
        if qualifier in scope.sources:
            found: exp.Table | Scope = scope.sources[qualifier]
            return found
        scope = scope.parent
    return None


def _enclosing(node: exp.Expr, scopes: dict[int, Scope]) -> Scope | None:
    parent = node.parent
    while parent is not None and id(parent) not in scopes:
        parent = parent.parent
    return scopes.get(id(parent))


def _qualified(column: exp.Column) -> bool:
    return bool(column.table) and not isinstance(column.this, exp.Star)


def qualified_names(tree: exp.Expr) -> QualifiedNames:
    """What PostgreSQL could read as a function call in ``tree`` (a parsed query)."""
    tree = normalize_identifiers(tree.copy(), dialect="postgres")
    reasons: list[str] = []
    needs: list[ColumnNeed] = []
    for dot in tree.find_all(exp.Dot):
        if not isinstance(dot.expression, exp.Func):  # schema.function(...) is judged by name
            reasons.append(f"field_selection:{dot.sql(dialect='postgres')}")
    try:
        columns = _Columns({id(scope.expression): scope for scope in traverse_scope(tree)})
        judged = [columns.judge(column) for column in tree.find_all(exp.Column) if _qualified(column)]
    except (SqlglotError, RecursionError):  # sqlglot's scopes do not hold (an alias used twice)
        return QualifiedNames([*reasons, "unresolved_names"], [])
    reasons.extend(reason for reason in judged if isinstance(reason, str))
    needs.extend(need for need in judged if isinstance(need, ColumnNeed))
    return QualifiedNames(list(dict.fromkeys(reasons)), list(dict.fromkeys(needs)))
