"""Issue 17: SQL that writes is never judged read-only. Every statement goes through the whole
stack — an analyst's chat turn whose (scripted) model calls superset_execute_sql — against the
dev Superset's two targets: its SQLite example database and a PostgreSQL database registered
for this test. Both allow DML in Superset, so only ops' judgement stands between an analyst and
a write: what ops' shape endpoint answers is checked too, and each target's state is read
directly (tables, rows, sequences, large objects, files, a canary connection) before and after
each statement.

- Statements that write or have side effects (CTEs, subqueries, UNION, side-effecting and
  user-defined functions, locks, several statements, SQL two dialects read differently) are
  judged changing, refused to the analyst, and change nothing.
- Ordinary analytical reads are judged read-only, run for the analyst, and return what the
  database itself returns for them.
- A read is run behind each backend's own guard: the database refuses a write in it, and
  PostgreSQL stops it at ops' time limit.
- Schema and table names are identifiers that Superset lists for the database: PostgreSQL's SQL
  Lab writes the schema into ``set search_path = "..."`` before the read-only guard, so a schema
  that carries SQL is refused before any call, by the agent and by ops, and changes nothing.
"""

import asyncio
import sqlite3
import time
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from gradio_client import Client
from psycopg import sql as pgsql

from sstools.devstack.agentstack import AGENT_SECRET, AgentStack, dump, new_conversation
from sstools.devstack.demo import PASSWORD_ENV, add_database, client
from sstools.devstack.fake_llm import FakeLlm, Reply, ToolCall
from sstools.devstack.sideeffects import postgres_state
from sstools.devstack.superset import Instance
from sstools.devstack.testing import scratch_database
from sstools.ops.superset import sqllab
from sstools.ops.superset.client import SupersetError

EXAMPLES = 1  # the dev instance's SQLite example database
TWO_FACED = r"SELECT E'\' FROM (SELECT 1 AS E); CREATE TABLE two_faced AS SELECT 1; --'"

PG_SCHEMA = """
CREATE EXTENSION dblink;
CREATE TABLE customers (id int PRIMARY KEY, name text NOT NULL, city text NOT NULL, since date NOT NULL);
CREATE TABLE orders (
    id int PRIMARY KEY, customer_id int NOT NULL REFERENCES customers, amount numeric(10, 2) NOT NULL,
    status text NOT NULL, ordered_at timestamp NOT NULL
);
CREATE TABLE audit_log (id serial PRIMARY KEY, note text NOT NULL);
CREATE SEQUENCE invoice_seq;
CREATE MATERIALIZED VIEW order_totals AS SELECT customer_id, sum(amount) AS total FROM orders
    GROUP BY customer_id WITH NO DATA;
CREATE FUNCTION bump() RETURNS int LANGUAGE sql
    AS $$ INSERT INTO audit_log (note) VALUES ('bump') RETURNING id $$;
CREATE PROCEDURE archive_orders() LANGUAGE sql AS $$ DELETE FROM orders $$;
CREATE SCHEMA reports;
CREATE TABLE reports.monthly (month date PRIMARY KEY, revenue numeric(12, 2) NOT NULL);
INSERT INTO reports.monthly VALUES ('2026-01-01', 1200.50), ('2026-02-01', 980.25);
-- attribute notation: customers' row has no column "leak", so c.leak is leak(c), a function
-- that writes through another connection, which the read's own read-only transaction does not stop
CREATE FUNCTION leak(customers) RETURNS text LANGUAGE sql
    AS $$ SELECT dblink_exec('host=127.0.0.1 dbname=' || current_database() || ' user=postgres',
                             'INSERT INTO audit_log (note) VALUES (''attribute'')') $$;
INSERT INTO customers
    SELECT n, 'customer ' || n, (ARRAY['Berlin', 'Lisbon', 'Oslo'])[n % 3 + 1], date '2025-01-01' + n * 20
    FROM generate_series(1, 9) AS n;
INSERT INTO orders
    SELECT n, n % 9 + 1, round((n * 37 % 500 + 10.5)::numeric, 2),
           (ARRAY['new', 'paid', 'shipped'])[n % 3 + 1], timestamp '2026-01-01' + n * interval '31 hours'
    FROM generate_series(1, 60) AS n;
"""


