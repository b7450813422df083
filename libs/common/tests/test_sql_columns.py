"""PostgreSQL's attribute notation: a qualified name that is not a column is a function call."""

import pytest

from sstools.common.sql import classify
from sstools.common.sql_columns import ColumnNeed, TableRef

T = TableRef(None, "t")


@pytest.mark.parametrize(
    ("sql", "reasons"),
    [
        # field selection on an expression: always a possible call
        ("select (t).f from t", ["field_selection:(t).f"]),
        ("select (t.*).f from t", ["field_selection:(t.*).f"]),
        ("select (c).f from t", ["field_selection:(c).f"]),
        ("select (row(1, 2)).f", ["field_selection:(ROW(1, 2)).f"]),
        ("select a.b.c.d.e from t", ["field_selection:a.b.c.d.e", "qualified_name:a.b.c.d"]),
        # a qualifier that is no relation of the query, or a schema it is not read through
        ("select u.f from t", ["unresolved:u.f"]),
        ("select s.t.f from s.t as t", ["unresolved:s.t.f"]),
        ("select other.t.f from s.t", ["unresolved:other.t.f"]),
        (
            "select x.v from (select (select t.f) as v from t) x, (select 1) y where y.z = 1",
            ["not_a_column:y.z"],
        ),
        ("select (array[1]).f", ["field_selection:(ARRAY[1]).f"]),  # as PostgreSQL writes it
        ("select x.f from (select * from t a, u a) x", ["unresolved_names"]),  # one alias twice
        # names the query itself defines, and only those
        ("with w as (select 1 as a) select w.a, w.b from w", ["not_a_column:w.b"]),
        ("with w(a) as (select 1 as b) select w.b from w", ["not_a_column:w.b"]),
        ("select v.c from (values (1, 2)) as v(a, b)", ["not_a_column:v.c"]),
        ("select l.w from t, lateral (select t.f as v) l", ["not_a_column:l.w"]),
        ("select g.f from generate_series(1, 3) g", ["not_a_column:g.f"]),
        ("select g.g from generate_series(1, 3) as g(day)", ["not_a_column:g.g"]),
        ("select j.other from t, jsonb_each(t.js) j", ["not_a_column:j.other"]),
        ("select x.b from (select a from t union select b from u) x", ["not_a_column:x.b"]),
        ("select x.f from (select 1 as a) x", ["not_a_column:x.f"]),
        ("select x.f from (select * from (select 1 as a) y) x", ["not_a_column:x.f"]),
        ("select x.g from (select t.f from t join u on true) x", ["not_a_column:x.g"]),
        ("select x.f from (select z.* from t) x", ["not_a_column:x.f"]),
        ("select v.a from (values (1)) v", ["not_a_column:v.a"]),
    ],
)
def test_a_name_that_may_call_a_function_is_not_a_read(sql: str, reasons: list[str]) -> None:
    shape = classify(sql, "postgres")
    assert (shape.read_only, shape.reasons) == (False, reasons)


@pytest.mark.parametrize(
    ("sql", "needs"),
    [
        ("select t.f from t", [ColumnNeed("t.f", "f", (T,))]),
        ("select s.t.f from s.t", [ColumnNeed("s.t.f", "f", (TableRef("s", "t"),))]),
        ("select x.f from s.t x", [ColumnNeed("x.f", "f", (TableRef("s", "t"),))]),
        ('select "T"."F" from "T"', [ColumnNeed('"T"."F"', "F", (TableRef(None, "T"),))]),
        ("select T.F from T", [ColumnNeed("t.f", "f", (T,))]),  # unquoted: folded
        ("select a.f from t as a(x, y)", [ColumnNeed("a.f", "f", (TableRef(None, "t", ("x", "y")),))]),
        ("select (select t.f) from t", [ColumnNeed("t.f", "f", (T,))]),
        # through a derived table's stars, to every table they take columns of
        ("select x.f from (select * from t) x", [ColumnNeed("x.f", "f", (T,))]),
        (
            "select x.f from (select *, 1 as one from t join u on true) x",
            [ColumnNeed("x.f", "f", (T, TableRef(None, "u")))],
        ),
        ("select x.f from (select t.* from t join u on true) x", [ColumnNeed("x.f", "f", (T,))]),
        (
            "with w as (select * from t) select v.f from (select * from w) v",
            [ColumnNeed("v.f", "f", (T,))],
        ),
        # one need per distinct name, wherever it appears, beside names that need nothing
        ("select t.f from t where t.f > 1 order by t.f", [ColumnNeed("t.f", "f", (T,))]),
        ("select f, t.g from t", [ColumnNeed("t.g", "g", (T,))]),
        ("select j.key from t, lateral jsonb_each(t.js) as j", [ColumnNeed("t.js", "js", (T,))]),
    ],
)
def test_a_name_over_a_stored_table_is_a_read_once_the_table_has_that_column(
    sql: str, needs: list[ColumnNeed]
) -> None:
    shape = classify(sql, "postgres")
    assert (shape.read_only, shape.reasons, shape.column_needs) == (True, [], needs)


@pytest.mark.parametrize(
    "sql",
    [
        "select x.* from t x",
        "select count(t.*) from t",
        "select f, g from t",
        "with w as (select 1 as a) select w.a from w",
        "with w(b) as (select 1 as a) select w.b from w",
        "select v.a, v.b from (values (1, 2)) as v(a, b)",
        "select l.v from generate_series(1, 2) g, lateral (select g.g as v) l",
        "select g.g from generate_series(1, 3) g",
        "select g.day from generate_series(1, 3) as g(day)",
        "select j.key, j.value from jsonb_each('{}'::jsonb) j",
        "select j.key from lateral jsonb_each_text('{}'::jsonb) as j",
        "select j.value from JSONB_EACH('{}'::jsonb) j",
        "select x.x from unnest(array[1, 2]) x",
        "select x.a from (select * from (select 1 as a) y) x",
        "select x.a from (select a from t union select b from u) x",
        "select x.count, x.a from (select a, count(*) as count from t group by a) x",
    ],
)
def test_names_the_query_itself_defines_need_nothing_more(sql: str) -> None:
    shape = classify(sql, "postgres")
    assert (shape.read_only, shape.reasons, shape.column_needs) == (True, [], [])


def test_an_alias_column_list_renames_the_first_columns_only() -> None:
    renamed = TableRef(None, "t", ("x",))
    assert renamed.visible(["f", "g"]) == {"x", "g"}  # "f" is renamed: t.f would call f(t)


@pytest.mark.parametrize("dialect", ["sqlite", "mysql"])
def test_other_dialects_have_no_attribute_notation(dialect: str) -> None:
    shape = classify("select x.f from t x", dialect)
    assert (shape.read_only, shape.column_needs) == (True, [])
