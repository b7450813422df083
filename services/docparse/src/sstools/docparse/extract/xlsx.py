import io
import zipfile

import openpyxl

from sstools.docparse.extract.tables import bounded_table
from sstools.docparse.model import ErrorCode, Extraction, Kind, Limits, ParseFailure


def check_inflation(content: bytes, limits: Limits) -> None:
    """Refuse a zip that would inflate past the limits, from its directory, before reading any of it."""
    try:
        with zipfile.ZipFile(io.BytesIO(content)) as archive:
            unzipped = sum(member.file_size for member in archive.infolist())
    except zipfile.BadZipFile as error:
        raise ParseFailure(ErrorCode.MALFORMED, f"the workbook is not a valid zip: {error}") from None
    if unzipped > limits.max_unzipped_bytes or unzipped > limits.max_zip_ratio * max(len(content), 1):
        raise ParseFailure(
            ErrorCode.TOO_LARGE,
            f"the workbook would unpack to {unzipped} bytes from {len(content)}",
            limit_bytes=limits.max_unzipped_bytes,
        )


def extract_xlsx(content: bytes, limits: Limits) -> Extraction:
    check_inflation(content, limits)
    result = Extraction(Kind.XLSX)
    try:
        # read_only streams rows instead of building the whole sheet in memory.
        workbook = openpyxl.load_workbook(io.BytesIO(content), read_only=True, data_only=True)
    except (zipfile.BadZipFile, KeyError, ValueError, OSError) as error:
        raise ParseFailure(ErrorCode.MALFORMED, f"the workbook cannot be read: {error!s:.200}") from None
    try:
        sheets = workbook.worksheets
        result.parts = len(sheets)
        if result.parts > limits.max_sheets:
            result.truncated = True
            result.warnings.append(f"read the first {limits.max_sheets} of {result.parts} sheets")
        for sheet in sheets[: limits.max_sheets]:
            rows = sheet.iter_rows(values_only=True, max_row=limits.max_rows + 1)
            table = bounded_table(sheet.title, ([v for v in row] for row in rows), limits)
            if sheet.max_row is not None and sheet.max_row > limits.max_rows + 1:
                table.truncated = True
            result.tables.append(table)
    finally:
        workbook.close()
    result.truncated = result.truncated or any(table.truncated for table in result.tables)
    if any(table.truncated for table in result.tables):
        result.warnings.append(f"sheets cut at {limits.max_rows} rows and {limits.max_columns} columns")
    return result
