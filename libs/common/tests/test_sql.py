"""The SQL classifier and renderer (sstools.common.sql): which statements read only and why the
others do not, in each dialect it vets, what is sent (rendered) and how it is formatted."""

import re

import pytest
import sqlglot
from sqlglot import exp
from sqlglot.errors import ErrorLevel, SqlglotError

from sstools.common.sql import (
    SqlNotParsed,
    SqlShape,
    _node_types_beside,
    classify,
    dialect_for_backend,
    format_sql,
    render,
)

# (dialect, statement, every reason it gives, in order): writes, side effects, and what cannot
# be judged.
CHANGING = [
    # Superset's Jinja (where enabled) renders this into a quote, a COMMIT and a DELETE
    ("postgres", """select '{{ "%c"|format(39) }}; commit; delete from orders; --'""", ["template"]),
    ("sqlite", "select '{% if true %}' || name from sqlite_master", ["template"]),
    # no allow-list of its own functions: nothing in this dialect is a vetted read
    ("tsql", "select * from orders with (tablockx)", ["dialect_not_vetted"]),
    ("postgres", "select 1; select 2", ["several_statements"]),
    ("postgres", "select 1; delete from orders", ["several_statements", "dml"]),
    ("postgres", "insert into orders values (1)", ["dml"]),
    ("postgres", "update orders set total = 0", ["dml"]),
    ("postgres", "delete from orders", ["dml"]),
    ("postgres", "merge into orders o using src s on o.id = s.id when matched then delete", ["dml"]),
    ("postgres", "copy orders to '/tmp/orders.csv'", ["dml"]),
    ("postgres", "drop table orders", ["ddl"]),
    ("postgres", "truncate orders", ["ddl"]),
    ("postgres", "create table t (a int)", ["ddl"]),
    ("postgres", "alter table orders add column x int", ["ddl"]),
    ("postgres", "with gone as (delete from orders returning *) select * from gone", ["dml"]),
    ("postgres", "with x as (insert into log values (1) returning 1) select * from x", ["dml"]),
    ("postgres", "select * from orders for update", ["lock"]),
    ("postgres", "select * from orders for no key update skip locked", ["lock"]),
    ("postgres", "select * from orders for key share nowait", ["lock"]),
    ("postgres", "select * from orders o join customers c on c.id = o.customer_id for update of o", ["lock"]),
    ("postgres", "select * from (select * from orders for share) o", ["lock"]),
    ("postgres", "lock table orders", ["statement:command"]),
    ("postgres", "select * into t2 from orders", ["into"]),
    ("postgres", "explain analyze delete from orders", ["statement:command"]),
    # plain EXPLAIN runs nothing, but is not a query either: not judged, so not a read
    ("postgres", "explain select 1", ["statement:command"]),
    ("postgres", "copy (select * from orders) to stdout", ["dml"]),
    ("postgres", "create table t2 as select * from orders", ["ddl"]),
    ("postgres", "with x as (update orders set total = 0 returning id) select count(*) from x", ["dml"]),
    ("postgres", "select 1 -- harmless\n; delete from orders", ["several_statements", "dml"]),
    ("postgres", "do $$begin delete from orders; end$$", ["statement:command"]),
    ("postgres", "set statement_timeout = 0", ["statement:set", "statement:setitem"]),
    ("postgres", "grant all on orders to public", ["statement:grant"]),
    ("postgres", "select nextval('invoice_seq')", ["function:nextval"]),
    ("postgres", "select setval('invoice_seq', 10)", ["function:setval"]),
    ("postgres", "select pg_terminate_backend(42)", ["function:pg_terminate_backend"]),
    ("postgres", "select lo_import('/etc/passwd')", ["function:lo_import"]),
    ("postgres", "select dblink_exec('dbname=x', 'delete from orders')", ["function:dblink_exec"]),
    ("postgres", "select * from dblink('dbname=x', 'select 1') as t(a int)", ["function:dblink"]),
    ("postgres", "select set_config('work_mem', '1GB', false)", ["function:set_config"]),
    ("postgres", "select pg_sleep(10)", ["function:pg_sleep"]),
    ("postgres", "select txid_current()", ["function:txid_current"]),
    ("postgres", "select pg_advisory_lock(1)", ["function:pg_advisory_lock"]),
    ("postgres", "select pg_read_file('/etc/passwd')", ["function:pg_read_file"]),
    ("postgres", "select my_udf(id) from orders", ["function:my_udf"]),
    ("postgres", "select public.lower('a')", ["function:public.lower"]),
    ("postgres", 'select "AGE"(now())', ["function:AGE"]),
    ("postgres", "select 1 union all select pg_sleep(1)", ["function:pg_sleep"]),
    ("postgres", "select * from orders where id in (select bump())", ["function:bump"]),
    ("postgres", "select (select nextval('s')) as n", ["function:nextval"]),
    ("postgres", "with x as (select pg_sleep(1)) select * from x", ["function:pg_sleep"]),
    ("postgres", "select count(*) filter (where my_check(id)) from orders", ["function:my_check"]),
    ("postgres", "values (1)", ["not_a_query"]),
    ("postgres", "selec broken sql", ["unparsed"]),
    ("postgres", "", ["unparsed"]),
    ("postgres", "select 'unterminated", ["unparsed"]),
    ("postgres", "-- only a comment", ["unparsed"]),
    ("postgres", ";;", ["unparsed"]),
    # several reasons at once, each given once, in the order they were found
    (
        "postgres",
        "select pg_sleep(1); insert into log select nextval('s') from orders for update",
        ["several_statements", "function:pg_sleep", "dml", "function:nextval", "lock"],
    ),
    (
        "sqlite",
        r"SELECT E'\' FROM (SELECT 1 AS E); CREATE TABLE x AS SELECT 1; --'",
        ["several_statements", "ddl"],
    ),
    ("sqlite", "select * into t2 from sales", ["unparsed"]),  # SQLite has no SELECT INTO
    ("sqlite", "attach database '/tmp/x.db' as x", ["statement:attach"]),
    ("sqlite", "detach database x", ["statement:detach"]),
    ("sqlite", "pragma query_only = off", ["statement:pragma"]),
    ("sqlite", "select load_extension('/tmp/evil')", ["function:load_extension"]),
    ("sqlite", "select writefile('/tmp/x', 'y')", ["function:writefile"]),
    ("sqlite", "replace into sales (id, amount) values (1, 0)", ["statement:command"]),
    ("sqlite", "insert or replace into sales (id, amount) values (1, 0)", ["dml"]),
    ("sqlite", "vacuum into '/tmp/copy.db'", ["statement:command"]),
    ("sqlite", "analyze", ["statement:analyze"]),
    (
        "sqlite",
        "begin; delete from sales; commit",
        ["several_statements", "statement:transaction", "dml", "statement:commit"],
    ),
    ("mysql", "select 1 /*! , sleep(5) */", ["executable_comment"]),
    ("mysql", "select 1 /*!50000 union select load_file('/etc/passwd') */", ["executable_comment"]),
    ("mysql", "select * from t into outfile '/tmp/t.csv'", ["unparsed"]),
    ("mysql", "select a into @v from t", ["unparsed"]),  # sqlglot would write it as CREATE TABLE
    ("mysql", "select @v := 1", ["statement:propertyeq"]),
    ("mysql", "select sleep(5)", ["function:sleep"]),
    ("mysql", "select benchmark(1000000, md5('a'))", ["function:benchmark"]),
    ("mysql", "select get_lock('x', 1)", ["function:get_lock"]),
    ("mysql", "select load_file('/etc/passwd')", ["function:load_file"]),
    ("mysql", "select * from t lock in share mode", ["lock"]),
    ("mysql", "select * from t for update", ["lock"]),
    # MySQL has no arrays: what sqlglot cannot write in MySQL is not sent, so not judged a read
    ("mysql", "select array[1, 2]", ["unparsed"]),
]

