import pytest
import sqlglot
from sqlglot import exp

from sstools.common.sql import SqlNotParsed, classify, dialect_for_backend, format_sql, render

# (dialect, statement, a reason it must give): writes, side effects, and what cannot be judged.
CHANGING = [
    # Superset's Jinja (where enabled) renders this into a quote, a COMMIT and a DELETE
    ("postgres", """select '{{ "%c"|format(39) }}; commit; delete from orders; --'""", "template"),
    ("sqlite", "select '{% if true %}' || name from sqlite_master", "template"),
    # no allow-list of its own functions: nothing in this dialect is a vetted read
    ("tsql", "select * from orders with (tablockx)", "dialect_not_vetted"),
    ("postgres", "select 1; select 2", "several_statements"),
    ("postgres", "select 1; delete from orders", "several_statements"),
    ("postgres", "insert into orders values (1)", "dml"),
    ("postgres", "update orders set total = 0", "dml"),
    ("postgres", "delete from orders", "dml"),
    ("postgres", "merge into orders o using src s on o.id = s.id when matched then delete", "dml"),
    ("postgres", "copy orders to '/tmp/orders.csv'", "dml"),
    ("postgres", "drop table orders", "ddl"),
    ("postgres", "truncate orders", "ddl"),
    ("postgres", "create table t (a int)", "ddl"),
    ("postgres", "alter table orders add column x int", "ddl"),
    ("postgres", "with gone as (delete from orders returning *) select * from gone", "dml"),
    ("postgres", "with x as (insert into log values (1) returning 1) select * from x", "dml"),
    ("postgres", "select * from orders for update", "lock"),
    ("postgres", "select * from (select * from orders for share) o", "lock"),
    ("postgres", "lock table orders", "statement:command"),
    ("postgres", "select * into t2 from orders", "into"),
    ("postgres", "explain analyze delete from orders", "statement:command"),
    ("postgres", "do $$begin delete from orders; end$$", "statement:command"),
    ("postgres", "set statement_timeout = 0", "statement:set"),
    ("postgres", "grant all on orders to public", "statement:grant"),
    ("postgres", "select nextval('invoice_seq')", "function:nextval"),
    ("postgres", "select setval('invoice_seq', 10)", "function:setval"),
    ("postgres", "select pg_terminate_backend(42)", "function:pg_terminate_backend"),
    ("postgres", "select lo_import('/etc/passwd')", "function:lo_import"),
    ("postgres", "select dblink_exec('dbname=x', 'delete from orders')", "function:dblink_exec"),
    ("postgres", "select * from dblink('dbname=x', 'select 1') as t(a int)", "function:dblink"),
    ("postgres", "select set_config('work_mem', '1GB', false)", "function:set_config"),
    ("postgres", "select pg_sleep(10)", "function:pg_sleep"),
    ("postgres", "select txid_current()", "function:txid_current"),
    ("postgres", "select pg_advisory_lock(1)", "function:pg_advisory_lock"),
    ("postgres", "select pg_read_file('/etc/passwd')", "function:pg_read_file"),
    ("postgres", "select my_udf(id) from orders", "function:my_udf"),
    ("postgres", "select public.lower('a')", "function:public.lower"),
    ("postgres", 'select "AGE"(now())', "function:AGE"),
    ("postgres", "select 1 union all select pg_sleep(1)", "function:pg_sleep"),
    ("postgres", "select * from orders where id in (select bump())", "function:bump"),
    ("postgres", "select (select nextval('s')) as n", "function:nextval"),
    ("postgres", "with x as (select pg_sleep(1)) select * from x", "function:pg_sleep"),
    ("postgres", "select count(*) filter (where my_check(id)) from orders", "function:my_check"),
    ("postgres", "values (1)", "not_a_query"),
    ("postgres", "selec broken sql", "unparsed"),
    ("postgres", "", "unparsed"),
    ("postgres", "select 'unterminated", "unparsed"),
    ("sqlite", r"SELECT E'\' FROM (SELECT 1 AS E); CREATE TABLE x AS SELECT 1; --'", "several_statements"),
    ("sqlite", "select * into t2 from sales", "unparsed"),  # SQLite has no SELECT INTO
    ("sqlite", "attach database '/tmp/x.db' as x", "statement:attach"),
    ("sqlite", "detach database x", "statement:detach"),
    ("sqlite", "pragma query_only = off", "statement:pragma"),
    ("sqlite", "select load_extension('/tmp/evil')", "function:load_extension"),
    ("sqlite", "select writefile('/tmp/x', 'y')", "function:writefile"),
    ("sqlite", "replace into sales (id, amount) values (1, 0)", "statement:command"),
    ("sqlite", "insert or replace into sales (id, amount) values (1, 0)", "dml"),
    ("sqlite", "vacuum into '/tmp/copy.db'", "statement:command"),
    ("sqlite", "analyze", "statement:analyze"),
    ("sqlite", "begin; delete from sales; commit", "several_statements"),
    ("mysql", "select 1 /*! , sleep(5) */", "executable_comment"),
    ("mysql", "select 1 /*!50000 union select load_file('/etc/passwd') */", "executable_comment"),
    ("mysql", "select * from t into outfile '/tmp/t.csv'", "unparsed"),
    ("mysql", "select a into @v from t", "unparsed"),  # sqlglot would write it as CREATE TABLE
    ("mysql", "select @v := 1", "statement:propertyeq"),
    ("mysql", "select sleep(5)", "function:sleep"),
    ("mysql", "select benchmark(1000000, md5('a'))", "function:benchmark"),
    ("mysql", "select get_lock('x', 1)", "function:get_lock"),
    ("mysql", "select load_file('/etc/passwd')", "function:load_file"),
    ("mysql", "select * from t lock in share mode", "lock"),
]

READS = [
    ("postgres", "select a, b from sales where region = 'Москва'"),
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
]


@pytest.mark.parametrize(("dialect", "sql", "reason"), CHANGING)
def test_anything_that_may_change_something_is_not_read_only(dialect: str, sql: str, reason: str) -> None:
    shape = classify(sql, dialect)
    assert not shape.read_only
    assert reason in shape.reasons, shape


@pytest.mark.parametrize(("dialect", "sql"), READS)
def test_one_query_of_pure_functions_is_read_only(dialect: str, sql: str) -> None:
    shape = classify(sql, dialect)
    assert (shape.read_only, shape.statements, shape.reasons) == (True, 1, [])


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


def test_what_cannot_be_read_is_not_rendered() -> None:
    for sql in ("", "selec broken sql", "select 'open"):
        with pytest.raises(SqlNotParsed):
            render(sql, "postgres")


def test_backends_map_to_their_dialects_and_unknown_ones_to_none() -> None:
    assert dialect_for_backend("postgresql") == "postgres"
    assert dialect_for_backend("sqlite") == "sqlite"
    assert dialect_for_backend("mysql") == "mysql"
    assert dialect_for_backend("mssql") == "tsql"
    assert dialect_for_backend("crate") is None
    assert dialect_for_backend(None) is None


def test_formatting_keeps_every_statement_and_refuses_non_sql() -> None:
    formatted = format_sql("select a,b from t where x=1 and y=2; select 2")
    assert formatted.count("SELECT") == 2
    assert "WHERE\n  x = 1 AND y = 2" in formatted
    with pytest.raises(SqlNotParsed):
        format_sql("")
