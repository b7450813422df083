"""What a parse produces, what limits it works within, and how it fails."""

from dataclasses import dataclass, field
from enum import StrEnum


class Kind(StrEnum):
    PDF = "pdf"
    XLSX = "xlsx"
    CSV = "csv"
    JSON = "json"
    PNG = "png"
    JPEG = "jpeg"


SUPPORTED = [kind.value for kind in Kind]


class ErrorCode(StrEnum):
    UNSUPPORTED_TYPE = "UNSUPPORTED_TYPE"
    TYPE_MISMATCH = "TYPE_MISMATCH"
    TOO_LARGE = "TOO_LARGE"
    MALFORMED = "MALFORMED"
    ENCRYPTED = "ENCRYPTED"
    TIMEOUT = "TIMEOUT"


class ParseFailure(Exception):
    """A file this service will not or cannot read; ``code`` says which, for the caller."""

    def __init__(self, code: ErrorCode, message: str, *, limit_bytes: int = 0) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.limit_bytes = limit_bytes


@dataclass(frozen=True)
class Limits:
    max_file_bytes: int = 10 * 1024 * 1024
    max_pages: int = 200
    max_sheets: int = 20
    max_rows: int = 1000
    max_columns: int = 50
    max_cell_chars: int = 1000
    max_text_chars: int = 200_000
    max_json_depth: int = 200
    # An XLSX is a zip: refuse it before opening when it would inflate past these.
    max_unzipped_bytes: int = 200 * 1024 * 1024
    max_zip_ratio: int = 200
    # Text in images, read by Tesseract in these languages ("": not read) within this time.
    ocr_languages: str = "rus+eng"
    ocr_seconds: float = 20.0


@dataclass
class ExtractedTable:
    name: str
    header: list[str]
    rows: list[list[str]]
    truncated: bool = False


@dataclass
class Extraction:
    kind: Kind
    text: str = ""
    tables: list[ExtractedTable] = field(default_factory=list)
    parts: int = 0
    truncated: bool = False
    warnings: list[str] = field(default_factory=list)
    image_size: tuple[int, int] | None = None
    image_mode: str = ""

    def cut_text(self, text: str, limits: Limits) -> str:
        """``text`` within the output limit, noting the cut."""
        if len(text) <= limits.max_text_chars:
            return text
        self.truncated = True
        self.warnings.append(f"text cut at {limits.max_text_chars} characters")
        return text[: limits.max_text_chars]
