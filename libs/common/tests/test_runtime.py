import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import ClassVar

import grpc
import pytest
from fastapi import FastAPI
from grpc_health.v1 import health_pb2, health_pb2_grpc
from opentelemetry.sdk.trace import TracerProvider
from prometheus_client.parser import text_string_to_metric_families
from pydantic import Field
from pydantic_settings import SettingsConfigDict

from sstools.common.runtime import Service
from sstools.common.settings import ServiceSettings
from sstools.devstack.keys import CALLERS
from sstools.devstack.testing import grpc_health, http_get

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


class ExampleSettings(ServiceSettings):
    model_config = SettingsConfigDict(env_prefix="EXAMPLE_")
    service_name: ClassVar[str] = "example"

    grpc_port: int = Field(default=0)
    http_port: int = Field(default=0)
    metrics_port: int = Field(default=0)
    shutdown_grace_seconds: float = 1.0


@pytest.fixture
def service(tracer_provider: TracerProvider) -> Service:
    service = Service(ExampleSettings(), tracer_provider=tracer_provider)
    service.add_grpc(0, lambda server: [], callers=CALLERS)
    service.add_http("api", FastAPI(), 0)
    return service


@dataclass
class GatedStart:
    """A service whose start is held in its warm-up until the test opens the gate."""

    gate: asyncio.Event
    starting: asyncio.Task[None]


@pytest.fixture
async def gated_start(service: Service) -> AsyncIterator[GatedStart]:
    gate, warming = asyncio.Event(), asyncio.Event()

    async def warmup() -> None:
        warming.set()  # every listener is up by now
        await gate.wait()

    service.add_warmup(warmup)
    held = GatedStart(gate, asyncio.create_task(service.start()))
    await warming.wait()
    yield held
    gate.set()
    await held.starting
    await service.stop()


def _url(service: Service, listener: str, path: str) -> str:
    return f"http://127.0.0.1:{service.ports[listener]}{path}"


async def test_probes_say_live_but_not_ready_until_warm(service: Service, gated_start: GatedStart) -> None:
    target = f"127.0.0.1:{service.ports['grpc']}"
    assert (await http_get(_url(service, "metrics", "/healthz"))).status_code == 200
    not_ready = await http_get(_url(service, "metrics", "/readyz"))
    assert not_ready.status_code == 503
    assert not_ready.json()["checks"]["startup"] == "warming"
    assert await grpc_health(target) == NOT_SERVING

    gated_start.gate.set()
    await gated_start.starting
    assert (await http_get(_url(service, "metrics", "/readyz"))).status_code == 200
    assert (await http_get(_url(service, "api", "/readyz"))).status_code == 200
    assert await grpc_health(target) == SERVING


async def test_failing_dependency_check_makes_readyz_503_and_names_it(service: Service) -> None:
    async def database_down() -> None:
        raise ConnectionError("refused")

    service.readiness.checks["database"] = database_down
    await service.start()
    try:
        reply = await http_get(_url(service, "metrics", "/readyz"))
        assert reply.status_code == 503
        assert reply.json() == {
            "ready": False,
            "checks": {"startup": "ok", "shutdown": "ok", "database": "failing"},
        }
        assert (await http_get(_url(service, "metrics", "/healthz"))).status_code == 200
    finally:
        await service.stop()


async def test_hanging_dependency_check_times_out_as_failing(service: Service) -> None:
    async def hangs() -> None:
        await asyncio.sleep(60)

    service.readiness.checks["slow"] = hangs
    service.readiness.check_timeout_seconds = 0.2
    await service.start()
    try:
        reply = await http_get(_url(service, "metrics", "/readyz"))
        assert reply.json()["checks"]["slow"] == "failing"
    finally:
        await service.stop()


async def test_stop_drains_then_closes_every_listener(service: Service) -> None:
    await service.start()
    ports = dict(service.ports)
    target = f"127.0.0.1:{ports['grpc']}"
    await service.stop()
    assert service.readiness.draining
    for listener in ("metrics", "api"):
        with pytest.raises(OSError):  # noqa: PT011 — any refusal to connect will do
            await asyncio.open_connection("127.0.0.1", ports[listener])
    with pytest.raises(grpc.aio.AioRpcError) as error:
        await grpc_health(target)
    assert error.value.code() == grpc.StatusCode.UNAVAILABLE


