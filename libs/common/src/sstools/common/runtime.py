"""The life of one service process: listeners up, warm-up, ready, then a graceful drain.

Every service is a ``Service`` with an admin listener (probes and /metrics), and optionally a
``grpc.aio`` server and one or more FastAPI apps. Start order: admin (live, not ready) → gRPC and
HTTP listeners (gRPC health NOT_SERVING) → warm-ups → ready (gRPC health SERVING). SIGTERM or
SIGINT reverses it: not ready at once, in-flight calls get ``shutdown_grace_seconds``, then exit 0.
"""

import argparse
import asyncio
import contextlib
import gc
import logging
import signal
import socket
import sys
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import grpc
import uvicorn
from fastapi import FastAPI
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_health.v1._async import HealthServicer
from grpc_reflection.v1alpha import reflection
from opentelemetry.sdk.trace import TracerProvider
from prometheus_client import CollectorRegistry
from pydantic import ValidationError

from sstools.common.grpc_auth import Callers, ServiceTokenCheck
from sstools.common.health import Readiness, admin_app, health_router
from sstools.common.logs import configure_logging
from sstools.common.metrics import GrpcServerMetrics, HttpServerMetrics, new_registry
from sstools.common.settings import DatabaseSettings, ServiceSettings
from sstools.common.tracing import grpc_server_interceptors, instrument_fastapi, setup_tracing

_log = logging.getLogger(__name__)

GrpcRegistration = Callable[[grpc.aio.Server], Iterable[str]]
"""Adds servicers to a server; returns the full names of the services it added."""

Warmup = Callable[[], Awaitable[None]]
Cleanup = Callable[[], Awaitable[None]]

# An idle connection is kept longer than the services' httpx clients keep theirs (5 s): at
# uvicorn's own 5 s a client calling every ~5 s could send on a connection the server was
# closing, and get ReadError instead of an answer.
HTTP_KEEP_ALIVE_SECONDS = 30


