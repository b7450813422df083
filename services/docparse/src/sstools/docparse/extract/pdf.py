import io

import pdfplumber
from pdfminer.pdfdocument import PDFEncryptionError, PDFPasswordIncorrect
from pdfminer.pdfparser import PDFSyntaxError
from pdfminer.psparser import PSException
from pdfplumber.utils.exceptions import MalformedPDFException, PdfminerException

from sstools.docparse.extract.tables import bounded_table
from sstools.docparse.model import ErrorCode, Extraction, Kind, Limits, ParseFailure


def extract_pdf(content: bytes, limits: Limits) -> Extraction:
    result = Extraction(Kind.PDF)
    try:
        with pdfplumber.open(io.BytesIO(content)) as document:
            pages = document.pages
            result.parts = len(pages)
            if result.parts > limits.max_pages:
                result.truncated = True
                result.warnings.append(f"read the first {limits.max_pages} of {result.parts} pages")
            texts = []
            for number, page in enumerate(pages[: limits.max_pages], 1):
                texts.append(page.extract_text() or "")
                for index, rows in enumerate(page.extract_tables(), 1):
                    result.tables.append(bounded_table(f"page {number} table {index}", rows, limits))
                page.close()  # pdfplumber caches each page's objects until closed
                if sum(len(text) for text in texts) > limits.max_text_chars:
                    break
    except Exception as error:  # noqa: BLE001 — pdfminer raises many types, often wrapped by pdfplumber
        raise _failure(error) from None
    result.text = result.cut_text("\n\n".join(texts), limits)
    result.truncated = result.truncated or any(table.truncated for table in result.tables)
    return result


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


def _failure(error: Exception) -> Exception:
    """The typed failure for what pdfminer raised (pdfplumber wraps it in PdfminerException)."""
    cause = error.args[0] if isinstance(error, PdfminerException) and error.args else error
    if isinstance(cause, _ENCRYPTION_ERRORS):
        return ParseFailure(ErrorCode.ENCRYPTED, "the PDF is encrypted; upload it without a password")
    if isinstance(cause, _MALFORMED_ERRORS) or isinstance(error, _MALFORMED_ERRORS):
        return ParseFailure(ErrorCode.MALFORMED, f"the PDF cannot be read: {cause!s:.200}")
    return error
