"""What a tool call changed, seen from outside the services: a :class:`Snapshot` of every piece of
state a tool could touch, taken before and after the call, and :func:`diff` naming what differs.

A snapshot holds, each as ``{key: marker}`` under an area name:

- ``ops.<table>``: every row of ops' own tables (tasks, backups, maintenance windows, idempotency
  records, users — every table of ``sstools.ops.store.tables`` but the logs below), by primary key;
- ``backups``: every file under ops' backup folder (path, size, SHA-256);
- ``git``: the exports repository — whether it exists, its refs and HEAD, its object count and
  worktrees;
- ``superset.<env>.<kind>``: for each Superset instance its dashboards, charts, datasets,
  databases and saved queries (id → title or name, description, change time, ...), its roles and
  its users (who, whether active, which roles);
- ``examples``: the example SQLite database Superset's "examples" connection points at — its
  schema objects, and for each table its row count and a digest of its rows;
- ``postgres``: where the scope names one, the PostgreSQL demo database both Supersets list
  (:func:`postgres_state`: its schemas, relations, rows, sequences, functions, and the server's
  roles and large objects).

Logs are not state, so a snapshot leaves them out on purpose: ops' audit table (it records every
call, reads included, by design), its sign-in counters (every service token issued is
counted) and the tasks of slow reads (a statement's or health check's result, kept for the person
to follow: every such read is one, by design), convo's conversations, messages, audit and uploads, LangGraph's
checkpoints, and Superset's query history, action log and login statistics (a user's last login
and login count, which ops' own sign-ins move).

:func:`settled` waits until ops has no queued or running task, so that what a task does after its
tool call returned is counted against that call and not the next.
"""

import asyncio
import hashlib
import json
import sqlite3
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql as psql
from sqlalchemy import select
from sqlalchemy import text as sql

from sstools.common.db import create_engine
from sstools.devstack.demo import PASSWORD_ENV, client
from sstools.devstack.superset import Instance
from sstools.ops import jobs
from sstools.ops.store import tables
from sstools.ops.superset.client import SupersetClient, SupersetError

# Logs, not state (see the module docstring).
NOT_STATE = frozenset({tables.audit.name, tables.limits.name})
OPS_TABLES = tuple(table for table in tables.metadata.sorted_tables if table.name not in NOT_STATE)

# Superset's list endpoints and the columns that mark a change of each object.
SUPERSET_KINDS: Mapping[str, tuple[str, tuple[str, ...]]] = {
    "dashboard": (
        "/api/v1/dashboard/",
        ("dashboard_title", "slug", "published", "uuid", "changed_on_utc"),
    ),
    "chart": (
        "/api/v1/chart/",
        ("slice_name", "description", "viz_type", "datasource_id", "dashboards.id", "changed_on_utc"),
    ),
    "dataset": ("/api/v1/dataset/", ("table_name", "schema", "sql", "description", "changed_on_utc")),
    "database": ("/api/v1/database/", ("database_name", "allow_dml", "expose_in_sqllab", "changed_on")),
    "saved_query": ("/api/v1/saved_query/", ("label", "sql", "description", "changed_on")),
}
# Security objects: no ``columns`` selection; the fields kept leave out login statistics.
SUPERSET_SECURITY: Mapping[str, tuple[str, tuple[str, ...]]] = {
    "role": ("/api/v1/security/roles/", ("name",)),
    "user": ("/api/v1/security/users/", ("username", "active", "email", "first_name", "last_name", "roles")),
}
PAGE_SIZE = 100
MAX_HASHED_ROWS = 200_000  # a bigger example table is compared by its row count alone


@dataclass(frozen=True)
class Scope:
    """Where a stack keeps what its tools may change."""

    database_url: str  # ops' tables
    backup_dir: Path
    git_repo: Path
    supersets: Mapping[str, Instance]
    examples: Path  # the SQLite file of Superset's "examples" database
    postgres: str | None = None  # the PostgreSQL demo database the Supersets list, if any

    @classmethod
    def of(
        cls, database_url: str, tmp_path: Path, supersets: Mapping[str, Instance], postgres: str | None = None
    ) -> "Scope":
        """The scope of a stack from ``sstools.devstack.agentstack.running_stack`` started with
        this ``tmp_path``: it gives ops ``tmp_path/backups`` and ``tmp_path/exports``; the
        session's Superset instances share one examples file beside their folders, and list the
        PostgreSQL demo at ``postgres``."""
        examples = {instance.folder.parent / "examples.db" for instance in supersets.values()}
        if len(examples) != 1 or not next(iter(examples)).exists():
            raise FileNotFoundError(f"no single examples database for these instances: {sorted(examples)}")
        backups, exports = tmp_path / "backups", tmp_path / "exports"
        return cls(database_url, backups, exports, supersets, examples.pop(), postgres)