class _EmbeddedUvicorn(uvicorn.Server):
    """A uvicorn server that leaves signal handling to the Service that runs it."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


@dataclass
class _HttpListener:
    name: str
    app: FastAPI
    port: int
    server: _EmbeddedUvicorn | None = None
    task: asyncio.Task[None] | None = None


GRPC_MAX_CONNECTION_AGE_SECONDS = 300.0


class Service:
    """One process's listeners, readiness and shutdown; services add their parts, then serve."""

    def __init__(
        self,
        settings: ServiceSettings,
        *,
        tracer_provider: TracerProvider,
        registry: CollectorRegistry | None = None,
        grpc_max_connection_age_seconds: float = GRPC_MAX_CONNECTION_AGE_SECONDS,
    ) -> None:
        self.settings = settings
        self.grpc_max_connection_age_seconds = grpc_max_connection_age_seconds
        self.tracer_provider = tracer_provider
        self.registry = registry if registry is not None else new_registry()
        self.readiness = Readiness()
        self._http_metrics = HttpServerMetrics(self.registry)
        self.ports: dict[str, int] = {}
        self._grpc_parts: list[tuple[int, GrpcRegistration]] = []
        self._grpc_options: list[tuple[str, int]] = []
        self._grpc_server: grpc.aio.Server | None = None
        self._grpc_callers: Callers | None = None
        self._grpc_health = HealthServicer()
        self._grpc_services: list[str] = []
        self._http: list[_HttpListener] = [
            _HttpListener("metrics", admin_app(self.readiness, self.registry), settings.metrics_port)
        ]
        self._warmups: list[Warmup] = []
        self._cleanups: list[Cleanup] = []
        self._background: list[Callable[[], Coroutine[Any, Any, None]]] = []
        self._background_tasks: list[asyncio.Task[None]] = []

    def add_grpc(
        self,
        port: int,
        register: GrpcRegistration,
        *,
        callers: Callers,
        max_message_bytes: int | None = None,
    ) -> None:
        """Serve gRPC on ``port`` to callers with a service token ``callers`` verifies (one
        server: the last one given is checked for all); health and reflection are added for every
        registered service, open to all."""
        self._grpc_parts.append((port, register))
        self._grpc_callers = callers
        if max_message_bytes is not None:
            self._grpc_options.append(("grpc.max_receive_message_length", max_message_bytes))

    def add_http(self, name: str, app: FastAPI, port: int) -> None:
        """Serve a FastAPI app on ``port``, with /healthz and /readyz of its own for ingress probes."""
        app.include_router(health_router(self.readiness))
        app.add_middleware(self._http_metrics.middleware(name))
        instrument_fastapi(app, self.tracer_provider)
        self._http.append(_HttpListener(name, app, port))

    def add_warmup(self, warmup: Warmup) -> None:
        """Work that must finish before the service reports ready (load a model, reach a database)."""
        self._warmups.append(warmup)

    def add_cleanup(self, cleanup: Cleanup) -> None:
        """Work after every listener has closed (dispose a connection pool), last added first."""
        self._cleanups.append(cleanup)

    def add_background(self, loop: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """A loop that runs while the service is ready (a sweeper); cancelled when it drains."""
        self._background.append(loop)

    async def start(self) -> None:
        for listener in self._http:
            await self._start_http(listener)
        if self._grpc_parts:
            await self._start_grpc()
        for warmup in self._warmups:
            await warmup()
        self.readiness.warm = True
        self._background_tasks = [asyncio.create_task(loop()) for loop in self._background]
        await self._set_grpc_health(health_pb2.HealthCheckResponse.SERVING)
        _log.info("service ready", extra={"ports": self.ports})

    async def stop(self) -> None:
        self.readiness.draining = True
        for task in self._background_tasks:
            task.cancel()
        await asyncio.gather(*self._background_tasks, return_exceptions=True)
        grace = self.settings.shutdown_grace_seconds
        if self._grpc_server is not None:
            await self._grpc_health.enter_graceful_shutdown()
            await self._grpc_server.stop(grace)
        # The admin listener goes last so probes see "draining" until the end.
        for listener in reversed(self._http):
            if listener.server is not None and listener.task is not None:
                listener.server.should_exit = True
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(asyncio.shield(listener.task), grace + 1)
                listener.server.force_exit = True
                await listener.task
        for cleanup in reversed(self._cleanups):
            await cleanup()
        _log.info("service stopped")

    async def serve_until_signalled(self) -> None:
        """Start, then run until SIGTERM or SIGINT, then drain and return."""
        stop_requested = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, stop_requested.set)
        try:
            await self.start()
            await stop_requested.wait()
            _log.info("stop requested, draining")
        finally:
            await self.stop()

    async def _start_http(self, listener: _HttpListener) -> None:
        sock = listening_socket(self.settings.host, listener.port)
        self.ports[listener.name] = sock.getsockname()[1]
        # proxy_headers off: uvicorn would otherwise take X-Forwarded-For from any loopback peer
        # as the client; the services that care read it themselves, from proxies they trust
        config = uvicorn.Config(
            listener.app,
            log_config=None,
            access_log=False,
            lifespan="on",
            proxy_headers=False,
            timeout_keep_alive=HTTP_KEEP_ALIVE_SECONDS,
        )
        listener.server = _EmbeddedUvicorn(config)
        listener.task = asyncio.create_task(listener.server.serve(sockets=[sock]))
        while not listener.server.started:
            if listener.task.done():
                await listener.task  # surfaces the start-up error
                raise RuntimeError(f"{listener.name} listener stopped during start-up")
            await asyncio.sleep(0.01)

    async def _start_grpc(self) -> None:
        assert self._grpc_callers is not None  # set with every part
        server = grpc.aio.server(
            # the check last: a refused call is still traced and counted
            interceptors=[
                *grpc_server_interceptors(self.tracer_provider),
                GrpcServerMetrics(self.registry),
                ServiceTokenCheck(self._grpc_callers),
            ],
            options=[
                ("grpc.so_reuseport", 0),
                # Clients reconnect after this age and re-resolve the target on the way: a client
                # balancing over a headless Service's addresses finds replicas added since.
                ("grpc.max_connection_age_ms", int(self.grpc_max_connection_age_seconds * 1000)),
                ("grpc.max_connection_age_grace_ms", int(self.settings.shutdown_grace_seconds * 1000)),
                *self._grpc_options,
            ],
        )
        health_pb2_grpc.add_HealthServicer_to_server(self._grpc_health, server)
        for port, register in self._grpc_parts:
            self._grpc_services.extend(register(server))
            bound = server.add_insecure_port(f"{self.settings.host}:{port}")
            self.ports.setdefault("grpc", bound)
        reflection.enable_server_reflection(
            [
                *self._grpc_services,
                health_pb2.DESCRIPTOR.services_by_name["Health"].full_name,
                reflection.SERVICE_NAME,
            ],
            server,
        )
        await self._set_grpc_health(health_pb2.HealthCheckResponse.NOT_SERVING)
        await server.start()
        self._grpc_server = server

    async def _set_grpc_health(self, status: "health_pb2.HealthCheckResponse.ServingStatus") -> None:
        if not self._grpc_parts:
            return
        for name in ["", *self._grpc_services]:
            await self._grpc_health.set(name, status)