async def test_grpc_calls_are_counted_by_method_and_status_code(service: Service) -> None:
    await service.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{service.ports['grpc']}") as channel:
            stub = health_pb2_grpc.HealthStub(channel)
            await stub.Check(health_pb2.HealthCheckRequest())
            await stub.Check(health_pb2.HealthCheckRequest())
            with pytest.raises(grpc.aio.AioRpcError):
                await stub.Check(health_pb2.HealthCheckRequest(service="no.such.Service"))
            watch = stub.Watch(health_pb2.HealthCheckRequest())
            first = await watch.read()
            assert first.status == SERVING
            watch.cancel()
        exposition = (await http_get(_url(service, "metrics", "/metrics"))).text
    finally:
        await service.stop()
    handled = {
        (sample.labels["grpc_method"], sample.labels["grpc_code"]): sample.value
        for family in text_string_to_metric_families(exposition)
        if family.name == "sstools_grpc_server_handled"
        for sample in family.samples
        if sample.name.endswith("_total")
    }
    assert handled[("Check", "OK")] == 2
    assert handled[("Check", "NOT_FOUND")] == 1
    assert handled[("Watch", "CANCELLED")] == 1
    assert "sstools_grpc_server_handling_seconds_bucket" in exposition
    assert "process_resident_memory_bytes" in exposition


async def test_http_requests_are_counted_by_listener_route_template_and_status(
    tracer_provider: TracerProvider,
) -> None:
    api = FastAPI()

    @api.get("/items/{item_id}")
    async def item(item_id: int) -> dict[str, int]:
        return {"id": item_id}

    service = Service(ExampleSettings(), tracer_provider=tracer_provider)
    service.add_http("api", api, 0)
    await service.start()
    try:
        for path in ("/items/7", "/items/8", "/items/not-a-number", "/nowhere/42"):
            await http_get(_url(service, "api", path))
        exposition = (await http_get(_url(service, "metrics", "/metrics"))).text
    finally:
        await service.stop()
    handled = {
        (sample.labels["listener"], sample.labels["route"], sample.labels["code"]): sample.value
        for family in text_string_to_metric_families(exposition)
        if family.name == "sstools_http_server_requests"
        for sample in family.samples
        if sample.name.endswith("_total")
    }
    assert handled == {
        ("api", "/items/{item_id}", "200"): 2,  # the template, not the ids
        ("api", "/items/{item_id}", "422"): 1,
        ("api", "unmatched", "404"): 1,
    }
    assert (
        'sstools_http_server_request_seconds_count{listener="api",method="GET",route="/items/{item_id}"} 3.0'
        in (exposition)
    )


async def test_grpc_connections_are_retired_at_their_age_so_clients_re_resolve(
    tracer_provider: TracerProvider,
) -> None:
    service = Service(ExampleSettings(), tracer_provider=tracer_provider, grpc_max_connection_age_seconds=0.5)
    service.add_grpc(0, lambda server: [], callers=CALLERS)
    await service.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{service.ports['grpc']}") as channel:
            stub = health_pb2_grpc.HealthStub(channel)
            await stub.Check(health_pb2.HealthCheckRequest())
            assert channel.get_state() == grpc.ChannelConnectivity.READY
            await asyncio.sleep(2.5)  # the age, its grace (1 s here) and some slack
            # The server said goodbye: the channel is idle and will resolve again before its next call.
            assert channel.get_state() == grpc.ChannelConnectivity.IDLE
            assert (await stub.Check(health_pb2.HealthCheckRequest())).status == SERVING
    finally:
        await service.stop()


async def test_an_idle_http_connection_outlives_the_clients_keep_alive(service: Service) -> None:
    """httpx drops an idle connection after 5 s; the server must not close it first (uvicorn's own
    default, 5 s, raced the agent's checks of a user with ops every 5 s: ReadError)."""
    await service.start()
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", service.ports["api"])
        request = b"GET /healthz HTTP/1.1\r\nHost: test\r\n\r\n"
        for pause in (0.0, 6.0):  # the second request after the client's keep-alive has passed
            await asyncio.sleep(pause)
            writer.write(request)
            await writer.drain()
            status_line = await asyncio.wait_for(reader.readline(), 5)
            assert status_line.startswith(b"HTTP/1.1 200"), (pause, status_line)
            length = 0
            while (line := await reader.readline()) not in (b"\r\n", b""):
                name, _, value = line.decode().partition(":")
                if name.lower() == "content-length":
                    length = int(value)
            await reader.readexactly(length)
        writer.close()
    finally:
        await service.stop()


def test_listening_socket_is_tcp_so_connections_skip_nagle() -> None:
    import socket

    from sstools.common.runtime import listening_socket

    with listening_socket("127.0.0.1", 0) as sock:
        assert sock.proto == socket.IPPROTO_TCP  # what asyncio checks before setting TCP_NODELAY
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 1
        with socket.create_connection(sock.getsockname()[:2]):
            accepted, _ = sock.accept()
            with accepted:
                assert accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 1
