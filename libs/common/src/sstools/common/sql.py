"""SQL, read locally with sqlglot in the target database's own dialect: what a statement does,
how it reads when formatted, and the text that is actually sent.

Deny by default. A statement is read-only only when it is exactly one query with no INTO, no
locking clause, no DML, DDL or other statement anywhere in it (CTEs and subqueries included),
no executable comment (MySQL's ``/*! */``), and every function it calls is on the dialect's
allow-list of side-effect-free functions. Unknown, schema-qualified and user-defined functions,
several statements and anything that does not parse count as changing something. A read is
also bounded: the functions that build a value or a series of a size they are given
(``repeat``, ``lpad``, ``zeroblob``, ``generate_series``, ...) must be given it as numeric
literals, and all of them together may build at most :data:`MAX_BUILT` characters or rows.
On PostgreSQL a qualified name must be a column, not a function over a row
(:mod:`sstools.common.sql_columns`): the caller finds the ones only stored tables can answer.

The judgement holds only if the database runs what was judged, so callers never send the text
they were given: :func:`render` prints the parsed statement again in the same dialect, without
comments, and refuses when the printed text would not parse back into the very same statement.
The parser and the database then cannot disagree about strings, comments or how many
statements there are.
"""

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

import sqlglot
from sqlglot import exp
from sqlglot.errors import ErrorLevel, SqlglotError

from sstools.common.sql_columns import ColumnNeed, qualified_names


class SqlNotParsed(ValueError):
    """The text is not SQL this service can read (or print again faithfully) in that dialect."""


@dataclass(frozen=True)
class SqlShape:
    statements: int
    read_only: bool
    kinds: list[str]
    # Why it is not read-only: "several_statements", "into", "lock", "dml", "ddl",
    # "statement:<kind>", "function:<name>", "unbounded:<name>", "too_large",
    # "executable_comment", "not_a_query", "unparsed"; on PostgreSQL, for a name it could read
    # as a function call (sstools.common.sql_columns): "field_selection:<expr>",
    # "unresolved:<name>", "qualified_name:<name>", "not_a_column:<name>".
    reasons: list[str] = field(default_factory=list)
    # PostgreSQL: the qualified names a read holds that are columns only if the stored tables
    # have them; the statement is a read only once each is found (sstools.ops checks).
    column_needs: list[ColumnNeed] = field(default_factory=list)


# Superset's `backend` (the SQLAlchemy URL's) → the sqlglot dialect that reads its SQL. Only
# backends whose SQL really is that dialect; any other backend has no dialect here, so nothing
# sent to it counts as read-only.
_BACKEND_DIALECTS = {
    "postgresql": "postgres",
    "sqlite": "sqlite",
    "mysql": "mysql",
    "mariadb": "mysql",
    "mssql": "tsql",
    "oracle": "oracle",
    "redshift": "redshift",
    "snowflake": "snowflake",
    "bigquery": "bigquery",
    "trino": "trino",
    "presto": "presto",
    "clickhouse": "clickhouse",
    "clickhousedb": "clickhouse",
    "duckdb": "duckdb",
    "databricks": "databricks",
    "hive": "hive",
    "spark": "spark",
    "awsathena": "athena",
    "starrocks": "starrocks",
    "teradatasql": "teradata",
}


def dialect_for_backend(backend: str | None) -> str | None:
    """The sqlglot dialect of a Superset database backend; None when it is not one we know."""
    return _BACKEND_DIALECTS.get((backend or "").lower())


