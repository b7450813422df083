"""With OTEL_EXPORTER_OTLP_ENDPOINT set, a service process exports its spans over OTLP/gRPC.

The collector is a real gRPC server speaking the OTLP trace protocol on loopback.
"""

import asyncio
import os
import signal
import subprocess

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from sstools.devstack.keys import PUBLIC_KEYS
from sstools.devstack.testing import free_port, otlp_collector, wait_grpc_serving


def _start_docparse(environment: dict[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(["sstools-docparse"], env=environment, stdout=subprocess.DEVNULL)


async def test_service_exports_its_spans_to_the_configured_collector() -> None:
    async with otlp_collector() as (collector, endpoint):
        await _exchange(endpoint)
    assert ("docparse", "/grpc.health.v1.Health/Check") in {
        (span.service, span.name) for span in collector.spans
    }


async def _exchange(endpoint: str) -> None:
    grpc_port, metrics_port = free_port(), free_port()
    environment = {
        **os.environ,
        "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint,
        "DOCPARSE_GRPC_PORT": str(grpc_port),
        "DOCPARSE_METRICS_PORT": str(metrics_port),
        "JWT_PUBLIC_KEYS": PUBLIC_KEYS,
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
