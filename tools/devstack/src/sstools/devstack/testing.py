"""Helpers the test suites share: a service started in-process on free ports, probes, databases."""

import asyncio
import os
import random
import secrets
import socket
import subprocess
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

import grpc
import httpx
import psycopg
import uvicorn
from grpc_health.v1 import health_pb2, health_pb2_grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.sdk.trace import TracerProvider
from psycopg import sql
from sqlalchemy import make_url

from sstools.common.runtime import Service
from sstools.common.settings import ServiceSettings
from sstools.devstack.paths import VENV_BIN
from sstools.devstack.postgres import ensure_owned_database

SettingsT = TypeVar("SettingsT", bound=ServiceSettings)


@asynccontextmanager
async def started_service(
    settings: SettingsT,
    assemble: Callable[[SettingsT, Service], None],
    provider: TracerProvider,
) -> AsyncIterator[Service]:
    """Assemble a service as its ``main`` would, start it, stop it after the block."""
    service = Service(settings, tracer_provider=provider)
    assemble(settings, service)
    await service.start()
    try:
        yield service
    finally:
        await service.stop()


async def grpc_health(target: str, service: str = "") -> "health_pb2.HealthCheckResponse.ServingStatus":
    async with grpc.aio.insecure_channel(target) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        reply = await stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=5)
    return reply.status


async def http_get(url: str) -> httpx.Response:
    async with httpx.AsyncClient(timeout=5) as client:
        return await client.get(url)


@contextmanager
def scratch_database(database_url: str) -> Iterator[str]:
    """A new, empty database on the server of ``database_url``; dropped after the block."""
    name = f"sstools_t_{uuid.uuid4().hex[:12]}"
    admin = make_url(database_url).set(drivername="postgresql")
    admin_dsn = admin.set(database="postgres").render_as_string(hide_password=False)
    with psycopg.connect(admin_dsn, autocommit=True) as connection:
        connection.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield admin.set(database=name).render_as_string(hide_password=False)
    finally:
        with psycopg.connect(admin_dsn, autocommit=True) as connection:
            connection.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))


@contextmanager
def scratch_owned_database(database_url: str) -> Iterator[str]:
    """A new database owned by a login role of its own (as ``make run``'s PostgreSQL demo is),
    as that role's URL; the database, then the role, are dropped after the block."""
    admin_dsn = make_url(database_url).set(drivername="postgresql", database="postgres")
    role: str | None = None
    try:
        with scratch_database(database_url) as scratch:
            role = str(make_url(scratch).database)
            yield ensure_owned_database(scratch, role, secrets.token_urlsafe(18))
    finally:
        if role is not None:
            with psycopg.connect(
                admin_dsn.render_as_string(hide_password=False), autocommit=True
            ) as connection:
                connection.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(role)))


@dataclass(frozen=True)
class ProbeReport:
    """What a freshly started service answers on each of its probes."""

    listeners: frozenset[str]
    readyz_status: int
    readyz_checks: dict[str, str]
    grpc_status: "health_pb2.HealthCheckResponse.ServingStatus | None"


async def probe(
    settings: SettingsT, assemble: Callable[[SettingsT, Service], None], provider: TracerProvider
) -> ProbeReport:
    """Start the service in-process, read its probes, stop it."""
    async with started_service(settings, assemble, provider) as service:
        readyz = await http_get(f"http://127.0.0.1:{service.ports['metrics']}/readyz")
        grpc_port = service.ports.get("grpc")
        status = await grpc_health(f"127.0.0.1:{grpc_port}") if grpc_port else None
        return ProbeReport(frozenset(service.ports), readyz.status_code, readyz.json()["checks"], status)


def free_port() -> int:
    """A port nothing listens on now and no other call hands out, for a process the test starts.

    Picked below the kernel's ephemeral range (32768+), so an outgoing connection made before
    the process binds cannot take it. Between the probe and the process's bind the port is free
    for anyone to take: so each pytest-xdist worker draws from its own slice of the range, and
    no port is handed out twice in one test process (two listeners of one service, or a test
    that starts a process while another's has not bound yet).
    """
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw")
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    index = int(worker) if worker.isdigit() else 0
    width = (_FREE_PORTS_END - _FREE_PORTS_START) // max(workers, 1)
    start = _FREE_PORTS_START + width * (index % max(workers, 1))
    while True:
        port = random.randrange(start, start + width)
        if port in _ports_handed_out:
            continue
        with socket.socket() as probe_socket:
            try:
                probe_socket.bind(("127.0.0.1", port))
            except OSError:
                continue
        _ports_handed_out.add(port)
        return port


