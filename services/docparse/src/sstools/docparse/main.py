"""Docparse process: gRPC on ``DOCPARSE_GRPC_PORT``, probes and metrics on ``DOCPARSE_METRICS_PORT``.

Ready once its parser workers are up; files are parsed in them, never in this process.
"""

from sstools.common.runtime import Service, service_main
from sstools.docparse.grpc.servicer import DocparseMetrics, DocparseServicer, register
from sstools.docparse.pool import ParserPool
from sstools.docparse.settings import DocparseSettings

# Room for the largest accepted file plus the request's other fields, so an oversized file
# reaches the servicer and gets a typed TOO_LARGE instead of a transport error.
_ENVELOPE_BYTES = 1024 * 1024


def assemble(settings: DocparseSettings, service: Service) -> None:
    metrics = DocparseMetrics(service.registry)
    limits = settings.limits()
    pool = ParserPool(
        workers=settings.workers,
        memory_bytes=settings.worker_memory_mb * 1024 * 1024,
        timeout_seconds=settings.parse_timeout_seconds,
        limits=limits,
        on_replace=lambda reason: metrics.worker_restarts.labels(reason).inc(),
    )
    servicer = DocparseServicer(pool, limits, metrics)
    service.add_grpc(
        settings.grpc_port,
        lambda server: register(server, servicer),
        callers=settings.grpc_callers(),
        max_message_bytes=2 * settings.max_file_bytes + _ENVELOPE_BYTES,
    )
    service.add_warmup(pool.start)
    service.add_cleanup(pool.close)


def main() -> None:
    service_main(DocparseSettings, assemble)