READS = [
    ("postgres", "select a, b from sales where region = 'Москва'"),
    # keywords in comments and string literals are neither statements nor calls
    ("postgres", "select 1 -- ; delete from orders"),
    ("postgres", "/* drop table orders; */ select 1"),
    ("postgres", "select 'drop table orders; delete from x' from orders"),
    ("postgres", "select 'pg_sleep(10)' as label"),
    # an unquoted name is the lower-case one to the database
    ("postgres", "SELECT AGE(NOW(), ordered_at), Date_Part('year', ordered_at) FROM orders"),
    (
        "postgres",
        "with recent as (select * from orders where day > now() - interval '1 day') "
        "select count(*) from recent",
    ),
    ("postgres", "select 1 union all select 2"),
    ("postgres", "SELECT * FROM events LIMIT 10;"),
    ("postgres", "SELECT 1; -- a comment after the only statement"),
    ("postgres", "table orders"),
    (
        "postgres",
        "select c.city, count(distinct o.id) as orders, "
        "sum(o.amount) filter (where o.status = 'paid') as paid, "
        "percentile_cont(0.5) within group (order by o.amount) as median_amount "
        "from orders o join customers c on c.id = o.customer_id group by c.city having count(*) > 1",
    ),
    (
        "postgres",
        "select id, amount, row_number() over w as rn, lag(amount) over w as previous, "
        "sum(amount) over (partition by status order by ordered_at "
        "rows between unbounded preceding and current row) "
        "from orders window w as (partition by status order by ordered_at)",
    ),
    (
        "postgres",
        "select date_trunc('month', ordered_at) as month, extract(dow from ordered_at)::int as dow, "
        "to_char(ordered_at, 'YYYY-MM') as label, age(now(), ordered_at) as age, coalesce(status, '-') "
        "from orders where ordered_at >= current_date - 30 order by 1",
    ),
    (
        "postgres",
        "select string_agg(name, ', ' order by name), array_agg(id), bool_and(id > 0) from customers",
    ),
    ("postgres", "select * from generate_series(1, 10) as g(n) where n % 2 = 0"),
    (
        "postgres",
        "select jsonb_build_object('a', 1) ->> 'a', upper(name), length(name), "
        "split_part(name, ' ', 1) from customers",
    ),
    (
        "postgres",
        "select case when amount > 100 then 'big' else 'small' end, round(amount::numeric, 1), "
        "greatest(1, 2) from orders",
    ),
    # One string literal to PostgreSQL (two statements to SQLite: see below).
    ("postgres", r"SELECT E'\' FROM (SELECT 1 AS E); CREATE TABLE x AS SELECT 1; --'"),
    (
        "sqlite",
        "select strftime('%Y-%m', day) as month, region, sum(amount) as total from sales group by 1, 2",
    ),
    (
        "sqlite",
        "select date(day, '+1 day'), julianday(day) - julianday('2026-01-01'), ifnull(region, '-') "
        "from sales",
    ),
    (
        "sqlite",
        "select region, total(amount), round(avg(amount), 2), group_concat(product, ',') "
        "from sales group by region",
    ),
    (
        "sqlite",
        "select id, ntile(4) over (order by amount), "
        "dense_rank() over (partition by region order by amount desc) from sales",
    ),
    (
        "sqlite",
        "with m as (select region, max(amount) as top from sales group by region) "
        "select s.* from sales s join m on m.region = s.region and m.top = s.amount",
    ),
    (
        "sqlite",
        "select iif(amount > 100, 'big', 'small'), instr(region, 'o'), substr(product, 1, 3), "
        "printf('%.2f', amount) from sales",
    ),
    ("mysql", "select date_format(created, '%Y-%m') as m, count(*) from orders group by m"),
    ("mysql", "select ifnull(a, 0), concat_ws(',', a, b), datediff(now(), created) from t"),
    ("mysql", "select IFNULL(a, 0), DATE_FORMAT(created, '%Y') from t"),
]