# Functions sqlglot knows by type, that read and compute only, whatever the dialect: their
# meaning is fixed by sqlglot, which prints each one in the target's own spelling.
_PURE_TYPED: tuple[type[exp.Func], ...] = (
    # operators sqlglot models as functions
    exp.And, exp.Or, exp.Xor, exp.Exists, exp.Collate, exp.Array, exp.ArrayContains,
    exp.ArrayContainsAll, exp.ArrayContainedBy, exp.ArrayOverlaps, exp.JSONBExtract,
    exp.JSONBExtractScalar, exp.JSONBContains, exp.JSONBContainsTopKey,
    exp.JSONBContainsAnyTopKeys, exp.JSONBContainsAllTopKeys, exp.RegexpILike,
    exp.RegexpFullMatch,
    # aggregates
    exp.Count, exp.CountIf, exp.Sum, exp.Avg, exp.Min, exp.Max, exp.Stddev, exp.StddevPop,
    exp.StddevSamp, exp.Variance, exp.VariancePop, exp.Corr, exp.CovarPop, exp.CovarSamp,
    exp.PercentileCont, exp.PercentileDisc, exp.Median, exp.Quantile, exp.ApproxQuantile,
    exp.ArrayAgg, exp.GroupConcat, exp.LogicalAnd, exp.LogicalOr, exp.AnyValue,
    exp.ApproxDistinct, exp.First, exp.Last,
    # window functions
    exp.RowNumber, exp.Rank, exp.DenseRank, exp.PercentRank, exp.CumeDist, exp.Ntile, exp.Lag,
    exp.Lead, exp.FirstValue, exp.LastValue, exp.NthValue,
    # conditionals and casts
    exp.Case, exp.If, exp.Cast, exp.TryCast, exp.Coalesce, exp.Nullif, exp.Greatest, exp.Least,
    # math
    exp.Abs, exp.Ceil, exp.Floor, exp.Round, exp.Trunc, exp.Sqrt, exp.Pow, exp.Exp, exp.Ln,
    exp.Log, exp.Sign, exp.Pi, exp.Rand,
    # strings
    exp.Lower, exp.Upper, exp.Length, exp.Substring, exp.SubstringIndex, exp.Trim, exp.Concat,
    exp.ConcatWs, exp.Left, exp.Right, exp.Pad, exp.Replace, exp.StrPosition, exp.Initcap,
    exp.Reverse, exp.Repeat, exp.Space, exp.SplitPart, exp.RegexpReplace, exp.RegexpLike,
    exp.RegexpExtract, exp.MD5, exp.SHA2, exp.Ascii, exp.Chr, exp.Unicode, exp.Hex, exp.Typeof,
    exp.Levenshtein, exp.NumberToStr, exp.ToChar, exp.ToNumber, exp.Overlay, exp.Format,
    # dates and times
    exp.CurrentDate, exp.CurrentTimestamp, exp.CurrentTime, exp.Localtimestamp, exp.Extract, exp.DateTrunc,
    exp.TimestampTrunc, exp.DateAdd, exp.DateSub, exp.DateDiff, exp.TimestampAdd,
    exp.TimestampDiff, exp.TimeToStr, exp.StrToTime, exp.StrToDate, exp.TimeStrToTime,
    exp.TsOrDsToTimestamp, exp.TsOrDsToDate, exp.Date, exp.Datetime, exp.Time, exp.Timestamp,
    exp.DateFromParts, exp.Year, exp.Quarter, exp.Month, exp.Week, exp.Day, exp.DayOfWeek,
    exp.DayOfMonth, exp.DayOfYear, exp.LastDay, exp.UnixToTime, exp.TimeToUnix, exp.StrToUnix,
    # JSON and arrays
    exp.JSONExtract, exp.JSONExtractScalar, exp.ArraySize, exp.Unnest, exp.Explode,
    exp.GenerateSeries, exp.ExplodingGenerateSeries,
)  # fmt: skip

# Functions sqlglot does not type (they come out as `exp.Anonymous`), per dialect, by the name
# the database resolves: built-ins that read and compute only. Deliberately absent: anything
# that writes, locks, sleeps, signals, touches files, sequences, large objects, settings or other
# connections (nextval, setval, pg_sleep, pg_terminate_backend, lo_import, dblink_exec,
# set_config, txid_current, pg_advisory_lock, load_extension, sleep, get_lock, load_file, ...).


# Functions whose result is as large as an argument says: each maps a node to the size it builds
# (characters, bytes or rows), or None when that size is not a literal the parser can read.
# A read may build at most this much in all, its sizes multiplied (a series of repeats, a repeat
# of a repeat): enough for a calendar or a padded column, not for a gigabyte in the server.
MAX_BUILT = 10_000_000


def _literal_number(node: exp.Expr | None) -> float | None:
    if isinstance(node, exp.Neg):
        inner = _literal_number(node.this)
        return None if inner is None else -inner
    if isinstance(node, exp.Literal) and not node.is_string:
        try:
            return float(str(node.this))
        except ValueError:  # a form Python does not read (0x1F): not a size we can bound
            return None
    return None


