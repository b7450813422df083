import time
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram

import grpc
from sstools.docparse.detect import detect
from sstools.docparse.model import SUPPORTED, ErrorCode, Extraction, Kind, Limits, ParseFailure
from sstools.docparse.pool import ParserPool
from sstools.docparse.v1 import docparse_pb2, docparse_pb2_grpc

ERROR_METADATA_KEY = "sstools-parse-error-bin"
_STATUS = {
    ErrorCode.UNSUPPORTED_TYPE: grpc.StatusCode.INVALID_ARGUMENT,
    ErrorCode.TYPE_MISMATCH: grpc.StatusCode.INVALID_ARGUMENT,
    ErrorCode.MALFORMED: grpc.StatusCode.INVALID_ARGUMENT,
    ErrorCode.TOO_LARGE: grpc.StatusCode.RESOURCE_EXHAUSTED,
    ErrorCode.ENCRYPTED: grpc.StatusCode.FAILED_PRECONDITION,
    ErrorCode.TIMEOUT: grpc.StatusCode.DEADLINE_EXCEEDED,
}
_KINDS = {
    Kind.PDF: docparse_pb2.DOCUMENT_KIND_PDF,
    Kind.XLSX: docparse_pb2.DOCUMENT_KIND_XLSX,
    Kind.CSV: docparse_pb2.DOCUMENT_KIND_CSV,
    Kind.JSON: docparse_pb2.DOCUMENT_KIND_JSON,
    Kind.PNG: docparse_pb2.DOCUMENT_KIND_PNG,
    Kind.JPEG: docparse_pb2.DOCUMENT_KIND_JPEG,
}


class DocparseMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.seconds = Histogram(
            "sstools_docparse_parse_seconds",
            "Time to parse one file, by kind.",
            ["kind"],
            buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
            registry=registry,
        )
        self.bytes = Histogram(
            "sstools_docparse_file_bytes",
            "Size of the files received, by kind.",
            ["kind"],
            buckets=(1e3, 1e4, 1e5, 1e6, 5e6, 1e7, 2e7),
            registry=registry,
        )
        self.errors = Counter(
            "sstools_docparse_errors_total",
            "Files refused or failed, by error code.",
            ["code"],
            registry=registry,
        )
        self.worker_restarts = Counter(
            "sstools_docparse_worker_restarts_total",
            "Parser workers replaced, by reason.",
            ["reason"],
            registry=registry,
        )


class DocparseServicer(docparse_pb2_grpc.DocparseServiceServicer):
    """Thin edge: size and type checks here, the parsing itself in a worker."""

    def __init__(self, pool: ParserPool, limits: Limits, metrics: DocparseMetrics) -> None:
        self._pool = pool
        self._limits = limits
        self._metrics = metrics

    async def Parse(
        self, request: docparse_pb2.ParseRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> docparse_pb2.ParseResponse:
        started = time.perf_counter()
        kind_label = "unknown"
        try:
            if len(request.content) > self._limits.max_file_bytes:
                raise ParseFailure(
                    ErrorCode.TOO_LARGE,
                    f"the file is {len(request.content)} bytes; the limit is {self._limits.max_file_bytes}",
                    limit_bytes=self._limits.max_file_bytes,
                )
            kind = detect(request.content, request.filename, request.content_type)
            kind_label = kind.value
            self._metrics.bytes.labels(kind_label).observe(len(request.content))
            extraction = await self._pool.parse(kind, request.content)
        except ParseFailure as failure:
            self._metrics.errors.labels(failure.code.value).inc()
            context.set_trailing_metadata(((ERROR_METADATA_KEY, _error(failure).SerializeToString()),))
            await context.abort(_STATUS[failure.code], f"{failure.code.value}: {failure.message}")
        finally:
            self._metrics.seconds.labels(kind_label).observe(time.perf_counter() - started)
        return to_proto(extraction)


def _error(failure: ParseFailure) -> docparse_pb2.ParseError:
    supported = SUPPORTED if failure.code in (ErrorCode.UNSUPPORTED_TYPE, ErrorCode.TYPE_MISMATCH) else []
    return docparse_pb2.ParseError(
        code=docparse_pb2.ParseError.Code.Value(failure.code.value),
        message=failure.message,
        supported=supported,
        limit_bytes=failure.limit_bytes,
    )


def to_proto(extraction: Extraction) -> docparse_pb2.ParseResponse:
    image = None
    if extraction.image_size is not None:
        width, height = extraction.image_size
        image = docparse_pb2.ImageInfo(width=width, height=height, mode=extraction.image_mode)
    return docparse_pb2.ParseResponse(
        kind=_KINDS[extraction.kind],
        text=extraction.text,
        tables=[
            docparse_pb2.Table(
                name=table.name,
                header=table.header,
                rows=[docparse_pb2.TableRow(cells=row) for row in table.rows],
                truncated=table.truncated,
            )
            for table in extraction.tables
        ],
        parts=extraction.parts,
        truncated=extraction.truncated,
        warnings=extraction.warnings,
        image=image,
    )


def register(server: grpc.aio.Server, servicer: DocparseServicer) -> list[str]:
    docparse_pb2_grpc.add_DocparseServiceServicer_to_server(servicer, server)
    return [docparse_pb2.DESCRIPTOR.services_by_name["DocparseService"].full_name]