UNPARSED = SqlShape(statements=0, read_only=False, kinds=["unparsed"], reasons=["unparsed"])


@pytest.mark.parametrize(("dialect", "sql", "reasons"), CHANGING)
def test_anything_that_may_change_something_is_not_read_only(
    dialect: str, sql: str, reasons: list[str]
) -> None:
    shape = classify(sql, dialect)
    assert (shape.read_only, shape.reasons) == (False, reasons)


@pytest.mark.parametrize(("dialect", "sql"), READS)
def test_one_query_of_pure_functions_is_read_only(dialect: str, sql: str) -> None:
    shape = classify(sql, dialect)
    assert (shape.read_only, shape.statements, shape.reasons) == (True, 1, [])


@pytest.mark.parametrize(
    ("dialect", "sql", "reasons"),
    [
        ("postgres", "select repeat('x', 1000000000)", ["too_large"]),
        ("postgres", "select length(repeat(repeat('x', 10000), 10000))", ["too_large"]),
        (
            "postgres",
            "select string_agg(repeat('x', 10000), ',') from generate_series(1, 10000)",
            ["too_large"],
        ),
        ("postgres", "select * from generate_series(1, 100000000000)", ["too_large"]),
        ("postgres", "select * from generate_series(100000000000, 1, -1)", ["too_large"]),
        ("postgres", "select lpad(name, 1000000000) from customers", ["too_large"]),
        ("postgres", "select rpad('x', 20000000, 'y')", ["too_large"]),
        ("postgres", "select repeat(name, n) from t", ["unbounded:repeat"]),
        ("postgres", "select repeat('x', 10 * 1000000000)", ["unbounded:repeat"]),
        (
            "postgres",
            "select * from generate_series(1, (select max(id) from orders))",
            ["unbounded:exploding_generate_series"],
        ),
        (
            "postgres",
            "select generate_series(timestamp '1900-01-01', timestamp '2900-01-01', interval '1 second')",
            ["too_large"],
        ),
        (
            "postgres",
            "select generate_series(now(), now() + interval '1 day', interval '1 hour')",
            ["unbounded:exploding_generate_series"],
        ),
        ("postgres", "select * from generate_series(1, 10000001)", ["too_large"]),
        ("postgres", "select * from generate_series(0, 20000000, 2)", ["too_large"]),
        ("postgres", "select repeat('ab', 3) from generate_series(1, 5000000)", ["too_large"]),
        ("postgres", "select * from generate_series(1, 10, 0)", ["unbounded:exploding_generate_series"]),
        ("postgres", "select repeat('x', -n) from t", ["unbounded:repeat"]),
        (
            "postgres",
            "select generate_series(date '2026-01-01', date '2026-01-02', interval '0 day')",
            ["unbounded:exploding_generate_series"],
        ),
        (
            "postgres",
            "select generate_series(date '2026-01-01', date '2026-01-02', interval '1 fortnight')",
            ["unbounded:exploding_generate_series"],
        ),
        (
            "postgres",
            "select generate_series(cast('2026-01-01' as text), date '2026-01-02', interval '1 day')",
            ["unbounded:exploding_generate_series"],
        ),
        (
            "postgres",
            "select generate_series(timestamp 'soon', date '2026-01-02', interval '1 day')",
            ["unbounded:exploding_generate_series"],
        ),
        ("sqlite", "select zeroblob()", ["unbounded:zeroblob"]),
        ("sqlite", "select zeroblob(1e9)", ["too_large"]),
        ("sqlite", "select length(randomblob(2000000000))", ["too_large"]),
        ("sqlite", "select hex(zeroblob(day)) from sales", ["unbounded:zeroblob"]),
    ],
)
def test_a_read_that_builds_more_than_the_bound_or_an_unknown_size_is_not_read_only(
    dialect: str, sql: str, reasons: list[str]
) -> None:
    """A gigabyte value or an endless series is work a person could put on a database (or, for
    SQLite, on Superset's own process) with one read; the sizes must be literals, and small."""
    shape = classify(sql, dialect)
    assert (shape.read_only, shape.reasons) == (False, reasons)


