"""What the shared gRPC runtime costs per call: tracing + metrics interceptors vs a bare server.

Both servers serve the same grpc.health.v1 Check on loopback; the client makes sequential unary
calls, alternating rounds between the two so machine noise hits both alike. Prints JSON:
latency percentiles in microseconds for each, the ratio of medians, and the process's RSS.

    .venv/bin/python bench/grpc_runtime_overhead.py [--calls 2000] [--rounds 5]
"""

import argparse
import asyncio
import json
import resource
import statistics
import time
from typing import ClassVar

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_health.v1._async import HealthServicer
from opentelemetry.sdk.trace import TracerProvider
from pydantic import Field
from pydantic_settings import SettingsConfigDict

from sstools.common.runtime import Service
from sstools.common.settings import ServiceSettings
from sstools.devstack.keys import CALLERS


class BenchSettings(ServiceSettings):
    model_config = SettingsConfigDict(env_prefix="BENCH_")
    service_name: ClassVar[str] = "bench"

    metrics_port: int = Field(default=0)


async def bare_server() -> tuple[grpc.aio.Server, int]:
    server = grpc.aio.server()
    health = HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    await health.set("", health_pb2.HealthCheckResponse.SERVING)
    return server, port


async def timed_calls(port: int, calls: int) -> list[float]:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        request = health_pb2.HealthCheckRequest()
        for _ in range(50):  # connection set-up and first-call costs stay out of the figures
            await stub.Check(request)
        durations = []
        for _ in range(calls):
            started = time.perf_counter()
            await stub.Check(request)
            durations.append(time.perf_counter() - started)
    return durations


def percentiles(samples: list[float]) -> dict[str, float]:
    cuts = statistics.quantiles(samples, n=100)
    return {
        "p50_us": round(statistics.median(samples) * 1e6, 1),
        "p95_us": round(cuts[94] * 1e6, 1),
        "p99_us": round(cuts[98] * 1e6, 1),
    }


async def main(calls: int, rounds: int) -> dict[str, object]:
    provider = TracerProvider()  # spans are made and dropped, as with no exporter configured
    service = Service(BenchSettings(), tracer_provider=provider)
    service.add_grpc(0, lambda server: [], callers=CALLERS)
    await service.start()
    bare, bare_port = await bare_server()
    samples: dict[str, list[float]] = {"bare": [], "runtime": []}
    try:
        for _ in range(rounds):
            samples["bare"] += await timed_calls(bare_port, calls)
            samples["runtime"] += await timed_calls(service.ports["grpc"], calls)
    finally:
        await bare.stop(0)
        await service.stop()
    return {
        "benchmark": "grpc_runtime_overhead",
        "calls": calls * rounds,
        "baseline_bare_grpc_aio": percentiles(samples["bare"]),
        "sstools_runtime": percentiles(samples["runtime"]),
        "median_ratio_runtime_to_bare": round(
            statistics.median(samples["runtime"]) / statistics.median(samples["bare"]), 2
        ),
        "max_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--calls", type=int, default=2000, help="calls per server per round")
    parser.add_argument("--rounds", type=int, default=5)
    arguments = parser.parse_args()
    print(json.dumps(asyncio.run(main(arguments.calls, arguments.rounds)), indent=2))
