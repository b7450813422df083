"""Demo data for local Superset: an example database (sales, orders, events), dashboards and
charts in dev — one chart deliberately broken, its table dropped after the chart was saved — a
role that may read only the sales table and a user holding it, so the health summary and the
permission audit have something real to find. Prod gets only the example database.

Given a PostgreSQL database of its own, both instances also get it as ``demo_postgres`` (accounts
and invoices in ``public``, monthly revenue in a second schema, ``reports``; a dataset on that
table in dev), so SQL, exploration and datasets meet a second dialect and a second schema. Given
another, both list it as ``demo_vetclinic``: the veterinary clinics of the eval's second held-out
part (``services/agent/eval/domain/``), made by that part's own script.

Seeding goes through the same Superset client ops uses, over Superset's REST API.
"""

import asyncio
import json
import os
import random
import secrets
import sqlite3
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import psycopg
from sqlalchemy import make_url

from sstools.devstack.paths import VETCLINIC_SQL
from sstools.devstack.superset import (
    ADMIN_USERNAME,
    Instance,
    SupersetHome,
    SupersetSso,
    prepare_instance,
    running,
)
from sstools.ops.environments import parse_environments
from sstools.ops.superset import sqllab
from sstools.ops.superset.client import SupersetClient

EXAMPLES_DATABASE = "examples"
BROKEN_TABLE = "legacy_kpis"
ANALYST_ROLE = "Sales Analyst"
ANALYST_USER = "alice"
READER_ROLE = "Reader"  # Gamma's pages, every dataset read, nothing written
# The people of the test stacks and of `make run`'s sign-in provider as Superset knows them (ops
# acts in Superset as each of them, by name), in both instances: what each may do there is
# Superset's own say; a provider's sign-in then finds them by name. Alice, who reads only the
# sales dataset, is added in dev with her role.
SUPERSET_PEOPLE: dict[str, tuple[str, ...]] = {
    "root": ("Admin",),
    "oleg": ("Admin",),
    "anna": ("Alpha", "sql_lab"),
    "vera": ("Gamma", READER_ROLE),
    "ana": ("Alpha", "sql_lab"),
    "olga": ("Admin",),
    "adam": ("Admin",),
}
# Where ops finds the local instances' admin password (ENVIRONMENTS names the variable).
PASSWORD_ENV = "SUPERSET_ADMIN_PASSWORD"
# One machine runs every service beside two Supersets and, in tests, a browser and other suites:
# a convo call there (its account check with ops, a cold pool) can take more than the 2 s a
# cluster's default allows. No suite tests this timeout; its own tests set theirs.
LOCAL_CONVO_TIMEOUT_SECONDS = 10.0
POSTGRES_DATABASE = "demo_postgres"  # the PostgreSQL demo's name in both Supersets
POSTGRES_SCHEMAS = ("public", "reports")
POSTGRES_DATASET = ("reports", "monthly_revenue")  # a dataset in dev
VETCLINIC_DATABASE = "demo_vetclinic"  # the clinics' demo's name in both Supersets (no dataset)
# Each table of the PostgreSQL demo, made and filled only where it is missing: a person's own
# rows and tables in that database outlive every later start.
POSTGRES_TABLES = (
    (
        "public.accounts",
        """
        CREATE TABLE public.accounts (
            id int PRIMARY KEY, name text NOT NULL, region text NOT NULL, plan text NOT NULL,
            since date NOT NULL
        );
        INSERT INTO public.accounts
            SELECT n, 'account-' || lpad(n::text, 2, '0'),
                   (ARRAY['North', 'South', 'East', 'West'])[n % 4 + 1],
                   (ARRAY['free', 'team', 'enterprise'])[n % 3 + 1], date '2025-01-01' + n * 17
            FROM generate_series(1, 8) AS n;
        """,
    ),
    (
        "public.invoices",
        """
        CREATE TABLE public.invoices (
            id int PRIMARY KEY, account_id int NOT NULL, issued_on date NOT NULL,
            amount numeric(10, 2) NOT NULL, status text NOT NULL
        );
        INSERT INTO public.invoices
            SELECT n, n % 8 + 1, date '2026-01-03' + n * 4, round((n * 53 % 700 + 49.5)::numeric, 2),
                   (ARRAY['open', 'paid', 'paid', 'overdue'])[n % 4 + 1]
            FROM generate_series(1, 40) AS n;
        """,
    ),
    (
        "reports.monthly_revenue",
        """
        CREATE TABLE reports.monthly_revenue (
            month date NOT NULL, region text NOT NULL, revenue numeric(12, 2) NOT NULL,
            PRIMARY KEY (month, region)
        );
        INSERT INTO reports.monthly_revenue VALUES
            ('2026-01-01', 'North', 1840.50), ('2026-01-01', 'South', 1210.00),
            ('2026-02-01', 'North', 2015.25), ('2026-02-01', 'South', 990.75),
            ('2026-03-01', 'North', 1766.00), ('2026-03-01', 'South', 1432.40);
        """,
    ),
)


