"""Uploaded files, read by the document-parse service: text and tables back, or why not."""

from dataclasses import dataclass

import grpc
from opentelemetry.sdk.trace import TracerProvider

from sstools.common.grpc_auth import ServiceTokenSource
from sstools.common.grpc_client import LazyChannel
from sstools.docparse.v1 import docparse_pb2, docparse_pb2_grpc

# Where docparse puts its ParseError (see docparse.proto).
PARSE_ERROR_KEY = "sstools-parse-error-bin"


class DocumentRejected(Exception):
    """Docparse read the file and refused it: unsupported, too large, malformed, encrypted."""

    def __init__(self, code: str, message: str, supported: list[str], limit_bytes: int) -> None:
        super().__init__(message)
        self.code = code
        self.supported = supported
        self.limit_bytes = limit_bytes


class DocparseUnavailable(Exception):
    """Docparse could not be asked; the chat goes on without the file."""


@dataclass(frozen=True)
class Table:
    name: str
    header: list[str]
    rows: list[list[str]]


@dataclass(frozen=True)
class Document:
    kind: str  # pdf, xlsx, csv, json, png, jpeg
    text: str
    tables: list[Table]
    truncated: bool


class DocparseClient:
    def __init__(
        self, target: str, timeout_seconds: float, tracer_provider: TracerProvider, tokens: ServiceTokenSource
    ) -> None:
        self._channel = LazyChannel(target, tracer_provider, tokens)
        self._timeout = timeout_seconds

    def _stub(self) -> "docparse_pb2_grpc.DocparseServiceAsyncStub":  # a name of the .pyi alone
        return docparse_pb2_grpc.DocparseServiceStub(self._channel.get())

    async def close(self) -> None:
        await self._channel.close()

    async def parse(self, filename: str, content: bytes) -> Document:
        request = docparse_pb2.ParseRequest(filename=filename, content=content)
        call = self._stub().Parse(request, timeout=self._timeout)
        try:
            reply = await call
        except grpc.aio.AioRpcError as error:
            trailing = dict(error.trailing_metadata() or ())
            raw = trailing.get(PARSE_ERROR_KEY)
            if isinstance(raw, bytes):
                problem = docparse_pb2.ParseError.FromString(raw)
                raise DocumentRejected(
                    docparse_pb2.ParseError.Code.Name(problem.code),
                    problem.message,
                    list(problem.supported),
                    int(problem.limit_bytes),
                ) from None
            raise DocparseUnavailable(f"docparse: {error.code().name}: {error.details()}") from None
        kind = docparse_pb2.DocumentKind.Name(reply.kind).removeprefix("DOCUMENT_KIND_").lower()
        tables = [
            Table(table.name, list(table.header), [list(row.cells) for row in table.rows])
            for table in reply.tables
        ]
        return Document(kind, reply.text, tables, reply.truncated)
