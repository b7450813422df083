from grpc_health.v1 import health_pb2
from opentelemetry.sdk.trace import TracerProvider

from sstools.devstack.testing import probe
from sstools.router.main import assemble
from sstools.router.settings import RouterSettings


async def test_router_is_ready_on_grpc_and_probes(tracer_provider: TracerProvider) -> None:
    report = await probe(RouterSettings(grpc_port=0, metrics_port=0), assemble, tracer_provider)
    assert report.listeners == {"metrics", "grpc"}
    assert (report.readyz_status, report.grpc_status) == (200, health_pb2.HealthCheckResponse.SERVING)