def write_examples(path: Path) -> None:
    """A SQLite file with the example tables, the same rows every time."""
    path.unlink(missing_ok=True)
    rows = random.Random(7)
    regions = ("North", "South", "East", "West")
    products = ("Widget", "Gadget", "Gizmo")
    start = date(2026, 1, 1)
    with sqlite3.connect(path) as db:
        db.executescript(
            """
            CREATE TABLE sales (id INTEGER PRIMARY KEY, day TEXT, region TEXT, product TEXT, amount REAL);
            CREATE TABLE orders (id INTEGER PRIMARY KEY, created_at TEXT, customer TEXT, status TEXT,
                                 total REAL);
            CREATE TABLE events (id INTEGER PRIMARY KEY, at TEXT, kind TEXT, user_id INTEGER);
            CREATE TABLE legacy_kpis (id INTEGER PRIMARY KEY, name TEXT, value REAL);
            """
        )
        db.executemany(
            "INSERT INTO sales (day, region, product, amount) VALUES (?, ?, ?, ?)",
            [
                (
                    str(start + timedelta(days=rows.randrange(300))),
                    rows.choice(regions),
                    rows.choice(products),
                    round(rows.uniform(10, 500), 2),
                )
                for _ in range(400)
            ],
        )
        db.executemany(
            "INSERT INTO orders (created_at, customer, status, total) VALUES (?, ?, ?, ?)",
            [
                (
                    str(start + timedelta(days=rows.randrange(300))),
                    f"customer-{rows.randrange(40):02d}",
                    rows.choice(("new", "paid", "shipped", "cancelled")),
                    round(rows.uniform(20, 900), 2),
                )
                for _ in range(300)
            ],
        )
        db.executemany(
            "INSERT INTO events (at, kind, user_id) VALUES (?, ?, ?)",
            [
                (
                    str(start + timedelta(days=rows.randrange(300))),
                    rows.choice(("login", "view", "export", "error")),
                    rows.randrange(1, 60),
                )
                for _ in range(500)
            ],
        )
        db.execute("INSERT INTO legacy_kpis (name, value) VALUES ('uptime', 99.5)")


@dataclass(frozen=True)
class ChartSpec:
    name: str
    table: str
    viz_type: str
    metric: str  # a SQL aggregate
    groupby: tuple[str, ...] = ()


@dataclass(frozen=True)
class DashboardSpec:
    title: str
    slug: str
    charts: tuple[ChartSpec, ...]
    tag: str


DASHBOARDS = (
    DashboardSpec(
        "Sales Overview",
        "sales-overview",
        (
            ChartSpec("Revenue total", "sales", "big_number_total", "SUM(amount)"),
            ChartSpec("Revenue by region", "sales", "table", "SUM(amount)", ("region",)),
            ChartSpec("Units by product", "sales", "table", "COUNT(*)", ("product",)),
        ),
        "finance",
    ),
    DashboardSpec(
        "Orders and Events",
        "orders-events",
        (
            ChartSpec("Orders by status", "orders", "table", "COUNT(*)", ("status",)),
            ChartSpec("Events by kind", "events", "table", "COUNT(*)", ("kind",)),
        ),
        "operations",
    ),
    DashboardSpec(
        "Legacy KPIs",
        "legacy-kpis",
        (ChartSpec("Legacy uptime", BROKEN_TABLE, "big_number_total", "MAX(value)"),),
        "legacy",
    ),
)


def _metric(expression: str) -> dict[str, Any]:
    return {"expressionType": "SQL", "sqlExpression": expression, "label": expression}


