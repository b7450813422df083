"""Detection and extraction in-process, on files the tests generate (corpus.py)."""

import datetime
from dataclasses import replace

import pytest

from sstools.devstack.documents import screenshot_bytes
from sstools.docparse.detect import detect
from sstools.docparse.extract import extract
from sstools.docparse.model import ErrorCode, Kind, Limits, ParseFailure

from . import corpus

LIMITS = Limits()


def _failure(kind: Kind, content: bytes, limits: Limits = LIMITS) -> ErrorCode:
    with pytest.raises(ParseFailure) as failure:
        extract(kind, content, limits)
    return failure.value.code


@pytest.mark.parametrize(
    ("content", "filename", "kind"),
    [
        (corpus.pdf_report("en"), "report.pdf", Kind.PDF),
        (corpus.xlsx_workbook(), "sales.xlsx", Kind.XLSX),
        (corpus.csv_cp1251(), "export.csv", Kind.CSV),
        (corpus.json_document(), "data.json", Kind.JSON),
        (corpus.png_image(), "chart.png", Kind.PNG),
        (corpus.jpeg_image(), "photo.jpg", Kind.JPEG),
        (corpus.jpeg_image(), "", Kind.JPEG),
    ],
)
def test_kind_comes_from_the_bytes(content: bytes, filename: str, kind: Kind) -> None:
    assert detect(content, filename) == kind


@pytest.mark.parametrize(
    ("content", "filename", "code"),
    [
        (corpus.exe_named_pdf(), "report.pdf", ErrorCode.UNSUPPORTED_TYPE),
        (corpus.zip_archive(), "archive.zip", ErrorCode.UNSUPPORTED_TYPE),
        (corpus.zip_archive(), "book.xlsx", ErrorCode.UNSUPPORTED_TYPE),
        (corpus.png_image(), "report.pdf", ErrorCode.TYPE_MISMATCH),
        (b"hello", "notes.docx", ErrorCode.UNSUPPORTED_TYPE),
        (b"", "empty.csv", ErrorCode.MALFORMED),
    ],
)
def test_label_never_decides_and_a_wrong_one_is_refused(
    content: bytes, filename: str, code: ErrorCode
) -> None:
    with pytest.raises(ParseFailure) as failure:
        detect(content, filename)
    assert failure.value.code == code
    if code == ErrorCode.UNSUPPORTED_TYPE:
        assert "supported: pdf, xlsx, csv, json, png, jpeg" in failure.value.message


def test_declared_content_type_must_agree() -> None:
    assert detect(corpus.png_image(), content_type="image/png") == Kind.PNG
    with pytest.raises(ParseFailure) as failure:
        detect(corpus.png_image(), content_type="application/pdf")
    assert failure.value.code == ErrorCode.TYPE_MISMATCH


@pytest.mark.parametrize("lang", ["ru", "en"])
def test_pdf_text_and_table_come_out_intact(lang: str) -> None:
    result = extract(Kind.PDF, corpus.pdf_report(lang), LIMITS)
    assert result.parts == 2
    assert corpus.PDF_TITLE[lang] in result.text
    (table,) = result.tables
    assert [table.header, *table.rows] == corpus.PDF_TABLE[lang]
    assert table.name == "page 2 table 1"  # its page among those the table finder was given
    assert not result.truncated


def test_every_ruled_page_gives_its_table() -> None:
    result = extract(Kind.PDF, corpus.pdf_many_pages(4, ruled=True), LIMITS)
    assert [table.name for table in result.tables] == [f"page {n} table 1" for n in range(1, 5)]
    assert [result.tables[3].header, *result.tables[3].rows] == [
        [f"r{row} c{column}" for column in range(2)] for row in range(3)
    ]
    assert "Page 4 of 4" in result.text


def test_workbook_sheets_come_out_as_tables() -> None:
    result = extract(Kind.XLSX, corpus.xlsx_workbook(), LIMITS)
    assert result.parts == len(corpus.XLSX_SHEETS)
    read = {table.name: [table.header, *table.rows] if table.header else [] for table in result.tables}
    for name, rows in corpus.XLSX_SHEETS.items():
        expected = [[_as_text(value) for value in row] for row in rows]
        assert read[name] == expected, name


def _as_text(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, datetime.date) and not isinstance(value, datetime.datetime):
        return str(datetime.datetime.combine(value, datetime.time()))
    return str(value)