@pytest.mark.parametrize(
    ("dialect", "sql"),
    [
        ("postgres", "select repeat('-', 20), lpad(name, 12, '.') from customers"),
        ("postgres", "select d from generate_series(1, 366) as g(d)"),
        ("postgres", "select count(*) from generate_series(1, 1000) a, generate_series(1, 1000) b"),
        ("sqlite", "select hex(randomblob(16)), length(zeroblob(4096))"),
        (
            "postgres",
            "select d from generate_series(timestamp '2026-01-01', date '2026-12-31', interval '1 day') g(d)",
        ),
        ("postgres", "select generate_series(date '2026-01-01', date '2026-01-02', interval '15 minutes')"),
        # at the bound exactly: ten million rows, of one character each
        ("postgres", "select * from generate_series(1, 10000000)"),
        ("postgres", "select * from generate_series(2, 20000000, 2)"),
        ("postgres", "select repeat('x', 1) from generate_series(1, 10000000)"),
        ("postgres", "select repeat('x', 0) from generate_series(1, 10000000)"),
        (
            "postgres",
            "select generate_series(date '2000-01-01', date '2026-01-01', interval '1 months')",
        ),
        (
            "postgres",
            "select generate_series(timestamp '2026-01-01 00:00+03', date '2026-01-02', interval '1 hour')",
        ),
    ],
)
def test_a_read_that_builds_a_small_value_of_a_literal_size_is_read_only(dialect: str, sql: str) -> None:
    assert classify(sql, dialect).read_only


