"""The database helpers against a real PostgreSQL: URL normalisation, migrations in their own
version table, and the readiness ping."""

import asyncio
from pathlib import Path

import psycopg
import pytest
from sqlalchemy import text
from sqlalchemy.exc import OperationalError

from sstools.common.db import DatabaseUrlError, Migrations, async_url, create_engine, ping

REVISION = """
from alembic import op
import sqlalchemy as sa

revision = "example_0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table("example_items", sa.Column("id", sa.Integer, primary_key=True))


def downgrade() -> None:
    op.drop_table("example_items")
"""


@pytest.fixture
def migrations(tmp_path: Path) -> Migrations:
    (tmp_path / "versions").mkdir()
    (tmp_path / "env.py").write_text(
        "from sstools.common.db import run_alembic_env\n\nrun_alembic_env(None)\n"
    )
    (tmp_path / "versions" / "example_0001.py").write_text(REVISION)
    return Migrations(service="example", script_location=str(tmp_path))


@pytest.mark.parametrize(
    "given",
    [
        "postgresql://u:p@h:5432/d",
        "postgres://u:p@h:5432/d",
        "postgresql+asyncpg://u:p@h:5432/d",
        "postgresql+psycopg2://u:p@h:5432/d",
    ],
)
def test_any_postgres_url_becomes_the_psycopg_async_dialect(given: str) -> None:
    url = async_url(given)
    assert url.drivername == "postgresql+psycopg"
    assert (url.username, url.password, url.host, url.port, url.database) == ("u", "p", "h", 5432, "d")


def test_socket_url_of_the_embedded_server_keeps_its_host_folder() -> None:
    url = async_url("postgresql://postgres:@/sstools?host=%2Fwork%2F.data%2Fpg")
    assert url.query["host"] == "/work/.data/pg"


@pytest.mark.parametrize("given", ["mysql://u@h/d", "sqlite:///x.db", "not a url"])
def test_non_postgres_url_gets_a_typed_error(given: str) -> None:
    with pytest.raises(DatabaseUrlError):
        async_url(given)


async def test_migrations_upgrade_record_and_downgrade_in_their_own_version_table(
    migrations: Migrations, fresh_database_url: str
) -> None:
    engine = create_engine(fresh_database_url)
    check = migrations.readiness_check(engine)
    try:
        await ping(engine)
        with pytest.raises(RuntimeError, match=r"at None"):
            await check()

        await asyncio.to_thread(migrations.upgrade, fresh_database_url)
        await check()
        assert await migrations.current(engine) == "example_0001" == migrations.head()
        async with engine.connect() as connection:
            tables = set(
                (
                    await connection.execute(
                        text("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
                    )
                )
                .scalars()
                .all()
            )
        assert tables == {"example_items", "alembic_version_example"}

        await asyncio.to_thread(migrations.upgrade, fresh_database_url)  # a second run changes nothing
        await check()

        await asyncio.to_thread(migrations.downgrade, fresh_database_url, "base")
        async with engine.connect() as connection:
            assert (await connection.execute(text("SELECT to_regclass('example_items')"))).scalar() is None
        assert await migrations.current(engine) is None
    finally:
        await engine.dispose()


async def test_unreachable_database_fails_ping_quickly() -> None:
    engine = create_engine("postgresql://nobody@127.0.0.1:1/none")
    try:
        # refused at once, not after a timeout (asyncio.TimeoutError would not be this)
        with pytest.raises(OperationalError, match="Connection refused") as refused:
            await asyncio.wait_for(ping(engine), 10)
        assert type(refused.value.orig) is psycopg.OperationalError
    finally:
        await engine.dispose()
