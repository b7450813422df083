"""A PDF's text by PDFium, its ruled tables by pdfplumber.

PDFium (pypdfium2) reads a page's text about ten times faster than pdfminer, on which pdfplumber
builds; pdfplumber stays for tables, which PDFium does not find. pdfplumber's default table
finder builds a table only from drawn lines and rectangles, so it runs only on the pages where
PDFium sees a path object (in the page or in a form it draws): on the others it could find none.
"""

import io

import pdfplumber
import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c
from pdfminer.pdfdocument import PDFEncryptionError, PDFPasswordIncorrect
from pdfminer.pdfparser import PDFSyntaxError
from pdfminer.psparser import PSException
from pdfplumber.utils.exceptions import MalformedPDFException, PdfminerException

from sstools.docparse.extract.tables import bounded_table
from sstools.docparse.model import ErrorCode, ExtractedTable, Extraction, Kind, Limits, ParseFailure


def extract_pdf(content: bytes, limits: Limits) -> Extraction:
    result = Extraction(Kind.PDF)
    texts: list[str] = []
    ruled: list[int] = []  # page numbers (from 1) where a table may be drawn
    try:
        document = pdfium.PdfDocument(content)
    except pdfium.PdfiumError as error:
        raise _pdfium_failure(error) from None
    try:
        result.parts = len(document)
        if result.parts > limits.max_pages:
            result.truncated = True
            result.warnings.append(f"read the first {limits.max_pages} of {result.parts} pages")
        read = 0
        for index in range(min(result.parts, limits.max_pages)):
            page = document[index]
            try:
                text = _page_text(page)
                if _draws_paths(page):
                    ruled.append(index + 1)
            finally:
                page.close()
            texts.append(text)
            read += len(text)
            if read > limits.max_text_chars:
                break
    except pdfium.PdfiumError as error:
        raise _pdfium_failure(error) from None
    finally:
        document.close()
    result.text = result.cut_text("\n\n".join(texts), limits)
    result.tables = _ruled_tables(content, ruled, limits)
    result.truncated = result.truncated or any(table.truncated for table in result.tables)
    return result


def _page_text(page: pdfium.PdfPage) -> str:
    textpage = page.get_textpage()
    try:
        # PDFium ends lines with CRLF and marks a hyphen it joined a word at with U+0002.
        text: str = textpage.get_text_bounded()
        return text.replace("\r\n", "\n").replace("\x02", "")
    finally:
        textpage.close()


def _draws_paths(page: pdfium.PdfPage) -> bool:
    return any(True for _ in page.get_objects(filter=(pdfium_c.FPDF_PAGEOBJ_PATH,)))


def _ruled_tables(content: bytes, pages: list[int], limits: Limits) -> list[ExtractedTable]:
    if not pages:
        return []
    tables = []
    try:
        with pdfplumber.open(io.BytesIO(content), pages=pages) as document:
            for page in document.pages:
                for index, rows in enumerate(page.extract_tables(), 1):
                    tables.append(bounded_table(f"page {page.page_number} table {index}", rows, limits))
                page.close()  # pdfplumber caches each page's objects until closed
    except Exception as error:  # noqa: BLE001 — pdfminer raises many types, often wrapped by pdfplumber
        raise _pdfminer_failure(error) from None
    return tables


def _encrypted() -> ParseFailure:
    return ParseFailure(ErrorCode.ENCRYPTED, "the PDF is encrypted; upload it without a password")


def _malformed(cause: object) -> ParseFailure:
    return ParseFailure(ErrorCode.MALFORMED, f"the PDF cannot be read: {cause!s:.200}")


def _pdfium_failure(error: pdfium.PdfiumError) -> ParseFailure:
    if error.err_code in (pdfium_c.FPDF_ERR_PASSWORD, pdfium_c.FPDF_ERR_SECURITY):
        return _encrypted()
    return _malformed(error)


_ENCRYPTION_ERRORS = (PDFPasswordIncorrect, PDFEncryptionError)
_MALFORMED_ERRORS = (
    PdfminerException,
    MalformedPDFException,
    PDFSyntaxError,
    PSException,
    ValueError,
    KeyError,
    TypeError,
    AttributeError,
    IndexError,
    EOFError,
)


def _pdfminer_failure(error: Exception) -> Exception:
    """The typed failure for what pdfminer raised (pdfplumber wraps it in PdfminerException)."""
    cause = error.args[0] if isinstance(error, PdfminerException) and error.args else error
    if isinstance(cause, _ENCRYPTION_ERRORS):
        return _encrypted()
    if isinstance(cause, _MALFORMED_ERRORS) or isinstance(error, _MALFORMED_ERRORS):
        return _malformed(cause)
    return error
