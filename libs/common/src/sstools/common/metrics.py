"""Prometheus metrics: one registry per process, gRPC and HTTP server metrics, calls to a model
server, the /metrics response.

Names follow the project convention: ``sstools_`` prefix, base units, ``_seconds`` histograms,
``_total`` counters, and never a user id in a label; calls to a model server are named as the
OpenTelemetry GenAI conventions name them instead (``gen_ai_``).
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import grpc
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Histogram,
    gc_collector,
    generate_latest,
    platform_collector,
    process_collector,
)
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send


def new_registry() -> CollectorRegistry:
    """A registry holding the process, platform and GC collectors, and nothing global."""
    registry = CollectorRegistry()
    process_collector.ProcessCollector(registry=registry)
    platform_collector.PlatformCollector(registry=registry)
    gc_collector.GCCollector(registry=registry)
    return registry


def metrics_response(registry: CollectorRegistry) -> Response:
    return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)


def _split_method(full_method: str) -> tuple[str, str]:
    # "/package.Service/Method" -> ("package.Service", "Method")
    _, service, method = full_method.split("/", 2)
    return service, method


class GrpcServerMetrics(grpc.aio.ServerInterceptor):
    """Counts and times every RPC by service, method and final status code."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self._handled = Counter(
            "sstools_grpc_server_handled_total",
            "RPCs completed by the server, by final status code.",
            ["grpc_service", "grpc_method", "grpc_code"],
            registry=registry,
        )
        self._duration = Histogram(
            "sstools_grpc_server_handling_seconds",
            "Time from receiving an RPC to sending its status.",
            ["grpc_service", "grpc_method"],
            registry=registry,
        )

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler[Any, Any] | None]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler[Any, Any] | None:
        handler = await continuation(handler_call_details)
        if handler is None:
            return handler
        service, method = _split_method(handler_call_details.method)
        if handler.unary_unary:
            return grpc.unary_unary_rpc_method_handler(
                self._unary(handler.unary_unary, service, method),
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        if handler.unary_stream:
            return grpc.unary_stream_rpc_method_handler(
                self._streaming(handler.unary_stream, service, method),
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        if handler.stream_unary:
            return grpc.stream_unary_rpc_method_handler(
                self._unary(handler.stream_unary, service, method),
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        if handler.stream_stream is None:
            return handler
        return grpc.stream_stream_rpc_method_handler(
            self._streaming(handler.stream_stream, service, method),
            request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer,
        )

    @contextmanager
    def _observe(
        self, service: str, method: str, context: grpc.aio.ServicerContext[Any, Any]
    ) -> Iterator[None]:
        started = time.perf_counter()
        outcome = grpc.StatusCode.OK
        try:
            yield
        except asyncio.CancelledError:
            # The client went away or the deadline passed: the handler task is cancelled.
            outcome = grpc.StatusCode.CANCELLED
            raise
        except BaseException:
            outcome = grpc.StatusCode.UNKNOWN
            raise
        finally:
            code = context.code() or outcome
            self._duration.labels(service, method).observe(time.perf_counter() - started)
            self._handled.labels(service, method, _code_name(code)).inc()

    def _unary(
        self, behavior: Callable[..., Any], service: str, method: str
    ) -> Callable[..., Awaitable[Any]]:
        async def observed(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
            with self._observe(service, method, context):
                result = behavior(request, context)
                return await result if inspect.isawaitable(result) else result

        return observed

    def _streaming(
        self, behavior: Callable[..., Any], service: str, method: str
    ) -> Callable[..., AsyncIterator[Any]]:
        async def observed(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> AsyncIterator[Any]:
            with self._observe(service, method, context):
                result = behavior(request, context)
                if hasattr(result, "__aiter__"):
                    async for response in result:
                        yield response
                elif inspect.isawaitable(result):
                    # A handler that writes with context.write() instead of yielding.
                    await result
                else:
                    for response in result:
                        yield response

        return observed


def _code_name(code: grpc.StatusCode | int) -> str:
    if isinstance(code, grpc.StatusCode):
        return code.name
    return next((status.name for status in grpc.StatusCode if status.value[0] == code), str(code))


UNMATCHED_ROUTE = "unmatched"  # a path no route took: kept out of the labels (unbounded)


class HttpServerMetrics:
    """Counts and times every HTTP request of one listener by method, route template and status
    code (a streamed response is timed to its last byte). Shared by every listener of a process:
    the ``listener`` label tells them apart."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self._handled = Counter(
            "sstools_http_server_requests",
            "HTTP requests answered, by listener, method, route template and status code.",
            ["listener", "method", "route", "code"],
            registry=registry,
        )
        self._duration = Histogram(
            "sstools_http_server_request_seconds",
            "Time from receiving an HTTP request to sending the last byte of its response.",
            ["listener", "method", "route"],
            registry=registry,
        )

    def middleware(self, listener: str) -> Callable[[ASGIApp], ASGIApp]:
        """An ASGI middleware factory for ``app.add_middleware``'s first argument."""
        return lambda app: _ObservedHttp(app, self, listener)

    def observe(self, listener: str, method: str, route: str, code: int, seconds: float) -> None:
        self._duration.labels(listener, method, route).observe(seconds)
        self._handled.labels(listener, method, route, str(code)).inc()


class _ObservedHttp:
    def __init__(self, app: ASGIApp, metrics: HttpServerMetrics, listener: str) -> None:
        self._app = app
        self._metrics = metrics
        self._listener = listener

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        started = time.perf_counter()
        code = 500  # what the server answers when the app fails before it starts a response

        async def send_observed(message: Message) -> None:
            nonlocal code
            if message["type"] == "http.response.start":
                code = message["status"]
            await send(message)

        try:
            await self._app(scope, receive, send_observed)
        finally:
            # The router puts the route it matched into the scope (FastAPI's own routes and
            # those of a mounted app alike); its template keeps ids out of the labels.
            route = getattr(scope.get("route"), "path", None) or UNMATCHED_ROUTE
            self._metrics.observe(self._listener, scope["method"], route, code, time.perf_counter() - started)


# The bucket boundaries the OpenTelemetry GenAI semantic conventions advise for
# gen_ai.client.operation.duration (seconds, doubling) and gen_ai.client.token.usage (×4).
GEN_AI_DURATION_BUCKETS = tuple(0.01 * 2**power for power in range(14))  # 0.01 … 81.92
GEN_AI_TOKEN_BUCKETS = tuple(4**power for power in range(14))  # 1 … 67 108 864
GEN_AI_CHAT = "chat"


@dataclass
class TokenUsage:
    """The tokens the model server said one call used; None where it did not say."""

    input: int | None = None
    output: int | None = None


def gen_ai_error_type(error: BaseException) -> str:
    """The HTTP status the model server answered with, else the exception's class name."""
    status = getattr(getattr(error, "response", None), "status_code", None)
    return str(status) if isinstance(status, int) else type(error).__name__


class GenAiClientMetrics:
    """Calls to a model server, as the OpenTelemetry GenAI semantic conventions measure a client
    (``gen_ai.client.operation.duration``, ``gen_ai.client.token.usage``), in the names their
    Prometheus exporter gives them."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self._duration = Histogram(
            "gen_ai_client_operation_duration_seconds",
            "Time of one call to the model server, by operation, requested model and error type "
            "(empty when it answered; else its HTTP status or the exception's class).",
            ["gen_ai_operation_name", "gen_ai_request_model", "error_type"],
            buckets=GEN_AI_DURATION_BUCKETS,
            registry=registry,
        )
        self._tokens = Histogram(
            "gen_ai_client_token_usage",
            "Tokens one call to the model server used, as it reported them, by operation, requested "
            "model and token type (input, output).",
            ["gen_ai_operation_name", "gen_ai_request_model", "gen_ai_token_type"],
            buckets=GEN_AI_TOKEN_BUCKETS,
            registry=registry,
        )

    @contextmanager
    def chat(self, model: str) -> Iterator[TokenUsage]:
        """Time the chat call the block makes; the usage the block sets is recorded once it
        answered. A call cut short (the turn was stopped) is neither an answer nor the server's
        error: it is left out."""
        usage = TokenUsage()
        started = time.perf_counter()
        try:
            yield usage
        except Exception as error:
            self._duration.labels(GEN_AI_CHAT, model, gen_ai_error_type(error)).observe(
                time.perf_counter() - started
            )
            raise
        self._duration.labels(GEN_AI_CHAT, model, "").observe(time.perf_counter() - started)
        for token_type, count in (("input", usage.input), ("output", usage.output)):
            if isinstance(count, int):  # what the server sent: a count it left out or garbled is not one
                self._tokens.labels(GEN_AI_CHAT, model, token_type).observe(count)