def listening_socket(host: str, port: int) -> socket.socket:
    """A TCP listening socket whose accepted connections get TCP_NODELAY.

    asyncio sets TCP_NODELAY only on sockets whose protocol is IPPROTO_TCP; ``socket.create_server``
    leaves it 0, and uvicorn's separate writes of headers and body then wait ~40 ms for a delayed
    ACK on every keep-alive request.
    """
    family, kind, protocol, _, address = socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP, flags=socket.AI_PASSIVE
    )[0]
    sock = socket.socket(family, kind, protocol)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.bind(address)
    sock.listen(2048)
    sock.setblocking(False)
    return sock


SettingsT = TypeVar("SettingsT", bound=ServiceSettings)


def load_settings(settings_class: type[SettingsT]) -> SettingsT:
    """Read settings from the environment; on bad values say which and exit 2, no traceback."""
    try:
        return settings_class()
    except ValidationError as error:
        problems = "; ".join(
            f"{'.'.join(str(part) for part in issue['loc'])}: {issue['msg']}" for issue in error.errors()
        )
        print(f"{settings_class.service_name}: invalid configuration: {problems}", file=sys.stderr)
        raise SystemExit(2) from None


def run_service(settings: SettingsT, assemble: Callable[[SettingsT, Service], None]) -> None:
    """Serve until signalled: logging, tracing, the service's own parts, graceful exit."""
    configure_logging(settings.service_name, settings.log_level)
    provider = setup_tracing(settings.service_name, settings.otel_exporter_otlp_endpoint)
    service = Service(settings, tracer_provider=provider)
    assemble(settings, service)
    # What imports and assembly built lives as long as the process: frozen out of the collector's
    # reach, a full collection scans only what requests allocate (agent pauses of 100–300 ms before).
    gc.collect()
    gc.freeze()
    try:
        asyncio.run(service.serve_until_signalled())
    finally:
        provider.shutdown()


class SchemaMigrations(Protocol):
    """What ``<service> migrate`` runs: Alembic's :class:`Migrations`, or a library's own setup."""

    def upgrade(self, database_url: str) -> None: ...

    def head(self) -> str | None: ...


def service_main(
    settings_class: type[SettingsT],
    assemble: Callable[[SettingsT, Service], None],
    *,
    migrations: SchemaMigrations | None = None,
    argv: list[str] | None = None,
) -> None:
    """The console entry point of a service: ``serve`` (default), and ``migrate`` if it owns tables."""
    commands = ["serve", "migrate"] if migrations is not None else ["serve"]
    parser = argparse.ArgumentParser(prog=f"sstools-{settings_class.service_name}")
    parser.add_argument("command", nargs="?", default="serve", choices=commands)
    command = parser.parse_args(argv).command
    settings = load_settings(settings_class)
    if command == "migrate":
        if migrations is None or not isinstance(settings, DatabaseSettings):
            raise TypeError(f"{settings_class.__name__} has no database to migrate")
        configure_logging(settings.service_name, settings.log_level)
        migrations.upgrade(settings.database_url)
        _log.info("migrated", extra={"revision": migrations.head()})
        return
    run_service(settings, assemble)