def _chart_body(chart: ChartSpec, dataset_id: int, dashboard_id: int) -> dict[str, Any]:
    metric = _metric(chart.metric)
    params: dict[str, Any] = {"viz_type": chart.viz_type, "datasource": f"{dataset_id}__table"}
    if chart.viz_type == "big_number_total":
        params["metric"] = metric
    else:
        params |= {"metrics": [metric], "groupby": list(chart.groupby), "query_mode": "aggregate"}
    # Without a saved query context Superset cannot run the chart's query from the API.
    query_context = {
        "datasource": {"id": dataset_id, "type": "table"},
        "force": False,
        "queries": [{"columns": list(chart.groupby), "metrics": [metric], "row_limit": 1000}],
        "form_data": params,
        "result_format": "json",
        "result_type": "full",
    }
    return {
        "slice_name": chart.name,
        "viz_type": chart.viz_type,
        "datasource_id": dataset_id,
        "datasource_type": "table",
        "params": json.dumps(params),
        "query_context": json.dumps(query_context),
        "query_context_generation": True,
        "dashboards": [dashboard_id],
    }


def _layout(title: str, charts: list[tuple[int, str, str]]) -> str:
    """A dashboard's position_json: one row per two charts. Each chart carries its uuid, as
    Superset's own editor writes it; an export treats a chart without one as misplaced."""
    layout: dict[str, Any] = {
        "DASHBOARD_VERSION_KEY": "v2",
        "ROOT_ID": {"type": "ROOT", "id": "ROOT_ID", "children": ["GRID_ID"]},
        "HEADER_ID": {"type": "HEADER", "id": "HEADER_ID", "meta": {"text": title}},
        "GRID_ID": {"type": "GRID", "id": "GRID_ID", "children": [], "parents": ["ROOT_ID"]},
    }
    for index in range(0, len(charts), 2):
        row_id = f"ROW-{index // 2}"
        layout["GRID_ID"]["children"].append(row_id)
        children: list[str] = []
        row = {
            "type": "ROW",
            "id": row_id,
            "children": children,
            "parents": ["ROOT_ID", "GRID_ID"],
            "meta": {"background": "BACKGROUND_TRANSPARENT"},
        }
        layout[row_id] = row
        for chart_id, uuid, name in charts[index : index + 2]:
            key = f"CHART-{chart_id}"
            children.append(key)
            layout[key] = {
                "type": "CHART",
                "id": key,
                "children": [],
                "parents": ["ROOT_ID", "GRID_ID", row_id],
                "meta": {"chartId": chart_id, "uuid": uuid, "sliceName": name, "width": 6, "height": 50},
            }
    return json.dumps(layout)


async def add_database(client: SupersetClient, name: str, sqlalchemy_uri: str) -> int:
    """A database in SQL Lab, its id returned. DML is allowed: ops decides who may run it, and
    Superset must not stop an admin (nor hide a hole in ops' judgement from a test)."""
    database = await client.post(
        "/api/v1/database/",
        {
            "database_name": name,
            "sqlalchemy_uri": sqlalchemy_uri,
            "expose_in_sqllab": True,
            "allow_dml": True,
            "allow_run_async": False,
        },
    )
    return int(database["id"])


async def add_examples_database(client: SupersetClient, examples: Path) -> int:
    return await add_database(client, EXAMPLES_DATABASE, f"sqlite:///{examples}")


async def seed_dev(client: SupersetClient, examples: Path) -> None:
    database_id = await add_examples_database(client, examples)
    datasets: dict[str, int] = {}
    for table in ("sales", "orders", "events", BROKEN_TABLE):
        created = await client.post("/api/v1/dataset/", {"database": database_id, "table_name": table})
        datasets[table] = int(created["id"])
    for dashboard in DASHBOARDS:
        created = await client.post(
            "/api/v1/dashboard/",
            {"dashboard_title": dashboard.title, "slug": dashboard.slug, "published": True},
        )
        dashboard_id = int(created["id"])
        charts = []
        for chart in dashboard.charts:
            body = _chart_body(chart, datasets[chart.table], dashboard_id)
            chart_id = int((await client.post("/api/v1/chart/", body))["id"])
            uuid = (await client.get(f"/api/v1/chart/{chart_id}"))["result"]["uuid"]
            charts.append((chart_id, uuid, chart.name))
        await client.put(
            f"/api/v1/dashboard/{dashboard_id}", {"position_json": _layout(dashboard.title, charts)}
        )
        tagged = {"name": dashboard.tag, "objects_to_tag": [["dashboard", dashboard_id]]}
        await client.post("/api/v1/tag/", tagged)
    await _add_sales_analyst(client, database_id)
    with sqlite3.connect(examples) as db:
        db.execute(f"DROP TABLE {BROKEN_TABLE}")  # the chart stays, its query now fails


