"""Services that own tables share one database without their migration histories touching."""

import asyncio

import pytest
from sqlalchemy import text

from sstools.common.db import create_engine
from sstools.convo.store import MIGRATIONS as CONVO
from sstools.ops.store import MIGRATIONS as OPS


async def test_each_owner_migrates_to_its_head_in_its_own_version_table(fresh_database_url: str) -> None:
    engine = create_engine(fresh_database_url)
    try:
        await asyncio.to_thread(CONVO.upgrade, fresh_database_url)
        assert await CONVO.current(engine) == CONVO.head()
        assert await OPS.current(engine) is None  # convo's run did not touch ops

        await asyncio.to_thread(OPS.upgrade, fresh_database_url)
        assert await OPS.current(engine) == OPS.head()
        assert await CONVO.current(engine) == CONVO.head()
        async with engine.connect() as connection:
            rows = await connection.execute(
                text(
                    "SELECT 'convo', version_num FROM alembic_version_convo "
                    "UNION ALL SELECT 'ops', version_num FROM alembic_version_ops"
                )
            )
            versions = {owner: version for owner, version in rows}
        assert versions == {"convo": CONVO.head(), "ops": OPS.head()}
    finally:
        await engine.dispose()


def test_every_owner_has_a_single_head() -> None:
    for migrations in (CONVO, OPS):
        assert migrations.head() is not None
        assert migrations.head().startswith(f"{migrations.service}_")  # type: ignore[union-attr]


@pytest.mark.parametrize("owner", ["convo", "ops"])
async def test_schema_from_migrations_matches_the_table_definitions(
    owner: str, fresh_database_url: str
) -> None:
    """The migrations are written out by hand; they must build exactly what tables.py declares."""
    from alembic.autogenerate import compare_metadata
    from alembic.runtime.migration import MigrationContext
    from sqlalchemy import Connection

    from sstools.convo.store import metadata as convo_metadata
    from sstools.ops.store import metadata as ops_metadata

    migrations, metadata = (CONVO, convo_metadata) if owner == "convo" else (OPS, ops_metadata)
    await asyncio.to_thread(migrations.upgrade, fresh_database_url)
    engine = create_engine(fresh_database_url)

    def differences(connection: Connection) -> list[object]:
        context = MigrationContext.configure(connection, opts={"version_table": migrations.version_table})
        return [
            difference
            for difference in compare_metadata(context, metadata)
            # other services' tables live in the same database
            if not (
                difference[0] == "remove_table"
                and not difference[1].name.startswith(("agent_", "assistant_"))
            )
        ]

    try:
        async with engine.connect() as connection:
            assert await connection.run_sync(differences) == []
        await asyncio.to_thread(migrations.downgrade, fresh_database_url, f"{owner}_0001")
        await asyncio.to_thread(migrations.upgrade, fresh_database_url)
    finally:
        await engine.dispose()