@dataclass(frozen=True)
class PgTarget:
    url: str
    name: str
    database_id: int
    canary: psycopg.Connection[Any]  # its backend is what pg_terminate_backend is aimed at
    folder: Path  # where COPY ... TO PROGRAM would leave its marker

    def state(self) -> dict[str, str]:
        """What the database holds now (read as the superuser), the canary's connection, and
        what a program run by the server would leave in the folder."""
        found = postgres_state(self.url)
        found["canary"] = str(self.canary.execute("SELECT 1").fetchone())
        found["marker"] = str(sorted(path.name for path in self.folder.iterdir()))
        return found


@dataclass(frozen=True)
class SqliteTarget:
    path: Path
    folder: Path  # where ATTACH, VACUUM INTO and writefile would leave a file

    def state(self) -> dict[str, str]:
        found = {"files": str(sorted(path.name for path in self.folder.iterdir()))}
        with sqlite3.connect(f"file:{self.path}?mode=ro", uri=True) as examples:
            objects = examples.execute("SELECT type, name, sql FROM sqlite_master ORDER BY name").fetchall()
            found["objects"] = repr(objects)
            found["user_version"] = str(examples.execute("PRAGMA user_version").fetchone())
            for _, name, _ in objects:
                if name.startswith("sqlite_"):
                    continue
                rows = examples.execute(f'SELECT * FROM "{name}" ORDER BY rowid').fetchall()
                found[f"rows {name}"] = str(hash(tuple(rows)))
        return found


@dataclass(frozen=True)
class Targets:
    sqlite: SqliteTarget
    postgres: PgTarget


@pytest.fixture
async def targets(
    supersets: dict[str, Instance], database_url: str, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Targets]:
    """The example database, and a PostgreSQL scratch database with sample data registered in
    the dev Superset (DML allowed), removed again afterwards."""
    examples = supersets["dev"].folder.parent / "examples.db"
    sqlite_folder = tmp_path_factory.mktemp("sqlite-side-effects")
    # COPY ... TO PROGRAM would run as the server's own user: a folder it could write to.
    pg_folder = Path("/tmp") / f"sstools-sql-{uuid.uuid4().hex[:8]}"
    pg_folder.mkdir(mode=0o777)
    pg_folder.chmod(0o777)
    superset = client(supersets["dev"], PASSWORD_ENV)
    try:
        with scratch_database(database_url) as url:
            with psycopg.connect(url, autocommit=True) as setup:
                setup.execute(PG_SCHEMA)
            name = url.rsplit("/", 1)[1]
            database_id = await add_database(superset, f"sql guard {name}", url)
            try:
                with psycopg.connect(url, autocommit=True) as canary:
                    postgres = PgTarget(url, name, database_id, canary, pg_folder)
                    yield Targets(SqliteTarget(examples, sqlite_folder), postgres)
            finally:
                await superset.delete(f"/api/v1/database/{database_id}")
    finally:
        await superset.aclose()
        for path in pg_folder.iterdir():
            path.unlink()
        pg_folder.rmdir()