@dataclass(frozen=True)
class Change:
    area: str
    key: str
    before: str | None  # None: it was not there
    after: str | None  # None: it is gone

    def __str__(self) -> str:
        if self.before is None:
            return f"{self.area}: + {self.key} {_short(self.after)}"
        if self.after is None:
            return f"{self.area}: - {self.key} {_short(self.before)}"
        return f"{self.area}: ~ {self.key} {_short(self.before)} → {_short(self.after)}"


@dataclass(frozen=True)
class Snapshot:
    areas: dict[str, dict[str, str]] = field(default_factory=dict)

    @classmethod
    async def take(cls, scope: Scope) -> "Snapshot":
        parts = await asyncio.gather(
            _ops_rows(scope.database_url),
            asyncio.to_thread(_backup_files, scope.backup_dir),
            asyncio.to_thread(_git, scope.git_repo),
            *(_superset(env_id, instance) for env_id, instance in sorted(scope.supersets.items())),
            asyncio.to_thread(_examples, scope.examples),
            asyncio.to_thread(_postgres, scope.postgres),
        )
        areas: dict[str, dict[str, str]] = {}
        for part in parts:
            areas.update(part)
        return cls(areas)


def diff(before: Snapshot, after: Snapshot) -> list[Change]:
    """Every key added, removed or changed, area by area."""
    changes = []
    for area in sorted(before.areas.keys() | after.areas.keys()):
        old, new = before.areas.get(area, {}), after.areas.get(area, {})
        for key in sorted(old.keys() | new.keys()):
            if old.get(key) != new.get(key):
                changes.append(Change(area, key, old.get(key), new.get(key)))
    return changes


def areas(changes: list[Change]) -> set[str]:
    return {change.area for change in changes}


def describe(changes: list[Change], limit: int = 20) -> str:
    """For assertion messages."""
    lines = [str(change) for change in changes[:limit]]
    if len(changes) > limit:
        lines.append(f"... and {len(changes) - limit} more")
    return "\n  ".join(["", *lines]) if lines else " nothing"


async def settled(database_url: str, within_seconds: float = 120) -> None:
    """Wait until ops has no task queued or running."""
    engine = create_engine(database_url, pool_size=1)
    try:
        deadline = asyncio.get_running_loop().time() + within_seconds
        while True:
            async with engine.connect() as connection:
                busy = (
                    await connection.execute(
                        sql("SELECT count(*) FROM ops_tasks WHERE status IN ('queued', 'running')")
                    )
                ).scalar_one()
            if not busy:
                return
            if asyncio.get_running_loop().time() > deadline:
                raise TimeoutError(f"{busy} ops task(s) still unfinished after {within_seconds} s")
            await asyncio.sleep(0.2)
    finally:
        await engine.dispose()


# Deleted children first: a dashboard's charts, a database's datasets and saved queries.
_REMOVAL_ORDER = ("chart", "dashboard", "saved_query", "dataset", "database")


async def remove_new_objects(scope: Scope, since: Snapshot) -> list[str]:
    """Best effort: delete every Superset dashboard, chart, dataset, saved query and database
    created since ``since``, so a session's instances are left as a test found them (what was
    changed in place stays changed). Returns what is still there afterwards, and why."""
    problems: list[str] = []
    for env_id, instance in sorted(scope.supersets.items()):
        superset = client(instance, PASSWORD_ENV)
        try:
            for kind in _REMOVAL_ORDER:
                area = f"superset.{env_id}.{kind}"
                path, fields = SUPERSET_KINDS[kind]
                now = await _listing(superset, path, fields, select_columns=True)
                for key in sorted(now.keys() - since.areas.get(area, {}).keys()):
                    try:
                        await superset.delete(f"{path}{key}")
                    except SupersetError as error:
                        problems.append(f"{area} {key} {now[key]}: {error}")
            for kind in _REMOVAL_ORDER:
                area = f"superset.{env_id}.{kind}"
                path, fields = SUPERSET_KINDS[kind]
                still = await _listing(superset, path, fields, select_columns=True)
                problems += [
                    f"{area} {key} is still there"
                    for key in sorted(still.keys() - since.areas.get(area, {}).keys())
                ]
        finally:
            await superset.aclose()
    return problems


def _short(value: str | None, limit: int = 240) -> str:
    text = str(value)
    return text if len(text) <= limit else text[:limit] + "…"


