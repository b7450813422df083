"""What a file is, decided by its bytes; the name and declared type may only agree.

A ".pdf" that is really a Windows executable is refused as unsupported; a PNG uploaded as
"report.pdf" is refused as a mismatch: either way nothing trusts the label.
"""

import io
import zipfile

from sstools.docparse.model import SUPPORTED, ErrorCode, Kind, ParseFailure

_BY_EXTENSION = {
    "pdf": Kind.PDF,
    "xlsx": Kind.XLSX,
    "csv": Kind.CSV,
    "json": Kind.JSON,
    "png": Kind.PNG,
    "jpg": Kind.JPEG,
    "jpeg": Kind.JPEG,
}
_BY_CONTENT_TYPE = {
    "application/pdf": Kind.PDF,
    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet": Kind.XLSX,
    "text/csv": Kind.CSV,
    "application/json": Kind.JSON,
    "image/png": Kind.PNG,
    "image/jpeg": Kind.JPEG,
}
_FOREIGN_MAGIC = {
    b"MZ": "a Windows executable",
    b"\x7fELF": "a Linux executable",
    b"PK\x03\x04": "a zip archive",
    b"Rar!": "a RAR archive",
    b"7z\xbc\xaf": "a 7-zip archive",
    b"\x1f\x8b": "a gzip archive",
    b"GIF8": "a GIF image",
    b"\xd0\xcf\x11\xe0": "an old Office document",
}


def detect(content: bytes, filename: str = "", content_type: str = "") -> Kind:
    kind = _by_content(content)
    claimed = _claimed(filename, content_type)
    if claimed is not None and claimed != kind:
        raise ParseFailure(
            ErrorCode.TYPE_MISMATCH,
            f"the content is {kind.value.upper()} but the file is labelled {claimed.value.upper()}",
        )
    return kind


def _by_content(content: bytes) -> Kind:
    if content.startswith(b"%PDF-"):
        return Kind.PDF
    if content.startswith(b"\x89PNG\r\n\x1a\n"):
        return Kind.PNG
    if content.startswith(b"\xff\xd8\xff"):
        return Kind.JPEG
    if content.startswith(b"PK\x03\x04") and _is_xlsx(content):
        return Kind.XLSX
    for magic, what in _FOREIGN_MAGIC.items():
        if content.startswith(magic):
            raise _unsupported(f"the file is {what}")
    return _text_kind(content)


def _is_xlsx(content: bytes) -> bool:
    try:
        with zipfile.ZipFile(io.BytesIO(content)) as archive:
            names = set(archive.namelist())
    except zipfile.BadZipFile:
        return False
    return "[Content_Types].xml" in names and "xl/workbook.xml" in names


def _text_kind(content: bytes) -> Kind:
    head = content[:65536]
    if b"\x00" in head:
        raise _unsupported("the file is binary and of no type this service reads")
    stripped = head.removeprefix(b"\xef\xbb\xbf").lstrip()
    if not stripped:
        raise ParseFailure(ErrorCode.MALFORMED, "the file is empty")
    if stripped[:1] in (b"{", b"["):
        return Kind.JSON
    return Kind.CSV


def _claimed(filename: str, content_type: str) -> Kind | None:
    extension = filename.rsplit(".", 1)[-1].lower() if "." in filename else ""
    declared = content_type.split(";")[0].strip().lower()
    if extension and extension not in _BY_EXTENSION:
        raise _unsupported(f"files named *.{extension} are not read here")
    by_name = _BY_EXTENSION.get(extension)
    by_type = _BY_CONTENT_TYPE.get(declared)
    return by_name or by_type


def _unsupported(reason: str) -> ParseFailure:
    return ParseFailure(ErrorCode.UNSUPPORTED_TYPE, f"{reason}; supported: {', '.join(SUPPORTED)}")