def _writes(targets: Targets) -> list[tuple[str, str]]:
    """(target, statement): each writes, or has a side effect, or cannot be judged."""
    pg = targets.postgres
    pid = pg.canary.info.backend_pid
    dsn = f"host=127.0.0.1 dbname={pg.name} user=postgres"
    folder = targets.sqlite.folder
    sqlite = [
        TWO_FACED,
        "SELECT * INTO sales_copy FROM sales",
        "INSERT INTO sales (day, region, product, amount) VALUES ('2026-12-31', 'North', 'Widget', 1)",
        "UPDATE sales SET amount = 0 WHERE region = 'North'",
        "DELETE FROM events WHERE kind = 'login'",
        "DROP TABLE orders",
        "CREATE TABLE pwned (a INTEGER)",
        "ALTER TABLE sales ADD COLUMN pwned INTEGER",
        "CREATE VIEW pwned_view AS SELECT * FROM sales",
        "CREATE INDEX pwned_idx ON sales (region)",
        "CREATE TRIGGER pwned_trigger AFTER INSERT ON sales BEGIN DELETE FROM events; END",
        "REPLACE INTO sales (id, day, region, product, amount) VALUES (1, '2026-01-01', 'X', 'X', 0)",
        "INSERT OR REPLACE INTO orders (id, created_at, customer, status, total)"
        " VALUES (1, '2026', 'x', 'x', 0)",
        f"ATTACH DATABASE '{folder}/attached.db' AS pwned",
        f"VACUUM INTO '{folder}/copy.db'",
        "PRAGMA user_version = 42",
        "ANALYZE",
        "SELECT 1; DELETE FROM sales",
        "SELECT region FROM sales /* only a read */; UPDATE sales SET region = 'Nowhere'",
        "WITH doomed AS (SELECT id FROM sales LIMIT 5) DELETE FROM sales WHERE id IN (SELECT id FROM doomed)",
        "UPDATE sales SET amount = amount + 1 RETURNING id",
        f"SELECT load_extension('{folder}/evil')",
        f"SELECT 1 AS a UNION ALL SELECT load_extension('{folder}/evil')",
        "BEGIN; DELETE FROM orders; COMMIT",
        f"SELECT region FROM sales WHERE amount > (SELECT writefile('{folder}/written.txt', 'x'))",
        # reads that would build a gigabyte inside Superset's own process
        "SELECT zeroblob(1000000000)",
        "SELECT length(randomblob(2000000000))",
        "SELECT hex(zeroblob(day)) FROM sales",
    ]
    postgres = [
        "SELECT * INTO orders_copy FROM orders",
        "SELECT nextval('invoice_seq')",
        "SELECT setval('invoice_seq', 1000)",
        f"SELECT pg_terminate_backend({pid})",
        f"SELECT pg_cancel_backend({pid})",
        "SELECT lo_import('/etc/hostname')",
        "SELECT lo_from_bytea(0, 'pwned')",
        f"SELECT dblink_exec('{dsn}', 'INSERT INTO audit_log (note) VALUES (''dblink'')')",
        f"SELECT * FROM dblink('{dsn}', 'DELETE FROM orders RETURNING id') AS gone(id int)",
        "SELECT set_config('default_transaction_read_only', 'off', false)",
        "SELECT pg_sleep(3)",
        "SELECT bump()",
        "SELECT 1 AS n UNION ALL SELECT bump()",
        "SELECT * FROM orders WHERE id = (SELECT bump())",
        "SELECT public.bump()",
        'SELECT "bump"()',
        "WITH gone AS (DELETE FROM orders RETURNING *) SELECT count(*) FROM gone",
        "WITH changed AS (UPDATE orders SET amount = 0 RETURNING id) SELECT id FROM changed",
        "WITH added AS (INSERT INTO audit_log (note) VALUES ('cte') RETURNING id) SELECT id FROM added",
        "SELECT * FROM orders FOR UPDATE",
        "SELECT id FROM orders FOR SHARE SKIP LOCKED",
        "TRUNCATE orders",
        f"COPY (SELECT 1) TO PROGRAM 'touch {pg.folder}/copied'",
        "CREATE TABLE pwned AS SELECT 1 AS a",
        "ALTER TABLE orders ADD COLUMN pwned int",
        "DROP TABLE customers CASCADE",
        "SELECT txid_current()",
        "SELECT pg_advisory_lock(42)",
        "SELECT pg_notify('pwned', 'x')",
        "DO $$BEGIN DELETE FROM orders; END$$",
        "EXPLAIN ANALYZE DELETE FROM orders",
        "SET default_transaction_read_only = off",
        "LOCK TABLE orders IN ACCESS EXCLUSIVE MODE",
        "GRANT ALL ON orders TO PUBLIC",
        "COMMENT ON TABLE orders IS 'pwned'",
        "CREATE FUNCTION pwned() RETURNS int LANGUAGE sql AS 'SELECT 1'",
        "INSERT INTO audit_log (note) VALUES ('x') ON CONFLICT DO NOTHING",
        "MERGE INTO orders o USING customers c ON o.customer_id = c.id WHEN MATCHED THEN DELETE",
        "SELECT 1; DELETE FROM orders",
        "UPDATE orders SET status = 'void' WHERE id IN (SELECT id FROM orders ORDER BY id LIMIT 3)",
        f"CREATE ROLE sstools_pwned_{uuid.uuid4().hex[:8]}",
        f"ALTER DATABASE \"{pg.name}\" SET work_mem = '64MB'",
        "REFRESH MATERIALIZED VIEW order_totals",
        "CALL archive_orders()",
        # reads that load the server: a gigabyte value, series without end
        "SELECT length(repeat('x', 1000000000))",
        "SELECT count(*) FROM generate_series(1, 100000000000)",
        "SELECT string_agg(repeat('x', 100000), ',') FROM generate_series(1, 100000)",
        "SELECT lpad(name, 1000000000) FROM customers",
        "SELECT count(*) FROM generate_series(1, (SELECT max(id) FROM orders) * 1000000000)",
        # attribute notation: a name that is no column of the row is a call of leak(row)
        "SELECT c.leak FROM customers c",
        "SELECT customers.leak FROM customers",
        "SELECT public.customers.leak FROM public.customers",
        "SELECT (c).leak FROM customers c",
        "SELECT x.leak FROM (SELECT * FROM customers) x",
        "SELECT c.city FROM customers c WHERE c.leak IS NOT NULL",
        "SELECT c.name FROM customers AS c(key, leak) WHERE c.city IS NOT NULL",
        # the schema of a qualified name is looked up in Superset, which writes it into SQL
        'SELECT c.id FROM "public""; DELETE FROM orders; COMMIT; --".customers c',
    ]
    return [("sqlite", sql) for sql in sqlite] + [("postgres", sql) for sql in postgres]