_FREE_PORTS_START, _FREE_PORTS_END = 20000, 32000
_ports_handed_out: set[int] = set()


def framing_allowed(page_policy: str) -> list[str]:
    """The origins besides its own that the page's Content-Security-Policy header lets frame it,
    once the rest is checked to be the page's strict policy (web/Caddyfile): nothing loaded,
    fetched or embedded from elsewhere, no image but its own or data:."""
    policy = {name: sources for name, *sources in (part.split() for part in page_policy.split(";") if part)}
    for directive, sources in {
        "default-src": ["'self'"],
        "img-src": ["'self'", "data:"],
        "connect-src": ["'self'"],
        "object-src": ["'none'"],
        "base-uri": ["'self'"],
    }.items():
        assert policy.get(directive) == sources, (directive, page_policy)
    assert policy["frame-ancestors"][0] == "'self'", page_policy
    return policy["frame-ancestors"][1:]


def sign_in(base_url: str, password: str, username: str = "admin") -> str:
    """A user token from ops' sign-in at ``base_url`` (ops, or the page's proxy in front of it),
    as the page gets one. Ops creates its admin in the background once its schema is there, and
    each failure past the free ones blocks the name a little longer: wait as told, then retry."""
    for _ in range(100):
        answer = httpx.post(
            f"{base_url}/api/auth/login", json={"username": username, "password": password}, timeout=10
        )
        if answer.status_code not in (401, 429):
            break
        time.sleep(float(answer.headers.get("Retry-After", 0.2)))
    if answer.status_code != 200:
        raise AssertionError(f"no sign-in at {base_url}: {answer.status_code} {answer.text}")
    return str(answer.json()["access_token"])


async def wait_until(condition: Callable[[], Awaitable[bool]], within_seconds: float, what: str) -> None:
    """Poll ``condition`` (another process's state, which nothing can signal) until it holds."""
    deadline = asyncio.get_running_loop().time() + within_seconds
    while not await condition():
        if asyncio.get_running_loop().time() > deadline:
            raise TimeoutError(f"{what} not reached after {within_seconds} s")
        await asyncio.sleep(0.2)


def wait_ready(metrics_port: int, within_seconds: float = 90) -> float:
    """Block until a service's /readyz answers 200; return the seconds it took."""
    started = time.monotonic()
    while time.monotonic() - started < within_seconds:
        try:
            if httpx.get(f"http://127.0.0.1:{metrics_port}/readyz", timeout=1).status_code == 200:
                return time.monotonic() - started
        except httpx.TransportError:
            pass
        time.sleep(0.05)
    raise TimeoutError(f"no ready service on port {metrics_port} after {within_seconds} s")


@contextmanager
def service_process(
    name: str, environment: Mapping[str, str], metrics_port: int
) -> Iterator[subprocess.Popen[bytes]]:
    """``sstools-<name>`` as a real process, handed over once ready, stopped with SIGTERM after."""
    script = str(VENV_BIN / f"sstools-{name}")
    # Its logs go to the caller's stderr: a bench's stdout carries nothing but its JSON figures.
    process = subprocess.Popen([script], env={**os.environ, **environment}, stdout=2)  # fd 2: stderr
    try:
        wait_ready(metrics_port)
        yield process
    finally:
        process.terminate()
        process.wait(30)


async def wait_grpc_serving(port: int, within_seconds: float = 60) -> None:
    """Until the gRPC health check on ``port`` says SERVING."""

    async def serving() -> bool:
        try:
            return bool(await grpc_health(f"127.0.0.1:{port}") == health_pb2.HealthCheckResponse.SERVING)
        except grpc.aio.AioRpcError:
            return False

    await wait_until(serving, within_seconds, f"gRPC SERVING on {port}")