# A month and a year at their shortest: a series by months has at most this many rows.
_SECONDS = {"SECOND": 1, "MINUTE": 60, "HOUR": 3600, "DAY": 86_400, "WEEK": 604_800, "MONTH": 2_419_200}
_SECONDS |= {"YEAR": 31_536_000}
_INSTANTS = (exp.DataType.Type.DATE, exp.DataType.Type.TIMESTAMP)


def _literal_instant(node: exp.Expr | None) -> datetime | None:
    """A ``timestamp '...'`` or ``date '...'`` literal (its offset, if any, dropped)."""
    literal = node.this if isinstance(node, exp.Cast) and node.to.is_type(*_INSTANTS) else None
    if not isinstance(literal, exp.Literal):
        return None
    try:
        return datetime.fromisoformat(str(literal.this)).replace(tzinfo=None)
    except ValueError:
        return None


def _literal_interval(node: exp.Expr | None) -> float | None:
    """An ``interval '1 day'`` literal in seconds."""
    if not isinstance(node, exp.Interval):
        return None
    unit = node.args.get("unit")
    seconds = _SECONDS.get(str(unit.this).upper().removesuffix("S")) if unit is not None else None
    count = _literal_number(exp.Literal.number(node.this.this)) if node.this.is_string else None
    return None if seconds is None or count is None else count * seconds


def _series_rows(node: exp.Func) -> float | None:
    """How many rows a series of literal numbers, or of literal instants by a literal interval,
    has; None for any other."""
    first, last, step = node.args.get("start"), node.args.get("end"), node.args.get("step")
    start, end = _literal_number(first), _literal_number(last)
    if start is not None and end is not None:
        every = _literal_number(step) if step is not None else 1.0
        return (end - start) / every + 1 if every else None
    since, until, interval = _literal_instant(first), _literal_instant(last), _literal_interval(step)
    if since is None or until is None or not interval:
        return None
    return (until - since).total_seconds() / interval + 1


_SIZED_TYPED: dict[type[exp.Func], Callable[[exp.Func], float | None]] = {
    exp.Repeat: lambda node: _literal_number(node.args.get("times")),
    exp.Space: lambda node: _literal_number(node.this),
    exp.Pad: lambda node: _literal_number(node.expression),
    exp.GenerateSeries: _series_rows,
    exp.ExplodingGenerateSeries: _series_rows,
}


def _first_argument_size(node: exp.Func) -> float | None:
    return _literal_number(node.expressions[0]) if node.expressions else None


_SIZED_NAMED: dict[str, Callable[[exp.Func], float | None]] = {
    "zeroblob": _first_argument_size,
    "randomblob": _first_argument_size,
}


def _sizer(node: exp.Func) -> Callable[[exp.Func], float | None] | None:
    """How to read the size a function builds, for one that builds a value of a given size."""
    typed = next((size for kind, size in _SIZED_TYPED.items() if isinstance(node, kind)), None)
    return typed or _SIZED_NAMED.get(_function_name(node))


def _names(text: str) -> frozenset[str]:
    return frozenset(text.split())


