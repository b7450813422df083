"""One extractor per kind; ``extract`` picks it. Runs inside a worker process (see pool.py)."""

from collections.abc import Callable

from sstools.docparse.extract.images import extract_image
from sstools.docparse.extract.pdf import extract_pdf
from sstools.docparse.extract.structured import extract_csv, extract_json
from sstools.docparse.extract.xlsx import extract_xlsx
from sstools.docparse.model import Extraction, Kind, Limits

_EXTRACTORS: dict[Kind, Callable[[bytes, Limits], Extraction]] = {
    Kind.PDF: extract_pdf,
    Kind.XLSX: extract_xlsx,
    Kind.CSV: extract_csv,
    Kind.JSON: extract_json,
    Kind.PNG: lambda content, limits: extract_image(content, Kind.PNG, limits),
    Kind.JPEG: lambda content, limits: extract_image(content, Kind.JPEG, limits),
}


def extract(kind: Kind, content: bytes, limits: Limits) -> Extraction:
    return _EXTRACTORS[kind](content, limits)
