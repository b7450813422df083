from typing import ClassVar

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from sstools.common.settings import AuthSettings, ServiceSettings
from sstools.docparse.model import Limits

OCR_SHARE_OF_PARSE = 0.8


class DocparseSettings(ServiceSettings, AuthSettings):
    model_config = SettingsConfigDict(env_prefix="DOCPARSE_")
    service_name: ClassVar[str] = "docparse"

    grpc_port: int = Field(default=50052, ge=0, le=65535, description="gRPC DocparseService port.")
    metrics_port: int = Field(default=9102, ge=0, le=65535, description="Probes and /metrics port.")
    max_file_bytes: int = Field(
        default=10 * 1024 * 1024, ge=1, description="Largest file accepted (TOO_LARGE beyond)."
    )
    max_pages: int = Field(default=200, ge=1, description="PDF pages read; the rest is reported as cut.")
    max_rows: int = Field(default=1000, ge=1, description="Rows read per table or sheet.")
    max_text_chars: int = Field(default=200_000, ge=1, description="Characters of text returned.")
    max_unzipped_bytes: int = Field(
        default=200 * 1024 * 1024, ge=1, description="Most an XLSX may unpack to (checked before opening)."
    )
    workers: int = Field(default=2, ge=1, le=32, description="Parser worker processes.")
    worker_memory_mb: int = Field(default=1024, ge=128, description="Address-space limit of each worker.")
    parse_timeout_seconds: float = Field(
        default=30.0, gt=0, description="Longest one file may take to parse."
    )
    ocr_languages: str = Field(
        default="rus+eng",
        pattern=r"^([a-z_]{3,16}(\+[a-z_]{3,16})*)?$",
        description="Tesseract languages the text in PNG and JPEG images is read in ('' reads none).",
    )
    ocr_timeout_seconds: float = Field(
        default=20.0,
        gt=0,
        description="Longest reading the text of one image may take (below the parse timeout).",
    )

    def limits(self) -> Limits:
        return Limits(
            max_file_bytes=self.max_file_bytes,
            max_pages=self.max_pages,
            max_rows=self.max_rows,
            max_text_chars=self.max_text_chars,
            max_unzipped_bytes=self.max_unzipped_bytes,
            ocr_languages=self.ocr_languages,
            # the worker must answer within the parse's time, so the recognition stops before it
            ocr_seconds=min(self.ocr_timeout_seconds, self.parse_timeout_seconds * OCR_SHARE_OF_PARSE),
        )