def _marker(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str, ensure_ascii=False)


async def _ops_rows(database_url: str) -> dict[str, dict[str, str]]:
    engine = create_engine(database_url, pool_size=1)
    found: dict[str, dict[str, str]] = {}
    try:
        async with engine.connect() as connection:
            for table in OPS_TABLES:
                keys = [column.name for column in table.primary_key.columns]
                query = select(table)
                if table is tables.tasks:
                    query = query.where(tables.tasks.c.kind.not_in(jobs.READS))
                rows = (await connection.execute(query)).mappings()
                found[f"ops.{table.name}"] = {
                    "/".join(str(row[name]) for name in keys): _marker(dict(row)) for row in rows
                }
    finally:
        await engine.dispose()
    return found


def _digest(path: Path) -> str:
    sha = hashlib.sha256()
    with path.open("rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            sha.update(block)
    return sha.hexdigest()


def _backup_files(folder: Path) -> dict[str, dict[str, str]]:
    files = {}
    if folder.exists():
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                files[str(path.relative_to(folder))] = f"{path.stat().st_size} bytes sha256:{_digest(path)}"
    return {"backups": files}


def _run_git(repo: Path, *args: str, check: bool = True) -> str:
    result = subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=check, timeout=30
    )
    return result.stdout


def _git(repo: Path) -> dict[str, dict[str, str]]:
    if not (repo / ".git").exists():
        return {"git": {"repository": "absent"}}
    state = {"repository": "present"}
    for line in _run_git(repo, "for-each-ref", "--format=%(refname) %(objectname)").splitlines():
        ref, _, sha = line.partition(" ")
        state[f"ref {ref}"] = sha
    state["HEAD"] = _run_git(repo, "rev-parse", "--symbolic-full-name", "HEAD", check=False).strip()
    counts = dict(
        line.split(": ", 1) for line in _run_git(repo, "count-objects", "-v").splitlines() if ": " in line
    )
    state["objects"] = f"{counts.get('count', '?')} loose, {counts.get('in-pack', '?')} packed"
    worktrees = _run_git(repo, "worktree", "list", "--porcelain").count("worktree ")
    state["worktrees"] = str(worktrees)
    return {"git": state}


async def _listing(
    superset: SupersetClient, path: str, fields: tuple[str, ...], *, select_columns: bool
) -> dict[str, str]:
    found: dict[str, str] = {}
    page = 0
    while True:
        query: dict[str, Any] = {"page": page, "page_size": PAGE_SIZE}
        if select_columns:
            query["columns"] = ["id", *fields]
        answer = await superset.get(path, q=query)
        batch = answer.get("result") or []
        for item in batch:
            marker = {name.split(".")[0]: item.get(name.split(".")[0]) for name in fields}
            if "roles" in marker:
                marker["roles"] = sorted(role["id"] for role in marker["roles"] or [])
            if "dashboards" in marker:
                marker["dashboards"] = sorted(board["id"] for board in marker["dashboards"] or [])
            found[str(item["id"])] = _marker(marker)
        page += 1
        if not batch or len(found) >= int(answer.get("count", 0)):
            return found


async def _superset(env_id: str, instance: Instance) -> dict[str, dict[str, str]]:
    superset = client(instance, PASSWORD_ENV)
    try:
        found = {}
        for kind, (path, fields) in SUPERSET_KINDS.items():
            found[f"superset.{env_id}.{kind}"] = await _listing(superset, path, fields, select_columns=True)
        for kind, (path, fields) in SUPERSET_SECURITY.items():
            found[f"superset.{env_id}.{kind}"] = await _listing(superset, path, fields, select_columns=False)
        return found
    finally:
        await superset.aclose()


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _examples(path: Path) -> dict[str, dict[str, str]]:
    state: dict[str, str] = {}
    connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)
    try:
        objects = connection.execute(
            "SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY type, name"
        ).fetchall()
        for kind, name, table, statement in objects:
            state[f"{kind} {name}"] = f"on {table}: {statement}"
            if kind != "table":
                continue
            count = connection.execute(f"SELECT count(*) FROM {_quoted(name)}").fetchone()[0]
            marker = f"{count} rows"
            if count <= MAX_HASHED_ROWS:
                rows = sorted(repr(row) for row in connection.execute(f"SELECT * FROM {_quoted(name)}"))
                marker += f" sha256:{hashlib.sha256(chr(10).join(rows).encode()).hexdigest()}"
            state[f"rows {name}"] = marker
    finally:
        connection.close()
    return {"examples": state}


