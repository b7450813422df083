"""Docparse throughput: 1 MB and 10 MB PDF and XLSX through a real service, alone and 8 at once.

Files come from the test corpus builder (services/docparse/tests/corpus.py); the service is a
real `sstools-docparse` process with its default 2 workers. Prints JSON: per file kind and size,
p50/p95 seconds and MB/s one at a time, then requests/s and MB/s with 8 concurrent requests.
``in_process`` sets the extractors beside the baseline they replaced, on the 10 MB files: every
PDF page through pdfplumber (text and tables), and openpyxl's ``load_workbook(read_only=True)``
reading the first 1001 rows.

    .venv/bin/python bench/docparse.py [--repeat 5]
"""

import argparse
import asyncio
import io
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import openpyxl
import pdfplumber

from sstools.devstack.keys import PUBLIC_KEYS, service_channel
from sstools.devstack.testing import free_port, service_process
from sstools.docparse.extract.pdf import extract_pdf
from sstools.docparse.extract.xlsx import extract_xlsx
from sstools.docparse.model import Limits
from sstools.docparse.v1 import docparse_pb2, docparse_pb2_grpc

sys.path.insert(0, str(Path(__file__).parents[1] / "services" / "docparse" / "tests"))
import corpus  # type: ignore[import-not-found]  # the test corpus builder, shared rather than copied

MB = 1024 * 1024


def pdfplumber_everywhere(content: bytes, limits: Limits) -> None:
    with pdfplumber.open(io.BytesIO(content)) as document:
        for page in document.pages[: limits.max_pages]:
            page.extract_text()
            page.extract_tables()
            page.close()


def openpyxl_read_only(content: bytes, limits: Limits) -> None:
    workbook = openpyxl.load_workbook(io.BytesIO(content), read_only=True, data_only=True)
    for sheet in workbook.worksheets[: limits.max_sheets]:
        list(sheet.iter_rows(values_only=True, max_row=limits.max_rows + 1))
    workbook.close()


def in_process(files: dict[str, tuple[bytes, str]], repeat: int) -> dict[str, Any]:
    def median_s(parse: Callable[[bytes, Limits], object], content: bytes) -> float:
        seconds = []
        for _ in range(repeat):
            started = time.perf_counter()
            parse(content, Limits())
            seconds.append(time.perf_counter() - started)
        return round(statistics.median(seconds), 3)

    report: dict[str, Any] = {}
    for label, ours, baseline, name in (
        ("pdf_10mb", extract_pdf, pdfplumber_everywhere, "pdfplumber_every_page"),
        ("xlsx_10mb", extract_xlsx, openpyxl_read_only, "openpyxl_load_workbook"),
    ):
        content = files[label][0]
        mine, theirs = median_s(ours, content), median_s(baseline, content)
        report[label] = {"p50_s": mine, f"{name}_p50_s": theirs, "speedup": round(theirs / mine, 1)}
    return report


async def one_at_a_time(stub: Any, content: bytes, filename: str, repeat: int) -> dict[str, float]:
    seconds = []
    for _ in range(repeat):
        started = time.perf_counter()
        await stub.Parse(docparse_pb2.ParseRequest(filename=filename, content=content), timeout=120)
        seconds.append(time.perf_counter() - started)
    p95 = statistics.quantiles(seconds, n=20)[18] if len(seconds) > 1 else seconds[0]
    return {
        "mb": round(len(content) / MB, 2),
        "p50_s": round(statistics.median(seconds), 3),
        "p95_s": round(p95, 3),
        "mb_per_s": round(len(content) / MB / statistics.median(seconds), 2),
    }


async def concurrently(stub: Any, content: bytes, filename: str, clients: int, each: int) -> dict[str, float]:
    async def client() -> None:
        for _ in range(each):
            await stub.Parse(docparse_pb2.ParseRequest(filename=filename, content=content), timeout=300)

    started = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(clients)))
    elapsed = time.perf_counter() - started
    total = clients * each
    return {
        "requests": total,
        "requests_per_s": round(total / elapsed, 2),
        "mb_per_s": round(total * len(content) / MB / elapsed, 2),
    }


async def measure(port: int, files: dict[str, tuple[bytes, str]], repeat: int) -> dict[str, Any]:
    async with service_channel(f"127.0.0.1:{port}") as channel:  # with a token, as the agent calls
        stub = docparse_pb2_grpc.DocparseServiceStub(channel)
        report: dict[str, Any] = {}
        for label, (content, filename) in files.items():
            report[label] = {"single": await one_at_a_time(stub, content, filename, repeat)}
            report[label]["8_concurrent"] = await concurrently(
                stub, content, filename, 8, 2 if "10mb" in label else 4
            )
        return report


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    files = {
        "pdf_1mb": (corpus.pdf_of_size(1 * MB), "report.pdf"),
        "pdf_10mb": (corpus.pdf_of_size(int(9.5 * MB)), "report.pdf"),
        "xlsx_1mb": (corpus.xlsx_of_size(1 * MB), "book.xlsx"),
        "xlsx_10mb": (corpus.xlsx_of_size(int(9.5 * MB)), "book.xlsx"),
    }
    grpc_port, metrics_port = free_port(), free_port()
    env = {
        "DOCPARSE_GRPC_PORT": str(grpc_port),
        "DOCPARSE_METRICS_PORT": str(metrics_port),
        "JWT_PUBLIC_KEYS": PUBLIC_KEYS,
        "LOG_LEVEL": "WARNING",
    }
    with service_process("docparse", env, metrics_port):
        report = asyncio.run(measure(grpc_port, files, args.repeat))
    compared = in_process(files, max(3, args.repeat // 2))
    print(
        json.dumps(
            {"benchmark": "docparse", "workers": 2, "results": report, "in_process": compared}, indent=2
        )
    )


if __name__ == "__main__":
    main()