@dataclass(frozen=True)
class Read:
    target: str
    sql: str
    column: str  # compared, in the first row, with what the database itself answers
    schema: str | None = None  # the schema SQL Lab runs it in


READS = (
    Read("sqlite", "SELECT region, COUNT(*) AS n FROM sales GROUP BY region ORDER BY region", "n"),
    Read(
        "sqlite",
        "SELECT id, SUM(amount) OVER (PARTITION BY region ORDER BY id) AS running FROM sales"
        " ORDER BY region DESC, id DESC",
        "running",
    ),
    Read(
        "sqlite",
        "WITH monthly AS (SELECT strftime('%Y-%m', day) AS month, SUM(amount) AS total FROM sales"
        " GROUP BY 1) SELECT month, ROUND(total, 2) AS total FROM monthly ORDER BY total DESC",
        "total",
    ),
    Read(
        "sqlite",
        "SELECT e.kind, COUNT(*) AS n FROM events e JOIN orders o ON o.id = e.user_id"
        " GROUP BY e.kind ORDER BY n DESC, e.kind",
        "n",
    ),
    Read(
        "sqlite",
        "SELECT date(day, 'start of month') AS month_start, julianday(MAX(day)) - julianday(MIN(day)) AS span"
        " FROM sales GROUP BY 1 ORDER BY 1",
        "span",
    ),
    Read(
        "sqlite",
        "SELECT product, region, total, RANK() OVER (PARTITION BY product ORDER BY total DESC) AS rnk"
        " FROM (SELECT product, region, SUM(amount) AS total FROM sales GROUP BY 1, 2) ORDER BY product, rnk",
        "total",
    ),
    Read(
        "sqlite",
        "SELECT status, SUM(CASE WHEN total > 500 THEN 1 ELSE 0 END) AS big,"
        " ROUND(AVG(total), 2) AS avg_total FROM orders GROUP BY status ORDER BY status",
        "avg_total",
    ),
    Read(
        "sqlite",
        "SELECT UPPER(SUBSTR(customer, 1, 10)) AS prefix, COUNT(DISTINCT customer) AS customers FROM orders"
        " GROUP BY 1 ORDER BY customers DESC, prefix",
        "customers",
    ),
    Read(
        "sqlite",
        "SELECT COUNT(*) AS n FROM sales WHERE amount > (SELECT AVG(amount) FROM sales) /* above average */",
        "n",
    ),
    Read(
        "postgres",
        "SELECT c.city, COUNT(o.id) AS orders, SUM(o.amount) AS revenue FROM customers c"
        " LEFT JOIN orders o ON o.customer_id = c.id GROUP BY c.city ORDER BY c.city",
        "revenue",
    ),
    Read(
        "postgres",
        "WITH ranked AS (SELECT customer_id, amount,"
        " ROW_NUMBER() OVER (PARTITION BY customer_id ORDER BY amount DESC, id) AS rn FROM orders)"
        " SELECT customer_id, amount FROM ranked WHERE rn = 1 ORDER BY customer_id",
        "amount",
    ),
    Read(
        "postgres",
        "SELECT EXTRACT(MONTH FROM ordered_at)::int AS month, COUNT(*) AS n,"
        " date_trunc('month', ordered_at)::date::text AS starts FROM orders GROUP BY 1, 3 ORDER BY 1",
        "n",
    ),
    Read(
        "postgres",
        "SELECT status, COUNT(*) FILTER (WHERE amount > 100) AS big,"
        " percentile_cont(0.5) WITHIN GROUP (ORDER BY amount) AS median FROM orders GROUP BY status"
        " ORDER BY status",
        "median",
    ),
    Read(
        "postgres",
        "SELECT id, amount - LAG(amount) OVER (ORDER BY ordered_at, id) AS delta FROM orders"
        " ORDER BY ordered_at DESC, id DESC",
        "delta",
    ),
    Read(
        "postgres",
        "SELECT city, string_agg(name, ', ' ORDER BY name) AS names FROM customers"
        " GROUP BY city ORDER BY city",
        "names",
    ),
    Read(
        "postgres",
        "SELECT g.day::date::text AS day, COUNT(o.id) AS n"
        " FROM generate_series(timestamp '2026-01-01', timestamp '2026-01-10', interval '1 day') AS g(day)"
        " LEFT JOIN orders o ON date_trunc('day', o.ordered_at) = g.day"
        " GROUP BY g.day ORDER BY n DESC, g.day",
        "n",
    ),
    Read(
        "postgres",
        "SELECT COUNT(*) AS n, MAX(age(date '2026-06-01', since))::text AS oldest FROM customers"
        " WHERE since < now() - interval '30 days'",
        "oldest",
    ),
    # One string to PostgreSQL (its E'' string runs to the last quote), two statements to SQLite.
    Read("postgres", TWO_FACED.replace("--'", "--' AS s"), "s"),
    # qualified names that are columns, as the stored tables (renamed, starred, in a schema) have them
    Read(
        "postgres",
        "SELECT x.city, x.n FROM (SELECT c.*, o.amount AS n FROM customers c JOIN orders o"
        " ON o.customer_id = c.id) x ORDER BY x.n DESC, x.id",
        "city",
    ),
    Read("postgres", "SELECT k.town FROM customers AS k(key, label, town) ORDER BY k.key DESC", "town"),
    Read(
        "postgres", "SELECT public.orders.status FROM public.orders ORDER BY public.orders.id DESC", "status"
    ),
    Read("postgres", "SELECT m.revenue FROM monthly m ORDER BY m.month DESC", "revenue", schema="reports"),
)


