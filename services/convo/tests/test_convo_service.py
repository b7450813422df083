import asyncio

from grpc_health.v1 import health_pb2
from opentelemetry.sdk.trace import TracerProvider

from sstools.convo.main import assemble
from sstools.convo.store import MIGRATIONS
from sstools.devstack.agentstack import convo_settings_for
from sstools.devstack.testing import probe


async def test_convo_is_not_ready_until_its_schema_is_migrated(
    fresh_database_url: str, tracer_provider: TracerProvider
) -> None:
    settings = convo_settings_for(fresh_database_url)
    before = await probe(settings, assemble, tracer_provider)
    assert before.listeners == {"metrics", "grpc", "rest"}
    assert (before.readyz_status, before.readyz_checks["database"]) == (503, "failing")

    await asyncio.to_thread(MIGRATIONS.upgrade, fresh_database_url)
    after = await probe(settings, assemble, tracer_provider)
    assert (after.readyz_status, after.readyz_checks["database"]) == (200, "ok")
    assert after.grpc_status == health_pb2.HealthCheckResponse.SERVING
