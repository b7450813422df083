"""The language of a message and the SQL written into it, without a stack."""

import pytest

from sstools.agent.language import Lang, language_of
from sstools.agent.sqltext import split_sql


@pytest.mark.parametrize(
    ("text", "page", "language"),
    [
        ("задеплой Sales Overview на prod плиз", "en", "ru"),  # names are not words of the question
        ("deploy дашборд 3 to prod", "ru", "en"),
        ("SELECT count(*) FROM sales", "ru", "ru"),  # SQL alone: the page's language
        ("SELECT count(*) FROM sales", "en", "en"),
        ("42", "en", "en"),
        ("«Orders and Events»", "ru", "ru"),
        ("Дашборды в dev: 3.\n\n| id | title |\n|---|---|\n| 1 | [Sales](http://x/1) |", "en", "ru"),
        ("delete all rows from the orders table on prod", "ru", "en"),  # a request, not SQL
        ("Создай ветку fix/legacy-kpis от main", "en", "ru"),  # a branch's name is not English
        ("а shipped?", "en", "ru"),
        # Russian speakers name tables, columns and SQL words in English inside Russian sentences
        ("покажи orders by status в prod", "en", "ru"),
        ("сделай select count по customers group by region", "en", "ru"),
        ("top 5 customers by revenue за прошлый месяц", "en", "ru"),
        ("Проверь Отчёт по продажам", "en", "ru"),
        # an English speaker writes Russian only in a title, capitalised mid-sentence
        ("check health of Отчёт по продажам in prod", "ru", "en"),
        ("What is broken in the Финансы dashboard on prod?", "ru", "en"),
        ("select count of dashboards per owner", "ru", "en"),
        ("Is the LLM up?\nСломалось что-то", "en", "ru"),  # a new line starts a sentence, not a title
    ],
)
def test_the_language_of_a_message_is_that_of_its_own_words(text: str, page: Lang, language: Lang) -> None:
    assert language_of(text, page) == language


@pytest.mark.parametrize(
    ("text", "sql"),
    [
        ("run this SQL on dev: SELECT count(*) FROM sales", "SELECT count(*) FROM sales"),
        ("покажи select * from orders;", "select * from orders"),
        ("```sql\nselect a from b\n``` on prod", "select a from b"),
        ("DELETE FROM orders WHERE id = 1", "DELETE FROM orders WHERE id = 1"),
        ("delete all rows from the orders table", None),
        ("select the dashboards that are broken", None),
        # a query that names its parts first starts at WITH, whatever the forms of its names
        ("run: WITH t AS (SELECT 1) SELECT * FROM t", "WITH t AS (SELECT 1) SELECT * FROM t"),
        (
            "выполни WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT x FROM c",
            "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT x FROM c",
        ),
        (
            'run with "Big one" as materialized (select 1) select 2',
            'with "Big one" as materialized (select 1) select 2',
        ),
        ("run with a friend as (sort of) a guest", None),
    ],
)
def test_sql_is_told_apart_from_a_sentence_that_sounds_like_it(text: str, sql: str | None) -> None:
    assert split_sql(text)[1] == sql