_PURE_NAMED = {
    "postgres": _names(
        """
        age date_part date_bin make_date make_time make_timestamp make_interval justify_days
        justify_hours justify_interval isfinite to_date to_timestamp clock_timestamp
        statement_timestamp transaction_timestamp char_length character_length octet_length
        bit_length btrim ltrim rtrim lpad rpad strpos overlay format quote_ident quote_literal
        quote_nullable string_to_array array_to_string regexp_match regexp_matches
        regexp_split_to_array regexp_split_to_table regexp_count regexp_instr regexp_substr
        translate to_hex encode decode sha224 sha256 sha384 sha512 starts_with array_length
        array_position array_positions array_lower array_upper array_ndims array_dims cardinality
        generate_subscripts string_agg bool_and bool_or every bit_and bit_or mode regr_slope
        regr_intercept regr_r2 regr_count var_pop var_samp stddev_pop stddev_samp json_agg
        jsonb_agg json_object_agg jsonb_object_agg json_build_object jsonb_build_object
        json_build_array jsonb_build_array to_json to_jsonb row_to_json array_to_json
        json_array_length jsonb_array_length json_extract_path jsonb_extract_path
        json_extract_path_text jsonb_extract_path_text json_typeof jsonb_typeof
        json_array_elements jsonb_array_elements json_array_elements_text
        jsonb_array_elements_text json_each jsonb_each json_each_text jsonb_each_text
        json_object_keys jsonb_object_keys jsonb_pretty width_bucket div mod gcd lcm factorial
        degrees radians sin cos tan asin acos atan atan2 cot cbrt log10 ceiling power trim_scale
        scale num_nonnulls num_nulls random row all
        """
    ),
    "sqlite": _names(
        """
        julianday unixepoch datetime date time strftime timediff printf format total instr
        substr ifnull iif likely unlikely likelihood quote char unicode octet_length ltrim rtrim
        sign random randomblob zeroblob glob like soundex json json_extract json_array
        json_object json_array_length json_type json_valid json_quote json_group_array
        json_group_object acos asin atan atan2 ceiling cos degrees log10 log2 mod pow power
        radians sin sqrt tan string_agg
        """
    ),
    "mysql": _names(
        """
        date_format str_to_date adddate subdate timestampadd timestampdiff dayname monthname
        dayofmonth weekday weekofyear yearweek hour minute second microsecond to_days from_days
        makedate maketime period_add period_diff unix_timestamp from_unixtime curdate curtime
        now utc_date utc_timestamp sec_to_time time_to_sec time_format convert_tz ifnull
        char_length character_length locate instr lcase ucase mid ltrim rtrim lpad rpad strcmp
        field elt find_in_set conv bin oct crc32 sha1 truncate mod ceiling power log10 log2
        degrees radians sin cos tan asin acos atan atan2 cot json_extract json_unquote
        json_object json_array json_length json_keys json_contains json_type json_valid
        std bit_and bit_or bit_xor
        """
    ),
}


def _node_types_beside(kind: type[exp.Expression]) -> tuple[type[exp.Expression], ...]:
    """Every expression type sqlglot declares in the same module as ``kind``."""
    types = (other for other in vars(exp).values() if isinstance(other, type))
    expressions = (other for other in types if issubclass(other, exp.Expression))
    return tuple(other for other in expressions if other.__module__ == kind.__module__)


# Whole statements, or clauses that change something, wherever they sit in the tree: every
# DML and DDL node type sqlglot has (so a new one is refused too), and the rest by name.
_DML = _node_types_beside(exp.Insert)
_DDL = (exp.Create, exp.Drop, exp.Alter, exp.TruncateTable)
_STATEMENTS = (
    *_node_types_beside(exp.Create),
    exp.Analyze, exp.Grant, exp.Revoke, exp.Block, exp.IfBlock, exp.LoopBlock, exp.WhileBlock,
    exp.RepeatBlock, exp.StoredProcedure, exp.Put, exp.Get, exp.MultitableInserts,
    exp.ConditionalInsert, exp.AddPartition, exp.DropPartition, exp.ReplacePartition, exp.Cache,
    exp.Uncache, exp.Refresh, exp.PropertyEQ, exp.Operator,
)  # fmt: skip
_LOCKS = (exp.Lock, exp.LockingStatement)
# MySQL and MariaDB run what is inside /*! ... */ and /*M! ... */ as SQL.
# Jinja markers: where Superset's template processing is on, SQL Lab renders them after ops
# judged the text, so "{{ ... }}" could become a quote that ends the string, then a write.
_TEMPLATE = re.compile(r"\{[{%#]")
_EXECUTABLE_COMMENT = re.compile(r"/\*M?!")


def allowed_functions(dialect: str) -> frozenset[str]:
    """The names of the functions a read-only statement may call in ``dialect``."""
    typed = frozenset(str(kind.sql_name()).lower() for kind in _PURE_TYPED)
    return typed | _PURE_NAMED.get(dialect, frozenset())


def _parse(sql: str, dialect: str) -> list[exp.Expr]:
    try:
        parsed = sqlglot.parse(sql, read=dialect)
    except (SqlglotError, ValueError, RecursionError) as error:
        raise SqlNotParsed(f"not valid {dialect} SQL: {error!s:.200}") from None
    # Empty statements (";;", a comment after the last ";") hold nothing to run.
    trees = [tree for tree in parsed if tree is not None and not isinstance(tree, exp.Semicolon)]
    if not trees:
        raise SqlNotParsed("no SQL statement given")
    return trees


