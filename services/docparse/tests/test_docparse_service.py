from grpc_health.v1 import health_pb2
from opentelemetry.sdk.trace import TracerProvider

from sstools.devstack.testing import probe
from sstools.docparse.main import assemble
from sstools.docparse.settings import DocparseSettings


async def test_docparse_is_ready_on_grpc_and_probes(tracer_provider: TracerProvider) -> None:
    report = await probe(DocparseSettings(grpc_port=0, metrics_port=0), assemble, tracer_provider)
    assert report.listeners == {"metrics", "grpc"}
    assert (report.readyz_status, report.grpc_status) == (200, health_pb2.HealthCheckResponse.SERVING)
