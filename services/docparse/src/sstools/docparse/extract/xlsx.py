import io
import zipfile

from openpyxl.reader.excel import ExcelReader
from openpyxl.styles.stylesheet import apply_stylesheet
from openpyxl.worksheet._read_only import ReadOnlyWorksheet

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
        reader = _open(content)
    except (zipfile.BadZipFile, KeyError, ValueError, OSError) as error:
        raise ParseFailure(ErrorCode.MALFORMED, f"the workbook cannot be read: {error!s:.200}") from None
    try:
        sheets = [
            (sheet.name, rel.target)
            for sheet, rel in reader.parser.find_sheets()
            if rel.target in reader.valid_files and "chartsheet" not in rel.Type
        ]
        result.parts = len(sheets)
        if result.parts > limits.max_sheets:
            result.truncated = True
            result.warnings.append(f"read the first {limits.max_sheets} of {result.parts} sheets")
        for name, path in sheets[: limits.max_sheets]:
            sheet = _StreamedSheet(reader.wb, name, path, reader.shared_strings)
            # One row past the limit tells the table it was cut; the rest is never read.
            rows = sheet.iter_rows(values_only=True, max_row=limits.max_rows + 2)
            result.tables.append(bounded_table(name, rows, limits))
    finally:
        reader.archive.close()
    result.truncated = result.truncated or any(table.truncated for table in result.tables)
    if any(table.truncated for table in result.tables):
        result.warnings.append(f"sheets cut at {limits.max_rows} rows and {limits.max_columns} columns")
    return result


class _StreamedSheet(ReadOnlyWorksheet):  # type: ignore[misc]  # openpyxl is untyped
    """A read-only sheet that streams its rows without first learning its size.

    openpyxl's read-only sheet reads the whole sheet once to size it when the file declares no
    dimension (as writers that stream rows do): seconds for a 10 MB workbook of which only the
    first rows are kept. Without a size the rows are streamed until the caller stops.
    """

    def _get_size(self) -> None:
        pass


def _open(content: bytes) -> ExcelReader:
    """What ``load_workbook(read_only=True, data_only=True)`` reads, less the sheets' sizes."""
    reader = ExcelReader(io.BytesIO(content), read_only=True, data_only=True, keep_links=False)
    reader.read_manifest()
    reader.read_strings()
    reader.read_workbook()
    apply_stylesheet(reader.archive, reader.wb)  # the number formats that tell a date from a number
    return reader
