import asyncio

from opentelemetry.sdk.trace import TracerProvider

from sstools.devstack.testing import probe
from sstools.ops.main import assemble
from sstools.ops.store import MIGRATIONS

from .conftest import ops_settings


async def test_ops_is_not_ready_until_its_schema_is_migrated(
    fresh_database_url: str, tracer_provider: TracerProvider
) -> None:
    settings = ops_settings(fresh_database_url)
    before = await probe(settings, assemble, tracer_provider)
    assert before.listeners == {"metrics", "api"}
    assert (before.readyz_status, before.readyz_checks["database"]) == (503, "failing")

    await asyncio.to_thread(MIGRATIONS.upgrade, fresh_database_url)
    after = await probe(settings, assemble, tracer_provider)
    assert (after.readyz_status, after.readyz_checks["database"], after.grpc_status) == (200, "ok", None)