async def _as_agent_for(stack: AgentStack, username: str) -> dict[str, str]:
    """Both identities as the agent sends them: one service token for every call, as the agent
    keeps its own (ops issues a client only so many a minute)."""
    async with httpx.AsyncClient(base_url=stack.ops_url, timeout=30) as http:
        service = await http.post(
            "/api/auth/service-token", json={"client_id": "agent", "client_secret": AGENT_SECRET}
        )
    assert service.status_code == 200, service.text
    return {
        "Authorization": f"Bearer {service.json()['access_token']}",
        "X-User-Authorization": f"Bearer {stack.token(username)}",
    }


async def _shape(
    stack: AgentStack, headers: dict[str, str], database_id: int, sql: str, schema: str | None = None
) -> dict[str, Any]:
    """Ops' judgement, asked as the agent asks it."""
    statement = {"database_id": database_id, "sql": sql, "schema": schema}
    async with httpx.AsyncClient(base_url=stack.ops_url, timeout=30) as http:
        reply = await http.post("/api/envs/dev/sql/shape", json=statement, headers=headers)
    assert reply.status_code == 200, reply.text
    return dict(reply.json())


async def _analyst_runs(
    stack: AgentStack, llm: FakeLlm, session: Client, database_id: int, sql: str, schema: str | None = None
) -> Any:
    llm.script.clear()
    arguments = {"env_id": "dev", "database_id": database_id, "sql": sql}
    call = ToolCall("superset_execute_sql", arguments | ({"schema": schema} if schema else {}))
    llm.says(Reply(tool_calls=(call,)), Reply(content="Готово."))
    return await stack.say("выполни запрос", new_conversation(), client=session)