async def _add_role(client: SupersetClient, name: str, permission: str, on: str) -> None:
    """A role holding ``permission`` on the one resource whose name starts with ``on``."""
    permission_ids: list[int] = []
    page = 0
    while not permission_ids:
        batch = await client.get(
            "/api/v1/security/permissions-resources/", q={"page_size": 100, "page": page}
        )
        if not batch["result"]:
            raise RuntimeError(f"Superset has no {permission} permission on {on}")
        permission_ids = [
            item["id"]
            for item in batch["result"]
            if item["permission"]["name"] == permission and item["view_menu"]["name"].startswith(on)
        ]
        page += 1
    role = await client.post("/api/v1/security/roles/", {"name": name})
    await client.post(
        f"/api/v1/security/roles/{role['id']}/permissions", {"permission_view_menu_ids": permission_ids}
    )


async def add_person(client: SupersetClient, username: str, roles: tuple[str, ...]) -> None:
    """A Superset user holding ``roles`` (by name), with a password nobody is told: ops acts as
    them by name, and a person signs in through the identity provider."""
    listed = await client.get("/api/v1/security/roles/", q={"page_size": 100})
    ids = {item["name"]: item["id"] for item in listed["result"]}
    await client.post(
        "/api/v1/security/users/",
        {
            "active": True,
            "username": username,
            "first_name": username.capitalize(),
            "last_name": "Demo",
            "email": f"{username}@example.com",
            "password": secrets.token_urlsafe(18),
            "roles": [ids[role] for role in roles],
        },
    )


async def add_people(client: SupersetClient) -> None:
    """The people of :data:`SUPERSET_PEOPLE` whom the instance lacks, and the role the viewers
    among them read with (on every start: a kept instance meets people added since)."""
    roles = await client.get("/api/v1/security/roles/", q={"page_size": 100})
    if READER_ROLE not in {item["name"] for item in roles["result"]}:
        await _add_role(client, READER_ROLE, "all_datasource_access", "all_datasource_access")
    users = await client.get("/api/v1/security/users/", q={"page_size": 100, "columns": ["username"]})
    known = {item["username"] for item in users["result"]}
    for username, held in SUPERSET_PEOPLE.items():
        if username not in known:
            await add_person(client, username, held)


async def _add_sales_analyst(client: SupersetClient, database_id: int) -> None:
    """A role that may read only the sales dataset, and a user who holds it with Gamma."""
    await _add_role(client, ANALYST_ROLE, "datasource_access", f"[{EXAMPLES_DATABASE}].[sales]")
    await add_person(client, ANALYST_USER, (ANALYST_ROLE, "Gamma"))


def environments(instances: Mapping[str, Instance], password_env: str) -> str:
    """ENVIRONMENTS for ops, pointing at local instances."""
    return json.dumps(
        [
            {
                "id": instance.env_id,
                "name": instance.env_id.capitalize(),
                "url": instance.url,
                "browser_url": instance.url,  # opened in a browser at the same address
                "username": ADMIN_USERNAME,
                "password_env": password_env,
            }
            for instance in instances.values()
        ]
    )


def with_production_alias(listed: str, alias: str = "live", of: str = "dev") -> str:
    """ENVIRONMENTS with one more entry: ``of``'s instance again as ``alias``, configured as
    production (an id that does not say so)."""
    entries = json.loads(listed)
    copy = next(entry for entry in entries if entry["id"] == of)
    return json.dumps([*entries, {**copy, "id": alias, "name": alias.capitalize(), "production": True}])


def client(instance: Instance, password_env: str) -> SupersetClient:
    return SupersetClient(
        parse_environments(environments({instance.env_id: instance}, password_env))[instance.env_id]
    )


