"""One trace id from a caller through an HTTP hop and a gRPC hop, as the services are wired."""

import json
import logging
from typing import ClassVar

import httpx
import pytest
from fastapi import FastAPI
from grpc_health.v1 import health_pb2, health_pb2_grpc
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind
from pydantic import Field
from pydantic_settings import SettingsConfigDict

from sstools.common.grpc_client import insecure_channel
from sstools.common.logs import JsonFormatter
from sstools.common.runtime import Service
from sstools.common.settings import ServiceSettings
from sstools.common.tracing import instrument_httpx
from sstools.devstack.keys import CALLERS
from sstools.devstack.testing import started_service


class HopSettings(ServiceSettings):
    model_config = SettingsConfigDict(env_prefix="HOP_")
    service_name: ClassVar[str] = "hop"

    metrics_port: int = Field(default=0)
    shutdown_grace_seconds: float = 1.0


def _grpc_backend(settings: HopSettings, service: Service) -> None:
    service.add_grpc(0, lambda server: [], callers=CALLERS)


def _http_frontend(grpc_target: str) -> "tuple[FastAPI, list[str]]":
    """An HTTP app whose one route makes a gRPC call, as the agent's handlers will."""
    app = FastAPI()
    log_lines: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: log_lines.append(JsonFormatter("front").format(record))  # type: ignore[method-assign]
    logger = logging.getLogger("hop.front")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)

    @app.get("/relay")
    async def relay() -> dict[str, str]:
        provider = app.state.tracer_provider
        async with insecure_channel(grpc_target, provider) as channel:
            reply = await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest())
        logger.info("relayed")
        return {"status": health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)}

    return app, log_lines


def _only(spans: list[ReadableSpan], kind: SpanKind, name_part: str) -> ReadableSpan:
    matching = [span for span in spans if span.kind == kind and name_part in span.name]
    assert len(matching) == 1, [(span.name, span.kind) for span in spans]
    return matching[0]


async def test_one_trace_spans_http_and_grpc_hops(
    tracer_provider: TracerProvider, span_exporter: InMemorySpanExporter
) -> None:
    async with started_service(HopSettings(), _grpc_backend, tracer_provider) as backend:
        app, log_lines = _http_frontend(f"127.0.0.1:{backend.ports['grpc']}")
        app.state.tracer_provider = tracer_provider

        def frontend(settings: HopSettings, service: Service) -> None:
            service.add_http("api", app, 0)

        async with (
            started_service(HopSettings(), frontend, tracer_provider) as front,
            httpx.AsyncClient() as client,
        ):
            instrument_httpx(client, tracer_provider)
            with tracer_provider.get_tracer("test").start_as_current_span("user action") as root:
                reply = await client.get(f"http://127.0.0.1:{front.ports['api']}/relay")
    assert reply.json() == {"status": "SERVING"}

    spans = list(span_exporter.get_finished_spans())
    trace_id = root.get_span_context().trace_id
    assert {span.context.trace_id for span in spans} == {trace_id}

    http_client = _only(spans, SpanKind.CLIENT, "GET")
    http_server = _only(spans, SpanKind.SERVER, "/relay")
    grpc_client = _only(spans, SpanKind.CLIENT, "grpc.health.v1.Health/Check")
    grpc_server = _only(spans, SpanKind.SERVER, "grpc.health.v1.Health/Check")
    parents = {
        span.name: span.parent.span_id if span.parent else None
        for span in (http_client, http_server, grpc_client, grpc_server)
    }
    assert parents[http_client.name] == root.get_span_context().span_id
    assert parents[http_server.name] == http_client.context.span_id
    assert parents[grpc_server.name] == grpc_client.context.span_id
    assert parents[grpc_client.name] is not None

    (line,) = log_lines
    assert json.loads(line)["trace_id"] == f"{trace_id:032x}"


@pytest.mark.parametrize("path", ["/healthz", "/readyz"])
async def test_probes_make_no_spans(
    tracer_provider: TracerProvider, span_exporter: InMemorySpanExporter, path: str
) -> None:
    def frontend(settings: HopSettings, service: Service) -> None:
        service.add_http("api", FastAPI(), 0)

    async with (
        started_service(HopSettings(), frontend, tracer_provider) as front,
        httpx.AsyncClient() as client,
    ):
        assert (await client.get(f"http://127.0.0.1:{front.ports['api']}{path}")).status_code == 200
    assert [span.name for span in span_exporter.get_finished_spans()] == []