@pytest.mark.parametrize(
    ("sql", "statements", "kinds"),
    [
        ("select 1", 1, ["select"]),
        ("select 1 union select 2", 1, ["union"]),
        ("table orders", 1, ["select"]),
        ("insert into orders values (1)", 1, ["insert"]),
        ("select 1; delete from orders; drop table orders", 3, ["select", "delete", "drop"]),
        ("values (1)", 1, ["values"]),
    ],
)
def test_each_statement_is_named_by_its_kind(sql: str, statements: int, kinds: list[str]) -> None:
    shape = classify(sql, "postgres")
    assert (shape.statements, shape.kinds) == (statements, kinds)


@pytest.mark.parametrize(
    ("dialect", "sql"),
    [
        ("postgres", "selec broken sql"),
        ("postgres", ""),
        ("sqlite", "select * into t2 from sales"),
        ("mysql", "select array[1]"),
    ],
)
def test_what_cannot_be_read_is_no_statement_at_all(dialect: str, sql: str) -> None:
    assert classify(sql, dialect) == UNPARSED


def test_statements_are_judged_as_postgres_unless_a_dialect_is_named() -> None:
    # One string literal to PostgreSQL, a SELECT and a CREATE TABLE to SQLite.
    sql = r"SELECT E'\' FROM (SELECT 1 AS E); CREATE TABLE x AS SELECT 1; --'"
    assert classify(sql) == SqlShape(statements=1, read_only=True, kinds=["select"], reasons=[])


def test_the_dialect_decides_how_many_statements_there_are() -> None:
    sql = r"SELECT E'\' FROM (SELECT 1 AS E); CREATE TABLE x AS SELECT 1; --'"
    assert classify(sql, "postgres").statements == 1
    assert classify(sql, "sqlite").statements == 2
    # What is sent is what was read: to SQLite, two statements, and no trailing comment.
    assert render(sql, "sqlite").split(";\n") == [
        'SELECT E AS "\\" FROM (SELECT 1 AS E)',
        "CREATE TABLE x AS SELECT 1",
    ]


@pytest.mark.parametrize(("dialect", "sql"), READS)
def test_rendering_drops_comments_and_reads_back_the_same(dialect: str, sql: str) -> None:
    rendered = render(f"/* note */ {sql.rstrip(';')} -- trailing", dialect)
    assert "note" not in rendered
    assert "trailing" not in rendered
    assert render(rendered, dialect) == rendered
    read = [tree for tree in sqlglot.parse(sql, read=dialect) if tree and not isinstance(tree, exp.Semicolon)]
    assert sqlglot.parse(rendered, read=dialect) == read


