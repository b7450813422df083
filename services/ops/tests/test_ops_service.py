import asyncio

from opentelemetry.sdk.trace import TracerProvider

from sstools.devstack.testing import probe
from sstools.ops.main import assemble
from sstools.ops.settings import OpsSettings
from sstools.ops.store import MIGRATIONS

from .conftest import CONFIRMATION_SECRET, JWT_SECRET


async def test_ops_is_not_ready_until_its_schema_is_migrated(
    fresh_database_url: str, tracer_provider: TracerProvider
) -> None:
    settings = OpsSettings(
        http_port=0,
        metrics_port=0,
        database_url=fresh_database_url,
        jwt_secret=JWT_SECRET,
        confirmation_secret=CONFIRMATION_SECRET,
    )
    before = await probe(settings, assemble, tracer_provider)
    assert before.listeners == {"metrics", "api"}
    assert (before.readyz_status, before.readyz_checks["database"]) == (503, "failing")

    await asyncio.to_thread(MIGRATIONS.upgrade, fresh_database_url)
    after = await probe(settings, assemble, tracer_provider)
    assert (after.readyz_status, after.readyz_checks["database"], after.grpc_status) == (200, "ok", None)
