"""With OTEL_EXPORTER_OTLP_ENDPOINT set, a service process exports its spans over OTLP/gRPC.

The collector here is a real gRPC server speaking the OTLP trace protocol on loopback; it keeps
what it receives.
"""

import asyncio
import os
import signal
import subprocess
from typing import Any

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

from sstools.devstack.testing import free_port, wait_grpc_serving


class Collector(trace_service_pb2_grpc.TraceServiceServicer):
    def __init__(self) -> None:
        self.spans: list[tuple[str, str]] = []  # (service.name, span name)

    async def Export(
        self,
        request: trace_service_pb2.ExportTraceServiceRequest,
        context: grpc.aio.ServicerContext[Any, Any],
    ) -> trace_service_pb2.ExportTraceServiceResponse:
        for resource_spans in request.resource_spans:
            attributes = {item.key: item.value.string_value for item in resource_spans.resource.attributes}
            for scope_spans in resource_spans.scope_spans:
                self.spans += [(attributes.get("service.name", ""), span.name) for span in scope_spans.spans]
        return trace_service_pb2.ExportTraceServiceResponse()


def _start_docparse(environment: dict[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(["sstools-docparse"], env=environment, stdout=subprocess.DEVNULL)


async def test_service_exports_its_spans_to_the_configured_collector() -> None:
    collector = Collector()
    server = grpc.aio.server()
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(collector, server)  # type: ignore[no-untyped-call]
    collector_port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    grpc_port, metrics_port = free_port(), free_port()
    environment = {
        **os.environ,
        "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{collector_port}",
        "DOCPARSE_GRPC_PORT": str(grpc_port),
        "DOCPARSE_METRICS_PORT": str(metrics_port),
    }
    process = _start_docparse(environment)
    try:
        await wait_grpc_serving(grpc_port)
        async with grpc.aio.insecure_channel(f"127.0.0.1:{grpc_port}") as channel:
            await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest())
        process.send_signal(signal.SIGTERM)  # shutdown flushes the batch of spans
        assert await asyncio.to_thread(process.wait, 30) == 0
    finally:
        if process.poll() is None:
            process.kill()
        await server.stop(0)
    assert ("docparse", "/grpc.health.v1.Health/Check") in collector.spans