def _database(targets: Targets, target: str) -> tuple[int, Callable[[], dict[str, str]]]:
    if target == "sqlite":
        return EXAMPLES, targets.sqlite.state
    return targets.postgres.database_id, targets.postgres.state


@pytest.mark.timeout(900)
async def test_statements_that_write_are_judged_changing_and_never_run_for_an_analyst(
    llm_stack: AgentStack, llm: FakeLlm, targets: Targets
) -> None:
    writes = _writes(targets)
    assert len(writes) >= 40
    assert {target for target, _ in writes} == {"sqlite", "postgres"}
    session = await asyncio.to_thread(llm_stack.client, "anna")
    headers = await _as_agent_for(llm_stack, "anna")
    problems = []
    for target, sql in writes:
        database_id, state = _database(targets, target)
        before = await asyncio.to_thread(state)
        shape = await _shape(llm_stack, headers, database_id, sql)
        reply = await _analyst_runs(llm_stack, llm, session, database_id, sql)
        after = await asyncio.to_thread(state)
        where = f"[{target}] {sql}"
        if shape["read_only"]:
            problems.append(f"{where}: judged read-only {shape}")
        if [end for end in reply.of("tool_end") if end["tool"] == "superset_execute_sql"]:
            problems.append(f"{where}: it ran: {dump(reply)}")
        refused = reply.of("permission_denied") + [
            error for error in reply.of("tool_error") if error["error"].get("code") == "permission_denied"
        ]
        if not refused:
            problems.append(f"{where}: not refused as permission_denied: {dump(reply)}")
        changed = {
            key: (before.get(key), after.get(key))
            for key in sorted(before.keys() | after.keys())
            if before.get(key) != after.get(key)
        }
        if changed:
            problems.append(f"{where}: changed {changed}")
    assert not problems, "\n".join(problems)


def _expected(targets: Targets, read: Read) -> Any:
    """The column's value in the first row, as the database itself answers the statement."""
    if read.target == "sqlite":
        with sqlite3.connect(f"file:{targets.sqlite.path}?mode=ro", uri=True) as examples:
            lite = examples.execute(read.sql)
            names = [column[0] for column in lite.description]
            return dict(zip(names, lite.fetchone(), strict=True))[read.column]
    with psycopg.connect(targets.postgres.url) as connection:
        if read.schema:
            connection.execute(pgsql.SQL("SET search_path = {}").format(pgsql.Identifier(read.schema)))
        pg = connection.execute(read.sql)
        row = pg.fetchone()
        assert row is not None
        assert pg.description is not None
        return dict(zip([column.name for column in pg.description], row, strict=True))[read.column]


def _same(answered: Any, expected: Any) -> bool:
    if isinstance(expected, (int, float, Decimal)) and not isinstance(expected, bool):
        return answered is not None and abs(float(answered) - float(expected)) < 1e-6
    return bool(answered == expected)


