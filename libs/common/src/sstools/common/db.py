"""PostgreSQL access for the services that keep state: async engine, migrations, readiness.

Each service that owns tables has its own Alembic script directory and its own version table
(``alembic_version_<service>``), so several services can share one database without their
migration histories touching. The services' ``env.py`` files are two lines that call
``run_alembic_env``; the async plumbing lives here once.
"""

import asyncio
from dataclasses import dataclass

from alembic import command, context
from alembic.config import Config
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, MetaData, make_url, pool, text
from sqlalchemy.engine import URL
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from sstools.common.health import ReadinessCheck


class DatabaseUrlError(ValueError):
    """DATABASE_URL is not a PostgreSQL URL this project can use."""


def async_url(database_url: str) -> URL:
    """Turn any ``postgres://`` or ``postgresql[+driver]://`` URL into the psycopg async dialect."""
    try:
        url = make_url(database_url.replace("postgres://", "postgresql://", 1))
    except Exception as error:  # noqa: BLE001 — sqlalchemy raises several types for bad URLs
        raise DatabaseUrlError(f"DATABASE_URL cannot be parsed: {error}") from None
    if url.get_backend_name() != "postgresql":
        raise DatabaseUrlError(f"DATABASE_URL must point at PostgreSQL, not {url.get_backend_name()!r}")
    return url.set(drivername="postgresql+psycopg")


def create_engine(database_url: str, *, pool_size: int = 5) -> AsyncEngine:
    return create_async_engine(async_url(database_url), pool_size=pool_size, pool_pre_ping=True)


@dataclass(frozen=True)
class Migrations:
    """Where a service's migrations live and which version table records them."""

    service: str
    script_location: str  # "package.module:folder", resolved by Alembic

    @property
    def version_table(self) -> str:
        return f"alembic_version_{self.service}"

    def config(self, database_url: str) -> Config:
        config = Config()
        config.set_main_option("script_location", self.script_location)
        # Alembic reads options through configparser, which treats "%" as interpolation.
        url = async_url(database_url).render_as_string(hide_password=False)
        config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
        config.attributes["version_table"] = self.version_table
        return config

    def head(self) -> str | None:
        return ScriptDirectory.from_config(self.config("postgresql://unused")).get_current_head()

    def upgrade(self, database_url: str, revision: str = "head") -> None:
        command.upgrade(self.config(database_url), revision)

    def downgrade(self, database_url: str, revision: str) -> None:
        command.downgrade(self.config(database_url), revision)

    async def current(self, engine: AsyncEngine) -> str | None:
        """The revision the database is at; None before the first migration."""
        # Plain SQL rather than Alembic's MigrationContext, which logs at INFO on every call
        # and this runs on every readiness probe.
        async with engine.connect() as connection:
            table = await connection.scalar(text("SELECT to_regclass(:name)"), {"name": self.version_table})
            if table is None:
                return None
            version = await connection.scalar(text(f'SELECT version_num FROM "{self.version_table}"'))
            return str(version) if version is not None else None

    def readiness_check(self, engine: AsyncEngine) -> ReadinessCheck:
        """Ready when the database answers and this service's schema is at the head revision."""
        head = self.head()

        async def schema_is_current() -> None:
            current = await self.current(engine)
            if current != head:
                raise RuntimeError(f"schema of {self.service} is at {current}, code expects {head}")

        return schema_is_current


async def ping(engine: AsyncEngine) -> None:
    async with engine.connect() as connection:
        await connection.execute(text("SELECT 1"))


def run_alembic_env(target_metadata: MetaData | None) -> None:
    """Body of a service's Alembic ``env.py``: migrate online over the async engine."""
    config = context.config
    version_table = config.attributes["version_table"]

    def migrate(connection: Connection) -> None:
        context.configure(
            connection=connection,
            target_metadata=target_metadata,
            version_table=version_table,
            transaction_per_migration=True,
        )
        with context.begin_transaction():
            context.run_migrations()

    async def run() -> None:
        url = config.get_main_option("sqlalchemy.url")
        assert url is not None
        engine = create_async_engine(url, poolclass=pool.NullPool)
        try:
            async with engine.connect() as connection:
                await connection.run_sync(migrate)
                await connection.commit()
        finally:
            await engine.dispose()

    # Alembic commands are synchronous; async callers run them with asyncio.to_thread.
    asyncio.run(run())
