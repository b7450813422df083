"""OpenTelemetry: one tracer provider per process, W3C trace-context across gRPC and HTTP.

The provider is passed explicitly to every instrumented edge so tests can give an in-memory
exporter without touching globals; ``setup_tracing`` also installs it as the global provider for
libraries that only know the global one.
"""

from collections.abc import Sequence

import grpc
import httpx
from fastapi import FastAPI
from opentelemetry import propagate, trace
from opentelemetry.baggage.propagation import W3CBaggagePropagator
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor
from opentelemetry.instrumentation.grpc import aio_client_interceptors, aio_server_interceptor
from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor
from opentelemetry.propagators.composite import CompositePropagator
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

# Probes and scrapes would drown real traffic in spans.
_UNTRACED_PATHS = "healthz,readyz,metrics"


def setup_tracing(service_name: str, otlp_endpoint: str | None) -> TracerProvider:
    """Create the process's tracer provider; export over OTLP/gRPC only when an endpoint is set."""
    provider = TracerProvider(resource=Resource.create({"service.name": service_name}))
    if otlp_endpoint:
        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=otlp_endpoint)))
    propagate.set_global_textmap(
        CompositePropagator([TraceContextTextMapPropagator(), W3CBaggagePropagator()])
    )
    trace.set_tracer_provider(provider)
    return provider


def instrument_fastapi(app: FastAPI, provider: TracerProvider) -> None:
    # No span per ASGI send/receive: a streamed chat answer would make one per message.
    FastAPIInstrumentor.instrument_app(
        app, tracer_provider=provider, excluded_urls=_UNTRACED_PATHS, exclude_spans=["send", "receive"]
    )


def instrument_httpx(client: httpx.AsyncClient, provider: TracerProvider) -> None:
    HTTPXClientInstrumentor.instrument_client(client, tracer_provider=provider)


def grpc_server_interceptors(provider: TracerProvider) -> list[grpc.aio.ServerInterceptor]:
    return [aio_server_interceptor(tracer_provider=provider)]  # type: ignore[no-untyped-call]


def grpc_client_interceptors(provider: TracerProvider) -> Sequence[grpc.aio.ClientInterceptor]:
    return list(aio_client_interceptors(tracer_provider=provider))  # type: ignore[no-untyped-call]