# One stack per target: an analyst may run only so many statements a minute (ops' heavy-read budget).
@pytest.mark.timeout(600)
@pytest.mark.parametrize("target", ["sqlite", "postgres"])
async def test_analytical_reads_stay_read_only_and_run_for_an_analyst(
    llm_stack: AgentStack, llm: FakeLlm, targets: Targets, target: str
) -> None:
    reads = [read for read in READS if read.target == target]
    assert len(reads) >= 9
    session = await asyncio.to_thread(llm_stack.client, "anna")
    headers = await _as_agent_for(llm_stack, "anna")
    problems = []
    for read in reads:
        database_id, _ = _database(targets, read.target)
        where = f"[{read.target}] {read.sql}"
        shape = await _shape(llm_stack, headers, database_id, read.sql, read.schema)
        if not shape["read_only"]:
            problems.append(f"{where}: judged changing {shape}")
            continue
        reply = await _analyst_runs(llm_stack, llm, session, database_id, read.sql, read.schema)
        ends = [end for end in reply.of("tool_end") if end["tool"] == "superset_execute_sql"]
        if len(ends) != 1 or not ends[0]["output"].get("rows"):
            problems.append(f"{where}: no rows: {dump(reply)}")
            continue
        answered = ends[0]["output"]["rows"][0].get(read.column)
        expected = await asyncio.to_thread(_expected, targets, read)
        if not _same(answered, expected):
            problems.append(f"{where}: {read.column} = {answered!r}, the database says {expected!r}")
    assert not problems, "\n".join(problems)


async def test_a_read_runs_behind_a_guard_that_makes_the_database_refuse_writes(
    supersets: dict[str, Instance], targets: Targets
) -> None:
    """The second line of defence, sent straight to Superset as ops sends a read: even a write
    the parser let through would be refused by the database itself, and PostgreSQL ends a read
    at ops' time limit."""
    superset = client(supersets["dev"], PASSWORD_ENV)
    pg = targets.postgres.database_id
    cases = [
        ("sqlite", EXAMPLES, "DELETE FROM sales", "attempt to write a readonly database"),
        ("postgres", pg, "SELECT bump()", "read-only transaction"),
        ("postgres", pg, "SELECT nextval('invoice_seq')", "read-only transaction"),
    ]
    try:
        for target, database_id, sql, refusal in cases:
            _, state = _database(targets, target)
            before = await asyncio.to_thread(state)
            guarded = f"{sqllab.read_guard(target, 60)};\n{sql}"
            with pytest.raises(SupersetError, match=refusal):
                await sqllab.execute(superset, database_id, guarded, schema=None, limit=9, timeout_seconds=60)
            assert await asyncio.to_thread(state) == before, sql
        started = time.monotonic()
        slow = f"{sqllab.read_guard('postgres', 1)};\nSELECT count(*) FROM generate_series(1, 10000000000)"
        with pytest.raises(SupersetError, match="statement timeout"):
            await sqllab.execute(superset, pg, slow, schema=None, limit=9, timeout_seconds=60)
        assert time.monotonic() - started < 30
        read = await sqllab.execute(
            superset,
            pg,
            f"{sqllab.read_guard('postgres', 60)};\nSELECT count(*) AS n FROM orders",
            schema=None,
            limit=10,
            timeout_seconds=60,
        )
        assert read.rows == [{"n": 60}]
    finally:
        await superset.aclose()


# Each reaches Superset's `set search_path = "{schema}"` as SQL, or names a table that is not one.
INJECTED_SCHEMAS = (
    'public"; DELETE FROM orders; COMMIT; --',
    'public"; DROP SCHEMA reports CASCADE; --',
    "public; TRUNCATE customers",
    'reports"',
    "public\nDELETE FROM orders",
    "pg_catalog, public",
)
INJECTED_TABLES = ("orders; DROP TABLE customers", 'orders" CASCADE; --', "../orders", "orders customers")