def test_rendering_keeps_the_case_of_quoted_function_names() -> None:
    assert render('select "pg_sleep"(1)', "postgres") == 'SELECT "pg_sleep"(1)'


def test_rendering_writes_each_statement_in_the_dialect_without_comments() -> None:
    assert render("select 1 /* one */; -- two\nselect `a` from t", "mysql") == "SELECT 1;\nSELECT `a` FROM t"


def _sqlglot_refusal(sql: str, dialect: str, *, write: bool) -> str:
    """What sqlglot itself says when it cannot read ``sql`` (or write it back) in ``dialect``."""
    try:
        trees = sqlglot.parse(sql, read=dialect)
        if write:
            for tree in trees:
                assert tree is not None
                tree.sql(dialect=dialect, unsupported_level=ErrorLevel.RAISE)
    except SqlglotError as error:
        return str(error)
    raise AssertionError(f"sqlglot handled {sql!r}")


def _whole(message: str) -> str:
    """A ``match`` pattern that only exactly ``message`` satisfies."""
    return rf"\A{re.escape(message)}\Z"


def test_what_cannot_be_rendered_says_why_and_in_which_dialect() -> None:
    """The message is what ops' 422 tells the person who wrote the SQL."""
    for sql in ("selec broken sql", "select 'open"):
        with pytest.raises(
            SqlNotParsed,
            match=_whole(f"not valid postgres SQL: {_sqlglot_refusal(sql, 'postgres', write=False)}"),
        ):
            render(sql, "postgres")
    array = "select array[1, 2]"
    unwritable = f"cannot be written as mysql SQL: {_sqlglot_refusal(array, 'mysql', write=True)}"
    with pytest.raises(SqlNotParsed, match=_whole(unwritable)):
        render(array, "mysql")
    # sqlglot reads SQLite's SELECT INTO as a SELECT, but writes it as a CREATE TABLE
    with pytest.raises(
        SqlNotParsed, match=_whole("the statement does not read back the same once written as sqlite SQL")
    ):
        render("select * into t2 from sales", "sqlite")
    for nothing in ("", "-- a comment", ";;"):
        with pytest.raises(SqlNotParsed):
            render(nothing, "postgres")


# Superset's SQLAlchemy backend names and the sqlglot dialect of each, by hand.
BACKENDS = {
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


@pytest.mark.parametrize(("backend", "dialect"), BACKENDS.items())
def test_backends_map_to_their_dialects_whatever_their_case(backend: str, dialect: str) -> None:
    assert (dialect_for_backend(backend), dialect_for_backend(backend.upper())) == (dialect, dialect)


@pytest.mark.parametrize("backend", ["crate", "", None, "postgres", "postgresql+psycopg2"])
def test_unknown_backends_have_no_dialect(backend: str | None) -> None:
    assert dialect_for_backend(backend) is None


def test_every_dml_node_type_sqlglot_declares_counts_as_dml() -> None:
    """The DML and DDL lists are every node type sqlglot declares beside INSERT and CREATE, so a
    type a new sqlglot adds is refused too; this sqlglot's DML types, listed by hand."""
    dml = {
        exp.Copy, exp.CopyParameter, exp.Credentials, exp.Delete, exp.Directory, exp.DirectoryStage,
        exp.Export, exp.Insert, exp.LoadData, exp.Merge, exp.OnConflict, exp.Returning, exp.Update,
        exp.When, exp.Whens,
    }  # fmt: skip
    found = _node_types_beside(exp.Insert)
    assert (len(found), set(found)) == (len(dml), dml)


def test_formatting_keeps_every_statement_in_its_dialect_and_refuses_non_sql() -> None:
    assert format_sql("select a,b from t where x=1 and y=2; select 2") == (
        "SELECT\n  a,\n  b\nFROM t\nWHERE\n  x = 1 AND y = 2;\n\nSELECT\n  2"
    )
    # MySQL quotes names with backticks, which no other dialect here reads
    assert format_sql("select `a` from t", "mysql") == "SELECT\n  `a`\nFROM t"
    with pytest.raises(SqlNotParsed):
        format_sql("")
