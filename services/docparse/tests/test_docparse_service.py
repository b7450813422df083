"""Docparse as its process serves it: files over gRPC, typed errors, and hostile files that
never take the service down."""

import asyncio
import os
import signal
import subprocess
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import grpc
import psutil
import pytest
from grpc_health.v1 import health_pb2
from opentelemetry.sdk.trace import TracerProvider

from sstools.common.grpc_auth import bearer
from sstools.devstack.callers import answer, not_refused
from sstools.devstack.documents import screenshot_bytes
from sstools.devstack.keys import PUBLIC_KEYS, service_channel, service_token
from sstools.devstack.testing import free_port, grpc_health, http_get, probe, wait_grpc_serving
from sstools.docparse.grpc.servicer import ERROR_METADATA_KEY
from sstools.docparse.main import assemble
from sstools.docparse.settings import DocparseSettings
from sstools.docparse.v1 import docparse_pb2, docparse_pb2_grpc

from . import corpus

SERVING = health_pb2.HealthCheckResponse.SERVING
SERVICE = docparse_pb2.DESCRIPTOR.services_by_name["DocparseService"].full_name
# What the whole service (server and its workers) may hold at any moment while hostile files
# are parsed: the server ~150 MB, each of 2 workers bounded by its 768 MB address-space limit.
RSS_BOUND_MB = 1200


async def test_docparse_is_ready_on_grpc_and_probes(tracer_provider: TracerProvider) -> None:
    settings = DocparseSettings(grpc_port=0, metrics_port=0, workers=1, jwt_public_keys=PUBLIC_KEYS)
    report = await probe(settings, assemble, tracer_provider)
    assert report.listeners == {"metrics", "grpc"}
    assert (report.readyz_status, report.grpc_status) == (200, SERVING)


class DocparseProcess:
    def __init__(self, **settings: str) -> None:
        self.grpc_port, self.metrics_port = free_port(), free_port()
        environment = {
            **os.environ,
            "DOCPARSE_GRPC_PORT": str(self.grpc_port),
            "DOCPARSE_METRICS_PORT": str(self.metrics_port),
            "JWT_PUBLIC_KEYS": PUBLIC_KEYS,
            **{f"DOCPARSE_{key.upper()}": value for key, value in settings.items()},
        }
        self.process = subprocess.Popen(["sstools-docparse"], env=environment, stdout=subprocess.DEVNULL)

    def rss_mb(self) -> float:
        try:
            tree = [
                psutil.Process(self.process.pid),
                *psutil.Process(self.process.pid).children(recursive=True),
            ]
            return float(sum(member.memory_info().rss for member in tree if member.is_running())) / 2**20
        except psutil.NoSuchProcess:
            return 0.0

    def stop(self) -> int:
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(30)


@pytest.fixture(scope="module")
def docparse() -> Iterator[DocparseProcess]:
    service = DocparseProcess(workers="2", worker_memory_mb="768", parse_timeout_seconds="20")
    yield service
    if service.process.poll() is None:
        assert service.stop() == 0


@pytest.fixture
async def stub(docparse: DocparseProcess) -> AsyncIterator[Any]:
    await wait_grpc_serving(docparse.grpc_port)
    async with service_channel(f"127.0.0.1:{docparse.grpc_port}") as channel:  # sends any size
        yield docparse_pb2_grpc.DocparseServiceStub(channel)


async def test_a_file_is_refused_to_a_caller_without_a_valid_service_token(docparse: DocparseProcess) -> None:
    await wait_grpc_serving(docparse.grpc_port)  # health answers without a token
    target = f"127.0.0.1:{docparse.grpc_port}"
    request = docparse_pb2.ParseRequest(filename="a.csv", content=b"a,b\n1,2\n")
    assert await not_refused(target, SERVICE, "Parse", request) == {}
    assert await answer(target, SERVICE, "Parse", request, [bearer(service_token())]) == (
        grpc.StatusCode.OK,
        "",
    )


async def _parse(stub: Any, content: bytes, filename: str) -> docparse_pb2.ParseResponse:
    reply: docparse_pb2.ParseResponse = await stub.Parse(
        docparse_pb2.ParseRequest(filename=filename, content=content), timeout=60
    )
    return reply


async def _refusal(
    stub: Any, content: bytes, filename: str
) -> tuple[grpc.StatusCode, docparse_pb2.ParseError]:
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await _parse(stub, content, filename)
    trailing = dict(refused.value.trailing_metadata() or ())
    return refused.value.code(), docparse_pb2.ParseError.FromString(trailing[ERROR_METADATA_KEY])