async def test_a_schema_or_table_that_carries_sql_is_refused_before_any_call_and_changes_nothing(
    llm_stack: AgentStack, llm: FakeLlm, targets: Targets
) -> None:
    """Every argument that Superset puts into SQL is judged, not only the statement: an analyst's
    read with a schema that carries SQL is refused by the agent's gate (it never reaches ops),
    and by ops itself when sent as the agent sends calls; so is a table or schema for a dataset
    or an exploration, and a well-formed schema the database does not have. The database is
    unchanged; a real second schema works."""
    pg = targets.postgres
    session = await asyncio.to_thread(llm_stack.client, "anna")
    headers = await _as_agent_for(llm_stack, "anna")
    before = await asyncio.to_thread(pg.state)
    problems = []
    database = pg.database_id
    count = "SELECT count(*) FROM orders"
    calls = [
        *(
            (tool, args)
            for schema in INJECTED_SCHEMAS
            for tool, args in (
                ("superset_execute_sql", {"database_id": database, "sql": count, "schema": schema}),
                (
                    "superset_create_dataset",
                    {"database_id": database, "table_name": "orders", "schema": schema},
                ),
                ("superset_explore_database", {"database_id": database, "schema": schema}),
            )
        ),
        *(
            (tool, args)
            for table in INJECTED_TABLES
            for tool, args in (
                (
                    "superset_create_dataset",
                    {"database_id": database, "table_name": table, "schema": "public"},
                ),
                ("superset_explore_database", {"database_id": database, "schema": "public", "table": table}),
            )
        ),
    ]
    for tool, args in calls:
        llm.script.clear()
        llm.says(Reply(tool_calls=(ToolCall(tool, {"env_id": "dev", **args}),)), Reply(content="Готово."))
        reply = await llm_stack.say("сделай это", new_conversation(), client=session)
        ran = reply.of("tool_end") + reply.of("confirm_required")
        codes = [error["error"].get("code") for error in reply.of("tool_error")]
        if ran or codes != ["invalid_arguments"]:
            problems.append(f"chat {tool} {args}: {codes} {dump(reply)}")
    async with httpx.AsyncClient(base_url=llm_stack.ops_url, timeout=60, headers=headers) as ops:
        # Ops judges them too, for any caller: the reads as the agent would send them (a write
        # is not taken at all before its confirmation).
        sent: list[tuple[str, str, dict[str, Any]]] = []
        for schema in INJECTED_SCHEMAS:
            read = {"database_id": database, "sql": count, "schema": schema}
            sent += [
                ("POST", "/api/envs/dev/sql", {"json": read}),
                ("GET", "/api/envs/dev/databases", {"params": {"database_id": database, "schema": schema}}),
            ]
        for table in INJECTED_TABLES:
            where = {"database_id": database, "schema": "public", "table": table}
            sent.append(("GET", "/api/envs/dev/databases", {"params": where}))
        for method, path, request in sent:
            answer = await ops.request(method, path, **request)
            if answer.status_code != 422:
                problems.append(f"ops {method} {path} {request}: {answer.status_code} {answer.text[:300]}")
        assert not problems, "\n".join(problems)
        assert await asyncio.to_thread(pg.state) == before
        # Well-formed, but not the database's: Superset is not sent it.
        unknown = await ops.post(
            "/api/envs/dev/sql",
            json={"database_id": pg.database_id, "sql": "SELECT 1 AS one", "schema": "nosuch"},
        )
        assert unknown.status_code == 404, unknown.text
        assert unknown.json()["detail"]["code"] == "unknown_schema"
        missing = await ops.get(
            "/api/envs/dev/databases",
            params={"database_id": pg.database_id, "schema": "reports", "table": "nosuch"},
        )
        assert missing.status_code == 404, missing.text
        assert missing.json()["detail"]["code"] == "unknown_table"
        # A real schema of the database: the statement reads in it.
        monthly = await ops.post(
            "/api/envs/dev/sql",
            json={
                "database_id": pg.database_id,
                "sql": "SELECT count(*) AS n FROM monthly",
                "schema": "reports",
            },
        )
        assert monthly.status_code == 200, monthly.text
        assert monthly.json()["rows"] == [{"n": 2}]