# A database's own schemas: not the system's (pg_catalog, pg_toast, temporary ones, ...).
_OWN = "NOT LIKE ALL (ARRAY['pg\\_%', 'information\\_schema'])"
# What a PostgreSQL database holds beyond its rows: queries of (key, marker) rows.
_PG_OBJECTS = (
    (
        "SELECT 'schema ' || nspname, pg_get_userbyid(nspowner) || ' ' || coalesce(nspacl::text, '')"
        f" FROM pg_namespace WHERE nspname {_OWN}"
    ),
    (
        "SELECT 'relation ' || n.nspname || '.' || c.relname,"
        " concat_ws(' | ', c.relkind, pg_get_userbyid(c.relowner), c.relacl::text, obj_description(c.oid),"
        " c.relispopulated, (SELECT string_agg(a.attname || ' ' || format_type(a.atttypid, a.atttypmod), ','"
        " ORDER BY a.attnum) FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attnum > 0"
        " AND NOT a.attisdropped), CASE WHEN c.relkind IN ('v', 'm') THEN md5(pg_get_viewdef(c.oid)) END)"
        " FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
        f" WHERE n.nspname {_OWN}"
    ),
    (
        "SELECT 'function ' || n.nspname || '.' || p.proname"
        " || '(' || pg_get_function_identity_arguments(p.oid) || ')',"
        " CASE WHEN p.prokind IN ('f', 'p') THEN md5(pg_get_functiondef(p.oid)) ELSE p.prokind::text END"
        f" FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname {_OWN}"
    ),
    (
        "SELECT 'trigger ' || tgrelid::regclass || '.' || tgname, md5(pg_get_triggerdef(oid))"
        " FROM pg_trigger WHERE NOT tgisinternal"
    ),
    "SELECT 'extension ' || extname, extversion FROM pg_extension",
    # Test sessions make and drop roles of their own at any time (testing.scratch_owned_database).
    "SELECT 'role ' || rolname,"
    " concat_ws(' ', rolsuper, rolcreaterole, rolcreatedb, rolcanlogin, rolbypassrls)"
    " FROM pg_roles WHERE rolname !~ '^sstools_t_[0-9a-f]{12}$'",
    "SELECT 'role settings', count(*)::text FROM pg_db_role_setting"
    " WHERE setdatabase IN (0, (SELECT oid FROM pg_database WHERE datname = current_database()))",
    "SELECT 'large objects', count(*)::text FROM pg_largeobject_metadata",
    "SELECT 'database ' || datname, pg_get_userbyid(datdba) || ' ' || coalesce(datacl::text, '')"
    " FROM pg_database WHERE datname = current_database()",
)


def postgres_state(url: str) -> dict[str, str]:
    """What a PostgreSQL database holds, as ``{key: marker}``: its schemas, relations (kind, owner,
    grants, comment, columns, a view's definition), functions, triggers and extensions; each
    table's and populated materialized view's rows (a count, and a digest up to
    ``MAX_HASHED_ROWS``); each sequence's position; its large objects and settings; the server's
    roles. A query that fails fails the caller: a dropped table is a change, not a state two
    failed reads could show as equal."""
    state: dict[str, str] = {}
    with psycopg.connect(url, autocommit=True) as connection:
        for query in _PG_OBJECTS:
            state.update((str(key), str(marker)) for key, marker in connection.execute(query))
        relations = connection.execute(
            "SELECT n.nspname, c.relname, c.relkind FROM pg_class c"
            f" JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname {_OWN}"
            " AND (c.relkind IN ('r', 'p', 'S') OR (c.relkind = 'm' AND c.relispopulated))"
        ).fetchall()
        for schema, name, kind in relations:
            table = psql.Identifier(schema, name)
            if kind == "S":
                position = connection.execute(psql.SQL("SELECT last_value, is_called FROM {}").format(table))
                state[f"sequence {schema}.{name}"] = str(position.fetchone())
                continue
            count = connection.execute(psql.SQL("SELECT count(*) FROM {}").format(table)).fetchone()
            marker = f"{count[0] if count else None} rows"
            if count and count[0] <= MAX_HASHED_ROWS:
                digest = connection.execute(
                    psql.SQL(
                        "SELECT md5(coalesce(string_agg(t::text, E'\\n' ORDER BY t::text), '')) FROM {} t"
                    ).format(table)
                ).fetchone()
                marker += f" md5:{digest[0] if digest else None}"
            state[f"rows {schema}.{name}"] = marker
    return state


def _postgres(url: str | None) -> dict[str, dict[str, str]]:
    return {} if url is None else {"postgres": postgres_state(url)}