async def test_the_generated_corpus_parses_over_grpc(stub: Any) -> None:
    russian = await _parse(stub, corpus.pdf_report("ru"), "отчёт.pdf")
    assert russian.kind == docparse_pb2.DOCUMENT_KIND_PDF
    assert corpus.PDF_TITLE["ru"] in russian.text
    assert [list(russian.tables[0].header), *[list(row.cells) for row in russian.tables[0].rows]] == (
        corpus.PDF_TABLE["ru"]
    )
    workbook = await _parse(stub, corpus.xlsx_workbook(), "sales.xlsx")
    assert [table.name for table in workbook.tables] == list(corpus.XLSX_SHEETS)
    spreadsheet = await _parse(stub, corpus.csv_cp1251(), "выгрузка.csv")
    assert list(spreadsheet.tables[0].header) == corpus.CSV_ROWS[0]
    assert (await _parse(stub, corpus.json_document(), "data.json")).kind == docparse_pb2.DOCUMENT_KIND_JSON
    image = await _parse(stub, corpus.png_image(), "chart.png")
    assert (image.image.width, image.image.height) == corpus.PNG_SIZE
    photo = await _parse(stub, corpus.jpeg_image(), "photo.jpeg")
    assert (photo.image.width, photo.image.height) == corpus.JPEG_SIZE
    # read in a worker, under its memory limit: Tesseract is its child, and shares it
    panel = await _parse(
        stub, screenshot_bytes(["Error: column revenue does not exist", "Ошибка чарта"]), "e.png"
    )
    assert "revenue" in panel.text.lower(), panel.text
    assert "ошибка" in panel.text.lower(), panel.text
    strip = await _parse(stub, corpus.png_strip(), "strip.png")  # read at a bounded size, not refused
    assert (strip.image.width, strip.image.height) == (1, 40_000)


HOSTILE: list[tuple[str, Callable[[], bytes], grpc.StatusCode, str]] = [
    ("zip-bomb.xlsx", corpus.xlsx_zip_bomb, grpc.StatusCode.RESOURCE_EXHAUSTED, "TOO_LARGE"),
    ("truncated.pdf", corpus.pdf_truncated, grpc.StatusCode.INVALID_ARGUMENT, "MALFORMED"),
    ("setup.pdf", corpus.exe_named_pdf, grpc.StatusCode.INVALID_ARGUMENT, "UNSUPPORTED_TYPE"),
    ("bundle.zip", corpus.zip_archive, grpc.StatusCode.INVALID_ARGUMENT, "UNSUPPORTED_TYPE"),
    ("big.pdf", corpus.oversized, grpc.StatusCode.RESOURCE_EXHAUSTED, "TOO_LARGE"),
    ("nested.json", corpus.deeply_nested_json, grpc.StatusCode.INVALID_ARGUMENT, "MALFORMED"),
    ("locked.pdf", corpus.pdf_encrypted, grpc.StatusCode.FAILED_PRECONDITION, "ENCRYPTED"),
]


async def test_hostile_files_get_typed_errors_while_health_stays_up(
    stub: Any, docparse: DocparseProcess
) -> None:
    health_failures: list[str] = []
    peak_rss: list[float] = []

    async def watch() -> None:
        while True:
            try:
                if await grpc_health(f"127.0.0.1:{docparse.grpc_port}") != SERVING:
                    health_failures.append("not serving")
            except grpc.aio.AioRpcError as error:
                health_failures.append(repr(error.code()))
            peak_rss.append(docparse.rss_mb())
            await asyncio.sleep(0.05)

    watcher = asyncio.create_task(watch())
    try:
        for filename, build, status, code in HOSTILE:
            got_status, error = await _refusal(stub, build(), filename)
            assert (got_status, docparse_pb2.ParseError.Code.Name(error.code)) == (status, code), filename
            if code == "UNSUPPORTED_TYPE":
                assert list(error.supported) == ["pdf", "xlsx", "csv", "json", "png", "jpeg"]
            if filename == "big.pdf":
                assert error.limit_bytes == 10 * 1024 * 1024
        many = await _parse(stub, corpus.pdf_many_pages(), "thousands.pdf")
        assert many.parts >= 3000
        assert many.truncated
        assert (await _parse(stub, corpus.pdf_report("en"), "after.pdf")).text  # still parsing
    finally:
        watcher.cancel()
    assert health_failures == []
    assert max(peak_rss) < RSS_BOUND_MB


async def test_a_file_past_its_deadline_costs_only_its_worker() -> None:
    service = DocparseProcess(workers="1", parse_timeout_seconds="1", max_pages="100000")
    try:
        await wait_grpc_serving(service.grpc_port)
        async with service_channel(f"127.0.0.1:{service.grpc_port}") as channel:
            stub = docparse_pb2_grpc.DocparseServiceStub(channel)
            worker_before = psutil.Process(service.process.pid).children(recursive=True)
            status, error = await _refusal(stub, corpus.pdf_many_pages(ruled=True), "slow.pdf")
            assert (status, docparse_pb2.ParseError.Code.Name(error.code)) == (
                grpc.StatusCode.DEADLINE_EXCEEDED,
                "TIMEOUT",
            )
            assert (await _parse(stub, corpus.pdf_report("ru"), "next.pdf")).tables  # a fresh worker answers
            worker_after = psutil.Process(service.process.pid).children(recursive=True)
        assert {p.pid for p in worker_before} != {p.pid for p in worker_after}
        metrics = (await http_get(f"http://127.0.0.1:{service.metrics_port}/metrics")).text
        assert 'sstools_docparse_errors_total{code="TIMEOUT"} 1.0' in metrics
        assert 'sstools_docparse_worker_restarts_total{reason="timeout"} 1.0' in metrics
        assert 'sstools_docparse_parse_seconds_count{kind="pdf"} 2.0' in metrics
    finally:
        assert service.stop() == 0