@asynccontextmanager
async def serving(app: Any) -> AsyncIterator[str]:
    """An ASGI app on a loopback socket (a true edge's stand-in speaking its real protocol);
    yields its base URL."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_config=None, access_log=False, lifespan="off"))
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        while not server.started:
            if task.done():
                await task
            await asyncio.sleep(0.01)
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        await task
        sock.close()


_HTTP_METHODS = (b"GET ", b"POST ", b"PUT ", b"PATCH ", b"DELETE ", b"HEAD ", b"OPTIONS ")


class FaultyLink:
    """A TCP relay on loopback in front of a real HTTP server, for fault tests: it can hang up
    on the next requests before they reach the server, or hold each request a while first. It
    acts per request (a chunk that starts with an HTTP method), so pooled keep-alive
    connections meet it as new ones do."""

    def __init__(self, upstream_port: int) -> None:
        self._upstream_port = upstream_port
        self._server: asyncio.Server | None = None
        self._hang_up = 0
        self._delay = 0.0
        self._delayed: tuple[bytes, ...] = _HTTP_METHODS
        self._clients: set[asyncio.StreamWriter] = set()

    @property
    def port(self) -> int:
        assert self._server is not None, "not started"
        return int(self._server.sockets[0].getsockname()[1])

    def hang_up_on_next(self, requests: int) -> None:
        self._hang_up = requests

    def delay(self, seconds: float, methods: tuple[str, ...] | None = None) -> None:
        """Hold each request this long first — only those of ``methods``, if named."""
        self._delay = seconds
        self._delayed = tuple(f"{method} ".encode() for method in methods) if methods else _HTTP_METHODS

    async def __aenter__(self) -> "FaultyLink":
        self._server = await asyncio.start_server(self._relay, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *_: object) -> None:
        assert self._server is not None
        self._server.close()
        for writer in list(self._clients):
            writer.close()
        await self._server.wait_closed()

    async def _relay(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        try:
            upstream_reader, upstream_writer = await asyncio.open_connection("127.0.0.1", self._upstream_port)
        except OSError:
            client_writer.close()
            return
        self._clients.add(client_writer)

        async def admit(chunk: bytes) -> bool:
            """Whether a chunk from the client goes on; a request's first may be held or dropped."""
            if not chunk.startswith(_HTTP_METHODS):
                return True
            if self._hang_up > 0:
                self._hang_up -= 1
                client_writer.close()  # the client sees the server hang up on its request
                return False
            if chunk.startswith(self._delayed):
                await asyncio.sleep(self._delay)
            return True

        try:
            await asyncio.gather(
                _pipe(client_reader, upstream_writer, admit),
                _pipe(upstream_reader, client_writer),
                return_exceptions=True,  # either side going away ends the relay
            )
        finally:
            self._clients.discard(client_writer)
            upstream_writer.close()
            client_writer.close()


async def _pipe(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    admit: Callable[[bytes], Awaitable[bool]] | None = None,
) -> None:
    while chunk := await reader.read(65536):
        if admit is not None and not await admit(chunk):
            break
        writer.write(chunk)
        await writer.drain()
    writer.close()


@dataclass(frozen=True)
class CollectedSpan:
    service: str
    name: str
    trace_id: str
    span_id: str
    parent_span_id: str
    attributes: dict[str, Any]
    start_ns: int = 0
    end_ns: int = 0

    @property
    def ms(self) -> float:
        return (self.end_ns - self.start_ns) / 1e6


class OtlpCollector(trace_service_pb2_grpc.TraceServiceServicer):
    """A real OTLP/gRPC trace receiver on loopback that keeps every span it is sent."""

    def __init__(self) -> None:
        self.spans: list[CollectedSpan] = []

    async def Export(
        self,
        request: trace_service_pb2.ExportTraceServiceRequest,
        context: grpc.aio.ServicerContext[Any, Any],
    ) -> trace_service_pb2.ExportTraceServiceResponse:
        for resource_spans in request.resource_spans:
            resource = {item.key: item.value.string_value for item in resource_spans.resource.attributes}
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    attributes = {item.key: _otlp_value(item.value) for item in span.attributes}
                    self.spans.append(
                        CollectedSpan(
                            resource.get("service.name", ""),
                            span.name,
                            span.trace_id.hex(),
                            span.span_id.hex(),
                            span.parent_span_id.hex(),
                            attributes,
                            span.start_time_unix_nano,
                            span.end_time_unix_nano,
                        )
                    )
        return trace_service_pb2.ExportTraceServiceResponse()


def _otlp_value(value: Any) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [_otlp_value(item) for item in value.array_value.values]
    return getattr(value, kind) if kind else None


@asynccontextmanager
async def otlp_collector() -> AsyncIterator[tuple[OtlpCollector, str]]:
    """A collector and the OTEL_EXPORTER_OTLP_ENDPOINT that reaches it."""
    collector = OtlpCollector()
    server = grpc.aio.server()
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(collector, server)  # type: ignore[no-untyped-call]
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        yield collector, f"http://127.0.0.1:{port}"
    finally:
        await server.stop(0)