@pytest.mark.parametrize("content", [corpus.csv_cp1251(), corpus.csv_utf8_bom()], ids=["cp1251", "utf8-bom"])
def test_csv_in_russian_encodings_and_dialects(content: bytes) -> None:
    result = extract(Kind.CSV, content, LIMITS)
    (table,) = result.tables
    assert [table.header, *table.rows] == corpus.CSV_ROWS


def test_json_value_and_images() -> None:
    import json

    assert json.loads(extract(Kind.JSON, corpus.json_document(), LIMITS).text) == corpus.JSON_VALUE
    png = extract(Kind.PNG, corpus.png_image(), LIMITS)
    jpeg = extract(Kind.JPEG, corpus.jpeg_image(), LIMITS)
    assert (png.image_size, png.image_mode) == (corpus.PNG_SIZE, "RGB")
    assert jpeg.image_size == corpus.JPEG_SIZE


# What a person attaches: a chart's error panel, in Russian and English, as PNG and as JPEG.
ERROR_PANEL = ('Error: column "revenue" does not exist', "Ошибка загрузки данных чарта")


@pytest.mark.parametrize("kind", [Kind.PNG, Kind.JPEG])
def test_the_text_in_a_screenshot_is_read_in_both_languages(kind: Kind) -> None:
    read = extract(kind, screenshot_bytes(ERROR_PANEL, kind=kind.value.upper()), LIMITS)
    words = read.text.lower()
    for word in ("error", "column", "revenue", "exist", "ошибка", "загрузки", "данных", "чарта"):
        assert word in words, read.text
    assert read.text.startswith(f"{kind.value.upper()} image, 900×156 pixels, mode RGB. Text in the image:")
    assert read.warnings == []


def test_an_image_with_no_text_says_so_and_one_not_read_in_time_says_why() -> None:
    blank = extract(Kind.PNG, corpus.png_image(), LIMITS)
    assert blank.text == "PNG image, 64×32 pixels, mode RGB. No text was read in it."
    hurried = extract(Kind.PNG, screenshot_bytes(ERROR_PANEL), replace(LIMITS, ocr_seconds=0.001))
    assert hurried.text.endswith("No text was read in it.")
    assert hurried.warnings == ["the text in the image was not read within 0.001 s"]
    unread = extract(Kind.PNG, screenshot_bytes(ERROR_PANEL), replace(LIMITS, ocr_languages=""))
    assert (unread.text.endswith("No text was read in it."), unread.warnings) == (True, [])


def test_a_machine_without_tesseract_still_describes_the_image(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    read = extract(Kind.PNG, screenshot_bytes(ERROR_PANEL), LIMITS)
    assert read.image_size == (900, 156)
    assert read.warnings == ["the text in the image was not read: Tesseract is not installed"]


def test_limits_cut_and_say_so() -> None:
    result = extract(Kind.PDF, corpus.pdf_many_pages(300), Limits(max_pages=5))
    assert result.parts == 300
    assert result.truncated
    assert "read the first 5 of 300 pages" in result.warnings
    small = Limits(max_rows=2, max_text_chars=10)
    sheet = extract(Kind.XLSX, corpus.xlsx_workbook(), small).tables[0]
    assert len(sheet.rows) == 2
    assert sheet.truncated
    exact = Limits(max_rows=len(corpus.XLSX_SHEETS["Продажи"]) - 1)  # every row below the header
    whole = extract(Kind.XLSX, corpus.xlsx_workbook(), exact)
    assert len(whole.tables[0].rows) == exact.max_rows
    assert not whole.truncated
    assert len(extract(Kind.CSV, corpus.csv_cp1251(), small).text) == 10


def test_hostile_files_get_typed_errors_in_process() -> None:
    assert _failure(Kind.XLSX, corpus.xlsx_zip_bomb()) == ErrorCode.TOO_LARGE
    assert _failure(Kind.PDF, corpus.pdf_truncated()) == ErrorCode.MALFORMED
    assert _failure(Kind.PDF, corpus.pdf_encrypted()) == ErrorCode.ENCRYPTED
    assert _failure(Kind.JSON, corpus.deeply_nested_json()) == ErrorCode.MALFORMED
    assert _failure(Kind.PNG, corpus.png_image()[:40]) == ErrorCode.MALFORMED