def _rendered(trees: list[exp.Expr], dialect: str) -> str:
    try:
        # Function names keep their case: "pg_sleep" quoted and upper-cased names another function.
        text = ";\n".join(
            tree.sql(
                dialect=dialect,
                comments=False,
                normalize_functions=False,
                unsupported_level=ErrorLevel.RAISE,
            )
            for tree in trees
        )
    except (SqlglotError, RecursionError) as error:
        raise SqlNotParsed(f"cannot be written as {dialect} SQL: {error!s:.200}") from None
    if _parse(text, dialect) != trees:
        raise SqlNotParsed(f"the statement does not read back the same once written as {dialect} SQL")
    return text


def render(sql: str, dialect: str) -> str:
    """The statement(s) the parser read, written again in ``dialect`` without comments: the only
    text ever sent to a database. ``SqlNotParsed`` when it does not parse, or would not read back
    as the same statement."""
    return _rendered(_parse(sql, dialect), dialect)


def _function_name(node: exp.Func) -> str:
    """The name the database resolves: an unquoted name folded to lower case, a quoted one as
    written, a schema-qualified one with its qualifier (so it is never on an allow-list)."""
    if isinstance(node, (exp.Anonymous, exp.AnonymousAggFunc)):
        this = node.this
        if isinstance(this, exp.Identifier):
            name = str(this.this) if this.quoted else str(this.this).lower()
        else:
            name = str(this).lower()
    else:
        name = str(node.sql_name()).lower()
    parent = node.parent
    if isinstance(parent, exp.Dot) and parent.expression is node:
        return f"{parent.this.sql()}.{name}"
    return name


def _node_reason(node: exp.Expr, allowed: frozenset[str]) -> str | None:
    if isinstance(node, exp.Into):
        return "into"
    if isinstance(node, _LOCKS):
        return "lock"
    if isinstance(node, _DML):
        return "dml"
    if isinstance(node, _DDL):
        return "ddl"
    if isinstance(node, _STATEMENTS):
        return f"statement:{node.key}"
    if isinstance(node, exp.Func):
        name = _function_name(node)
        return None if name in allowed else f"function:{name}"
    return None


def _reasons(tree: exp.Expr, allowed: frozenset[str]) -> list[str]:
    reasons = []
    built = 1.0  # what the sized functions build, multiplied (a series of repeats)
    for node in tree.walk():
        reason = _node_reason(node, allowed)
        if reason is None and isinstance(node, exp.Func) and (sizer := _sizer(node)) is not None:
            size = sizer(node)
            reason = f"unbounded:{_function_name(node)}" if size is None else None
            built *= max(size or 1.0, 1.0)
        if reason is not None:
            reasons.append(reason)
    if built > MAX_BUILT:
        reasons.append("too_large")
    if not reasons and not isinstance(tree, exp.Query):
        reasons.append("not_a_query")
    return reasons


def classify(sql: str, dialect: str = "postgres") -> SqlShape:
    """What the statement does, judged in ``dialect``; read-only only when nothing says otherwise."""
    try:
        trees = _parse(sql, dialect)
        _rendered(trees, dialect)  # what cannot be sent faithfully cannot run at all
    except SqlNotParsed:
        return SqlShape(statements=0, read_only=False, kinds=["unparsed"], reasons=["unparsed"])
    reasons: list[str] = []
    if len(trees) > 1:
        reasons.append("several_statements")
    if _EXECUTABLE_COMMENT.search(sql):
        reasons.append("executable_comment")
    if _TEMPLATE.search(sql):  # Superset's Jinja may rewrite it after this judgement
        reasons.append("template")
    if dialect not in _PURE_NAMED:  # no allow-list of this dialect's own functions: deny
        reasons.append("dialect_not_vetted")
    allowed = allowed_functions(dialect)
    needs: list[ColumnNeed] = []
    for tree in trees:
        reasons.extend(_reasons(tree, allowed))
        if dialect == "postgres" and isinstance(tree, exp.Query):  # attribute notation
            names = qualified_names(tree)
            reasons.extend(names.reasons)
            needs.extend(names.needs)
    kinds = [type(tree).__name__.lower() for tree in trees]
    unique = list(dict.fromkeys(reasons))
    return SqlShape(
        statements=len(trees), read_only=not unique, kinds=kinds, reasons=unique, column_needs=needs
    )


def format_sql(sql: str, dialect: str = "postgres") -> str:
    """The statements pretty-printed, one after another; ``SqlNotParsed`` for what is not SQL."""
    trees = _parse(sql, dialect)
    return ";\n\n".join(tree.sql(dialect=dialect, pretty=True) for tree in trees)
