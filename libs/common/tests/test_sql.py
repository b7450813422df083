import pytest

from sstools.common.sql import SqlNotParsed, classify, format_sql


@pytest.mark.parametrize(
    "sql",
    [
        "select a, b from sales where region = 'Москва'",
        "with recent as (select * from orders where day > now() - interval '1 day') "
        "select count(*) from recent",
        "select 1 union all select 2",
        "SELECT * FROM events LIMIT 10;",
    ],
)
def test_one_reading_statement_is_read_only(sql: str) -> None:
    shape = classify(sql)
    assert shape.read_only
    assert shape.statements == 1


@pytest.mark.parametrize(
    "sql",
    [
        "select 1; select 2",
        "select 1; delete from orders",
        "insert into orders values (1)",
        "update orders set total = 0",
        "delete from orders",
        "drop table orders",
        "truncate orders",
        "create table t (a int)",
        "alter table orders add column x int",
        "with gone as (delete from orders returning *) select * from gone",
        "select * from orders for update",
        "explain analyze delete from orders",
        "selec broken sql",
        "",
    ],
)
def test_anything_else_counts_as_changing_something(sql: str) -> None:
    assert not classify(sql).read_only


def test_formatting_keeps_every_statement_and_refuses_non_sql() -> None:
    formatted = format_sql("select a,b from t where x=1 and y=2; select 2")
    assert formatted.count("SELECT") == 2
    assert "WHERE\n  x = 1 AND y = 2" in formatted
    with pytest.raises(SqlNotParsed):
        format_sql("")