@contextmanager
def local_supersets(
    home: SupersetHome,
    folder: Path,
    ports: Mapping[str, int],
    agent_url: str | None = None,
    postgres: str | None = None,
    ops_jwks_url: str | None = None,
    sso: Mapping[str, SupersetSso] | None = None,
    vetclinic: str | None = None,
) -> Iterator[dict[str, Instance]]:
    """Dev and prod Superset running from ``folder``, seeded on their first start; with
    ``agent_url``, each page loads that agent's drawer; with ``ops_jwks_url`` (where ops
    publishes its keys), ops may act in each as a person; with ``sso`` (by environment id),
    people sign in to each through that provider; with ``postgres`` (the URL of a
    database of the demo's own, as the role that owns it), that database holds the PostgreSQL
    demo and both instances list it, on every start that finds it missing; with ``vetclinic``
    (another such URL), the same for the veterinary clinics' demo."""
    instances = {
        env_id: prepare_instance(
            home, folder / env_id, env_id, port, agent_url, ops_jwks_url, (sso or {}).get(env_id)
        )
        for env_id, port in ports.items()
    }
    marker = folder / ".seeded"
    os.environ.setdefault(PASSWORD_ENV, home.admin_password())
    with running(home, instances.values()):
        if not marker.exists():
            asyncio.run(_seed(instances, folder / "examples.db"))
            marker.touch()
        asyncio.run(_people(instances))
        if postgres is not None:
            write_postgres_demo(postgres)
            asyncio.run(_register_demo(instances, POSTGRES_DATABASE, postgres, POSTGRES_DATASET))
        if vetclinic is not None:
            write_vetclinic_demo(vetclinic)
            asyncio.run(_register_demo(instances, VETCLINIC_DATABASE, vetclinic))
        yield instances


async def _seed(instances: Mapping[str, Instance], examples: Path) -> None:
    write_examples(examples)
    for env_id, instance in instances.items():
        superset = client(instance, PASSWORD_ENV)
        try:
            if env_id == "dev":
                await seed_dev(superset, examples)
            else:
                await add_examples_database(superset, examples)
        finally:
            await superset.aclose()


async def _people(instances: Mapping[str, Instance]) -> None:
    for instance in instances.values():
        superset = client(instance, PASSWORD_ENV)
        try:
            await add_people(superset)
        finally:
            await superset.aclose()


def write_postgres_demo(url: str) -> None:
    """The PostgreSQL demo's schemas and tables in the database at ``url``, each table made and
    filled only if it is missing (one transaction: a start that fails leaves nothing half made)."""
    with psycopg.connect(url) as connection:
        connection.execute("CREATE SCHEMA IF NOT EXISTS reports")
        for table, script in POSTGRES_TABLES:
            if connection.execute("SELECT to_regclass(%s)", [table]).fetchone() == (None,):
                connection.execute(script)


def write_vetclinic_demo(url: str) -> None:
    """The veterinary clinics' schemas and tables in the database at ``url``, by the eval's own
    script as it is: it makes only what is missing and seeds only empty tables, in one
    transaction of its own (hence autocommit here)."""
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute(VETCLINIC_SQL.read_text(encoding="utf-8"))


async def database_id(superset: SupersetClient, name: str) -> int | None:
    """The id of the database Superset lists as ``name`` (as ops' exploration lists them), if any."""
    listed = (await sqllab.explore(superset, None, None, None)).databases or []
    return next((database.id for database in listed if database.name == name), None)


async def _register_demo(
    instances: Mapping[str, Instance], name: str, url: str, dev_dataset: tuple[str, str] | None = None
) -> None:
    """The PostgreSQL database at ``url`` as ``name`` in each instance that does not list it
    (with ``dev_dataset``, a (schema, table), as a dataset in dev)."""
    uri = make_url(url).set(drivername="postgresql+psycopg2").render_as_string(hide_password=False)
    for env_id, instance in instances.items():
        superset = client(instance, PASSWORD_ENV)
        try:
            if await database_id(superset, name) is not None:
                continue
            added = await add_database(superset, name, uri)
            if env_id == "dev" and dev_dataset is not None:
                schema, table = dev_dataset
                dataset = {"database": added, "schema": schema, "table_name": table}
                await superset.post("/api/v1/dataset/", dataset)
        finally:
            await superset.aclose()
