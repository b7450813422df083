"""Test corpus for docparse: input files generated at test time, as bytes.

Nothing is downloaded and no binary fixture is committed: every builder below makes its file from
constants in this module, deterministically (same bytes on every call: PDF creation dates, PDF /ID,
zip member timestamps and XLSX document properties are fixed; random content comes from seeded
generators). The module constants hold the exact values written, so tests can compare what the service
extracts with what was put in.

Good files: :func:`pdf_report`, :func:`xlsx_workbook`, :func:`csv_cp1251`, :func:`csv_utf8_bom`,
:func:`json_document`, :func:`png_image`, :func:`jpeg_image`, and for benchmarks :func:`pdf_of_size`
and :func:`xlsx_of_size`.

Hostile files: :func:`xlsx_zip_bomb`, :func:`pdf_truncated`, :func:`pdf_many_pages`,
:func:`exe_named_pdf`, :func:`zip_archive`, :func:`oversized`, :func:`deeply_nested_json`,
:func:`pdf_encrypted`.
"""

from __future__ import annotations

import csv
import datetime
import functools
import io
import json
import math
import random
import struct
import zipfile
from typing import Any, Final

import numpy as np
import openpyxl  # type: ignore[import-untyped, unused-ignore]
from fpdf import FPDF
from fpdf.enums import EncryptionMethod
from openpyxl.writer.excel import ExcelWriter  # type: ignore[import-untyped, unused-ignore]
from PIL import Image

__all__ = [
    "CSV_ROWS",
    "JPEG_SIZE",
    "JSON_VALUE",
    "PDF_ENCRYPTED_OWNER_PASSWORD",
    "PDF_ENCRYPTED_TEXT",
    "PDF_ENCRYPTED_USER_PASSWORD",
    "PDF_PARAGRAPH",
    "PDF_TABLE",
    "PDF_TITLE",
    "PNG_SIZE",
    "XLSX_SHEETS",
    "ZIP_BOMB_UNCOMPRESSED_BYTES",
    "csv_cp1251",
    "csv_utf8_bom",
    "deeply_nested_json",
    "exe_named_pdf",
    "jpeg_image",
    "json_document",
    "oversized",
    "pdf_encrypted",
    "pdf_many_pages",
    "pdf_of_size",
    "pdf_report",
    "pdf_truncated",
    "png_image",
    "png_strip",
    "xlsx_of_size",
    "xlsx_workbook",
    "xlsx_zip_bomb",
    "zip_archive",
]

FONT_PATH: Final = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"
FONT_BOLD_PATH: Final = "/usr/share/fonts/truetype/dejavu/DejaVuSans-Bold.ttf"

# Every timestamp written into a generated file.
_FIXED_DATETIME: Final = datetime.datetime(2024, 5, 17, 12, 0, 0, tzinfo=datetime.UTC)
_ZIP_DATE_TIME: Final = (2024, 5, 17, 12, 0, 0)
_DOS_TIME: Final = 12 << 11  # 12:00:00 (hour << 11 | minute << 5 | second // 2)
_DOS_DATE: Final = ((2024 - 1980) << 9) | (5 << 5) | 17

# ---------------------------------------------------------------------------------------------------------
# Constants: the exact content of the good files
# ---------------------------------------------------------------------------------------------------------

PDF_TITLE: Final[dict[str, str]] = {"ru": "Отчёт о рисках", "en": "Risk report"}
PDF_PARAGRAPH: Final[dict[str, str]] = {
    "ru": "Риски проекта пересматриваются каждый квартал. В отчёте перечислены основные угрозы "
    "и меры по их снижению.",
    "en": "Risks of the project are reviewed every quarter. The report lists the main threats "
    "and the measures that reduce them.",
}
PDF_TABLE: Final[dict[str, list[list[str]]]] = {
    "ru": [
        ["Риск", "Вероятность", "Влияние"],
        ["Сбой ETL", "Высокая", "Критично"],
        ["Утечка данных", "Низкая", "Высокое"],
        ["Задержка поставки", "Средняя", "Умеренное"],
    ],
    "en": [
        ["Risk", "Likelihood", "Impact"],
        ["ETL failure", "High", "Critical"],
        ["Data leak", "Low", "High"],
        ["Supplier delay", "Medium", "Moderate"],
    ],
}

# Values read back by openpyxl exactly as written: dates are datetime.datetime (what openpyxl returns for
# a date-formatted cell), floats are not integral (12000.0 would read back as 12000), booleans stay bool.
XLSX_SHEETS: Final[dict[str, list[list[object]]]] = {
    "Продажи": [
        ["Регион", "Выручка", "Дата"],
        ["Москва", 1250000, datetime.datetime(2024, 1, 15)],
        ["Санкт-Петербург", 830500.5, datetime.datetime(2024, 2, 1)],
        ["Казань", 412000, datetime.datetime(2024, 2, 20)],
        ["Новосибирск", 298750.25, datetime.datetime(2024, 3, 5)],
        ["Екатеринбург", 356000, datetime.datetime(2024, 3, 31)],
    ],
    "Costs": [
        ["Item", "Amount", "Paid"],
        ["Servers", 12000.75, True],
        ["Licenses", 4300, False],
        ["Облако", 990.5, True],
    ],
    "Пусто": [],
}

# Amounts use a decimal comma, so in the comma-separated variant those fields are quoted.
CSV_ROWS: Final[list[list[str]]] = [
    ["Имя", "Город", "Сумма", "Дата"],
    ["Иван Петров", "Москва", "1500,50", "2024-01-15"],
    ["Ольга Смирнова", "Санкт-Петербург", "2300,00", "2024-02-01"],
    ["Пётр Иванов", "Казань", "980,75", "2024-02-20"],
    ["Анна Кузнецова", "Екатеринбург", "4100,10", "2024-03-05"],
]

JSON_VALUE: Final[dict[str, object]] = {
    "документ": "Отчёт о рисках",
    "версия": 2,
    "активен": True,
    "примечание": None,
    "теги": ["риски", "ETL", "квартал"],
    "разделы": [
        {"заголовок": "Введение", "страницы": [1, 2], "оценка": 4.5},
        {"заголовок": "Риски", "страницы": [3], "пункты": [{"код": "R-1", "текст": "Сбой ETL"}]},
    ],
    "автор": {"имя": "Ольга", "контакты": {"email": "olga@example.com", "телефоны": []}},
}

PNG_SIZE: Final = (64, 32)
JPEG_SIZE: Final = (40, 30)

PDF_ENCRYPTED_USER_PASSWORD: Final = "user-secret"
PDF_ENCRYPTED_OWNER_PASSWORD: Final = "owner-secret"
PDF_ENCRYPTED_TEXT: Final = "Confidential: Risks are hidden behind a password."

# ---------------------------------------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------------------------------------


def _new_pdf(*, dejavu: bool = True) -> FPDF:
    pdf = FPDF(unit="mm", format="A4")
    pdf.set_creation_date(_FIXED_DATETIME)
    pdf.set_producer("sstools docparse test corpus")
    if dejavu:
        pdf.add_font("DejaVu", "", FONT_PATH)
        pdf.add_font("DejaVu", "B", FONT_BOLD_PATH)
        pdf.set_font("DejaVu", size=12)
    else:
        pdf.set_font("Helvetica", size=12)
    return pdf


def _pdf_bytes(pdf: FPDF) -> bytes:
    return bytes(pdf.output())


def _zip_info(name: str) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name, date_time=_ZIP_DATE_TIME)
    info.compress_type = zipfile.ZIP_DEFLATED
    info.external_attr = 0o644 << 16
    return info


def _fix_zip_timestamps(data: bytes) -> bytes:
    """Overwrite the DOS date/time of every member (local headers and central directory) in place.

    openpyxl writes members with the current time (and write-only sheets with a temp file's mtime); this
    makes its output byte-identical across calls without recompressing anything.
    """
    buf = bytearray(data)
    stamp = struct.pack("<HH", _DOS_TIME, _DOS_DATE)
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        infos = archive.infolist()
        central = archive.start_dir
    for info in infos:
        offset = info.header_offset
        if buf[offset : offset + 4] != b"PK\x03\x04":
            raise ValueError(f"no local header for {info.filename!r}")
        buf[offset + 10 : offset + 14] = stamp
    for _ in infos:
        if buf[central : central + 4] != b"PK\x01\x02":
            raise ValueError("bad central directory entry")
        buf[central + 12 : central + 16] = stamp
        name_len, extra_len, comment_len = struct.unpack_from("<HHH", buf, central + 28)
        central += 46 + name_len + extra_len + comment_len
    return bytes(buf)


def _save_workbook(workbook: Any) -> bytes:
    """Save an openpyxl workbook to bytes with fixed document properties and member timestamps."""
    props = workbook.properties
    props.creator = "sstools docparse test corpus"
    props.created = _FIXED_DATETIME.replace(tzinfo=None)
    props.modified = _FIXED_DATETIME.replace(tzinfo=None)  # openpyxl's save() would stamp "now" here
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED, allowZip64=True) as archive:
        ExcelWriter(workbook, archive).save()
    return _fix_zip_timestamps(out.getvalue())


_WORDS_EN_TEXT: Final = (
    "risk report quarter data pipeline failure supplier delay audit control budget forecast revenue "
    "region customer contract service network storage backup incident review owner threshold metric "
    "latency outage capacity release migration vendor invoice payment schedule milestone scope"
)
_WORDS_EN: Final = tuple(_WORDS_EN_TEXT.split())
_WORDS_RU_TEXT: Final = (
    "риск отчёт квартал данные конвейер сбой поставщик задержка аудит контроль бюджет прогноз выручка "
    "регион клиент договор сервис сеть хранилище резерв инцидент проверка владелец порог метрика "
    "задержка отказ ёмкость выпуск миграция счёт платёж график этап объём"
)
_WORDS_RU: Final = tuple(_WORDS_RU_TEXT.split())


def _sentence(rng: random.Random, words: int) -> str:
    vocab = _WORDS_RU if rng.random() < 0.5 else _WORDS_EN
    text = " ".join(rng.choice(vocab) for _ in range(words))
    return text[0].upper() + text[1:] + "."


# ---------------------------------------------------------------------------------------------------------
# Good files
# ---------------------------------------------------------------------------------------------------------


def pdf_report(lang: str) -> bytes:
    """A 2-page PDF: page 1 has PDF_TITLE[lang] and PDF_PARAGRAPH[lang], page 2 a ruled PDF_TABLE[lang].

    Text is set in DejaVu Sans (embedded subset with a ToUnicode map), so Cyrillic extracts as text.
    The table is drawn with every cell border, so pdfplumber's ``extract_tables()`` finds it.
    """
    if lang not in PDF_TITLE:
        raise ValueError(f"lang must be one of {sorted(PDF_TITLE)}, not {lang!r}")
    pdf = _new_pdf()
    pdf.set_title(PDF_TITLE[lang])
    pdf.set_lang(lang)

    pdf.add_page()
    pdf.set_font("DejaVu", "B", 18)
    pdf.cell(text=PDF_TITLE[lang], new_x="LMARGIN", new_y="NEXT")
    pdf.ln(6)
    pdf.set_font("DejaVu", "", 12)
    pdf.multi_cell(w=0, h=7, text=PDF_PARAGRAPH[lang], new_x="LMARGIN", new_y="NEXT")

    pdf.add_page()
    with pdf.table(col_widths=(60, 50, 50), width=160, text_align="LEFT", line_height=8) as table:
        for values in PDF_TABLE[lang]:
            row = table.row()
            for value in values:
                row.cell(value)
    return _pdf_bytes(pdf)


def xlsx_workbook() -> bytes:
    """An XLSX with the sheets of XLSX_SHEETS, in that order ("Пусто" has no cells at all)."""
    workbook = openpyxl.Workbook()
    workbook.remove(workbook.active)
    for title, rows in XLSX_SHEETS.items():
        sheet = workbook.create_sheet(title)
        for row in rows:
            sheet.append(row)
    return _save_workbook(workbook)


def _csv_text(delimiter: str) -> str:
    out = io.StringIO()
    writer = csv.writer(out, delimiter=delimiter, lineterminator="\r\n")
    writer.writerows(CSV_ROWS)
    return out.getvalue()


def csv_cp1251() -> bytes:
    """CSV_ROWS, semicolon-separated, CRLF line ends, encoded cp1251 without BOM."""
    return _csv_text(";").encode("cp1251")


def csv_utf8_bom() -> bytes:
    """CSV_ROWS, comma-separated (fields with a decimal comma are quoted), CRLF, UTF-8 with BOM."""
    return _csv_text(",").encode("utf-8-sig")


def json_document() -> bytes:
    """JSON_VALUE as indented UTF-8 JSON (Cyrillic not escaped)."""
    return json.dumps(JSON_VALUE, ensure_ascii=False, indent=2).encode("utf-8")


def _gradient(size: tuple[int, int]) -> Image.Image:
    width, height = size
    xs = np.linspace(0, 255, width, dtype=np.float64)[None, :].repeat(height, axis=0)
    ys = np.linspace(0, 255, height, dtype=np.float64)[:, None].repeat(width, axis=1)
    pixels = np.stack([xs, ys, 255 - (xs + ys) / 2], axis=2).astype(np.uint8)
    return Image.fromarray(pixels, mode="RGB")


def png_image() -> bytes:
    """A PNG_SIZE RGB gradient."""
    out = io.BytesIO()
    _gradient(PNG_SIZE).save(out, format="PNG")
    return out.getvalue()


def png_strip() -> bytes:
    """A white 1×40 000 PNG (40 KB of pixels): a shape a careless enlargement for reading its
    text would make billions of pixels of."""
    out = io.BytesIO()
    Image.new("L", (1, 40_000), 255).save(out, format="PNG")
    return out.getvalue()


def jpeg_image() -> bytes:
    """A JPEG_SIZE RGB gradient."""
    out = io.BytesIO()
    _gradient(JPEG_SIZE).save(out, format="JPEG", quality=90)
    return out.getvalue()


# Noise image added to each page of pdf_of_size: random bytes do not compress, so they carry the size.
_NOISE_WIDTH: Final = 256
_NOISE_PAGE_BYTES: Final = 96 * 1024
_TEXT_LINES_PER_PAGE: Final = 24


def _pdf_pages(pages: int, noise_rows: int) -> bytes:
    rng = random.Random(20240517)
    noise = np.random.default_rng(20240517)
    pdf = _new_pdf()
    pdf.set_auto_page_break(auto=False)
    for number in range(1, pages + 1):
        pdf.add_page()
        pdf.set_font("DejaVu", "B", 14)
        pdf.cell(text=f"Страница {number} / Page {number}", new_x="LMARGIN", new_y="NEXT")
        pdf.set_font("DejaVu", "", 9)
        for _ in range(_TEXT_LINES_PER_PAGE):
            pdf.cell(text=_sentence(rng, rng.randint(8, 13)), new_x="LMARGIN", new_y="NEXT")
        if noise_rows > 0:
            pixels = noise.integers(0, 256, size=(noise_rows, _NOISE_WIDTH, 3), dtype=np.uint8)
            pdf.image(Image.fromarray(pixels, mode="RGB"), x=10, y=pdf.get_y() + 4, w=120)
    return _pdf_bytes(pdf)


def pdf_of_size(target_bytes: int) -> bytes:
    """A valid PDF of about ``target_bytes`` (within 1% from 30 KB up; never below ~22 KB, one text page).

    Every page holds a heading and 24 lines of varied Russian/English text plus one random-noise RGB
    image (~96 KB): the text gives pdfplumber real work, the incompressible image carries the size. The
    text-only document is built first to measure its size; the image height is then chosen so the total
    lands on the target.

    Measured (2-vCPU Xeon container, Python 3.11, fpdf2 2.8.9): 1 MiB (11 pages) in 0.22 s, 10 MiB
    (107 pages) in 0.86 s; both within 1% of the target.
    """
    if target_bytes <= 0:
        raise ValueError("target_bytes must be positive")
    pages = max(1, round(target_bytes / _NOISE_PAGE_BYTES))
    text_only = len(_pdf_pages(pages, 0))
    per_page = max(0, target_bytes - text_only) / pages
    rows = round(per_page / (_NOISE_WIDTH * 3))
    return _pdf_pages(pages, rows)


_XLSX_HEADER: Final = ["ID", "Клиент", "Сумма", "Дата", "Оплачено", "Код", "Комментарий"]
_FIRST_NAMES: Final = ("Иван", "Ольга", "Пётр", "Анна", "John", "Mary", "Сергей", "Елена", "Alex", "Nina")
_LAST_NAMES: Final = ("Петров", "Смирнова", "Иванов", "Кузнецова", "Smith", "Brown", "Орлов", "Белова")


def _xlsx_rows(count: int) -> bytes:
    rng = random.Random(20240517)
    workbook = openpyxl.Workbook(write_only=True)
    sheet = workbook.create_sheet("Данные")
    sheet.append(_XLSX_HEADER)
    base = datetime.datetime(2020, 1, 1)
    for index in range(1, count + 1):
        sheet.append(
            [
                index,
                f"{rng.choice(_FIRST_NAMES)} {rng.choice(_LAST_NAMES)}",
                round(rng.uniform(-1e6, 1e6), 2),
                base + datetime.timedelta(days=rng.randrange(3650)),
                rng.random() < 0.5,
                f"{rng.getrandbits(256):064x}",
                _sentence(rng, rng.randint(15, 35)),
            ]
        )
    return _save_workbook(workbook)


@functools.cache
def _xlsx_bytes_per_row() -> tuple[float, float]:
    small, large = 1000, 3000
    size_small, size_large = len(_xlsx_rows(small)), len(_xlsx_rows(large))
    slope = (size_large - size_small) / (large - small)
    return slope, size_small - slope * small


def xlsx_of_size(target_bytes: int) -> bytes:
    """A valid XLSX of about ``target_bytes`` (within 1% from 15 KB up; never below ~6 KB).

    One sheet "Данные": a header and rows of mixed cells (int id, Cyrillic/Latin name, float amount, date,
    bool, random hex code, random sentence). Bytes per row are measured once on two small workbooks.

    openpyxl (pure-Python XML writer here) costs ~7 us per cell, so each row carries ~135 compressed bytes
    (the random code and sentence) to keep the cell count down. Measured (2-vCPU Xeon container, Python
    3.11, openpyxl 3.1.5): 1 MiB (7.7k rows) in 0.8 s, 10 MiB (77k rows) in 8.0 s; both within 1%.
    """
    if target_bytes <= 0:
        raise ValueError("target_bytes must be positive")
    slope, intercept = _xlsx_bytes_per_row()
    return _xlsx_rows(max(1, round((target_bytes - intercept) / slope)))


# ---------------------------------------------------------------------------------------------------------
# Hostile files
# ---------------------------------------------------------------------------------------------------------

_BOMB_CONTENT_TYPES: Final = (
    b'<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n'
    b'<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
    b'<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>'
    b'<Default Extension="xml" ContentType="application/xml"/>'
    b'<Override PartName="/xl/workbook.xml" '
    b'ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.sheet.main+xml"/>'
    b'<Override PartName="/xl/worksheets/sheet1.xml" '
    b'ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.worksheet+xml"/>'
    b"</Types>"
)
_BOMB_ROOT_RELS: Final = (
    b'<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n'
    b'<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
    b'<Relationship Id="rId1" '
    b'Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" '
    b'Target="xl/workbook.xml"/>'
    b"</Relationships>"
)
_BOMB_WORKBOOK: Final = (
    b'<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n'
    b'<workbook xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main" '
    b'xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships">'
    b'<sheets><sheet name="Sheet1" sheetId="1" r:id="rId1"/></sheets>'
    b"</workbook>"
)
_BOMB_WORKBOOK_RELS: Final = (
    b'<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n'
    b'<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
    b'<Relationship Id="rId1" '
    b'Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/worksheet" '
    b'Target="worksheets/sheet1.xml"/>'
    b"</Relationships>"
)
_BOMB_SHEET_HEAD: Final = (
    b'<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n'
    b'<worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"><sheetData>'
)
# One row is a cell holding 1 and then empty cells up to Excel's 16384 columns. Deflate encodes runs of the
# 4-byte ``<c/>`` with distance-4 matches (no extra bits), close to its 1032:1 limit; 27-byte rows like
# ``<row><c><v>1</v></c></row>`` only reach ~410:1 (2.6 MB per GiB).
_BOMB_SHEET_ROW: Final = b"<row><c><v>1</v></c>" + b"<c/>" * 16383 + b"</row>"
_BOMB_SHEET_TAIL: Final = b"</sheetData></worksheet>"
_BOMB_ROWS: Final = math.ceil(2**30 / len(_BOMB_SHEET_ROW))
_BOMB_ROWS_PER_CHUNK: Final = 16

#: Exact uncompressed size of xl/worksheets/sheet1.xml in xlsx_zip_bomb() (just over 1 GiB).
ZIP_BOMB_UNCOMPRESSED_BYTES: Final = (
    len(_BOMB_SHEET_HEAD) + _BOMB_ROWS * len(_BOMB_SHEET_ROW) + len(_BOMB_SHEET_TAIL)
)


@functools.cache
def xlsx_zip_bomb() -> bytes:
    """A small (~1 MB) valid XLSX zip whose xl/worksheets/sheet1.xml inflates to ZIP_BOMB_UNCOMPRESSED_BYTES.

    The package is complete ([Content_Types].xml, _rels/.rels, xl/workbook.xml, its rels, the sheet);
    the sheet is ~16 thousand identical 16384-cell rows (A holds 1, the rest are ``<c/>``), streamed into
    the zip 1 MB at a time (zip64 forced), never held in memory or written to disk whole. Cached: it takes
    a few seconds to deflate 1 GiB.
    """
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(_zip_info("[Content_Types].xml"), _BOMB_CONTENT_TYPES)
        archive.writestr(_zip_info("_rels/.rels"), _BOMB_ROOT_RELS)
        archive.writestr(_zip_info("xl/workbook.xml"), _BOMB_WORKBOOK)
        archive.writestr(_zip_info("xl/_rels/workbook.xml.rels"), _BOMB_WORKBOOK_RELS)
        chunk = _BOMB_SHEET_ROW * _BOMB_ROWS_PER_CHUNK
        with archive.open(_zip_info("xl/worksheets/sheet1.xml"), "w", force_zip64=True) as sheet:
            sheet.write(_BOMB_SHEET_HEAD)
            full_chunks, rest = divmod(_BOMB_ROWS, _BOMB_ROWS_PER_CHUNK)
            for _ in range(full_chunks):
                sheet.write(chunk)
            sheet.write(_BOMB_SHEET_ROW * rest)
            sheet.write(_BOMB_SHEET_TAIL)
    return out.getvalue()


def pdf_truncated() -> bytes:
    """pdf_report("en") cut to 40% of its length (no xref table, no trailer, no %%EOF)."""
    data = pdf_report("en")
    return data[: len(data) * 2 // 5]


def pdf_many_pages(pages: int = 3000, *, ruled: bool = False) -> bytes:
    """A valid PDF with ``pages`` small pages (A7, one line of Helvetica each).

    ``ruled``: each page also draws a ruled table of three rows of two cells under its line, so
    that the slow table finder runs on every page (a file that takes long to read). Measured:
    3000 pages (1.2 MB) in 0.5 s; ruled (1.5 MB) in 1.3 s, read in 12 s.
    """
    if pages < 1:
        raise ValueError("pages must be at least 1")
    pdf = FPDF(unit="mm", format=(74, 105))  # A7
    pdf.set_creation_date(_FIXED_DATETIME)
    pdf.set_producer("sstools docparse test corpus")
    pdf.set_font("Helvetica", size=10)
    for number in range(1, pages + 1):
        pdf.add_page()
        pdf.cell(text=f"Page {number} of {pages}")
        if ruled:
            pdf.ln()
            for row in range(3):
                for column in range(2):
                    pdf.cell(w=25, h=8, text=f"r{row} c{column}", border=1)
                pdf.ln()
    return _pdf_bytes(pdf)


_DOS_STUB_CODE: Final = bytes.fromhex("0e1fba0e00b409cd21b8014ccd21")
_DOS_STUB_TEXT: Final = b"This program cannot be run in DOS mode.\r\r\n$"


def exe_named_pdf() -> bytes:
    """A 4 KiB PE32+ (x86-64) executable image: MZ header, DOS stub, "PE\\0\\0" at e_lfanew, COFF and
    optional headers and one .text section (a lone ``ret``). Tests send it as "report.pdf".
    """
    e_lfanew = 0x80
    dos_header = struct.pack(
        "<2s13H8s2H20sI",
        b"MZ",
        0x90,  # e_cblp: bytes on last page
        3,  # e_cp: pages in file
        0,  # e_crlc: relocations
        4,  # e_cparhdr: header size in paragraphs
        0,  # e_minalloc
        0xFFFF,  # e_maxalloc
        0,  # e_ss
        0xB8,  # e_sp
        0,  # e_csum
        0,  # e_ip
        0,  # e_cs
        0x40,  # e_lfarlc
        0,  # e_ovno
        b"\0" * 8,  # e_res
        0,  # e_oemid
        0,  # e_oeminfo
        b"\0" * 20,  # e_res2
        e_lfanew,
    )
    stub = (dos_header + _DOS_STUB_CODE + _DOS_STUB_TEXT).ljust(e_lfanew, b"\0")
    optional_size = 0xF0
    coff = struct.pack(
        "<4sHHIIIHH",
        b"PE\0\0",
        0x8664,  # Machine: AMD64
        1,  # NumberOfSections
        0,  # TimeDateStamp (fixed)
        0,  # PointerToSymbolTable
        0,  # NumberOfSymbols
        optional_size,
        0x0022,  # Characteristics: EXECUTABLE_IMAGE | LARGE_ADDRESS_AWARE
    )
    optional = struct.pack(
        "<HBBIIIIIQIIHHHHHHIIIIHHQQQQII",
        0x20B,  # Magic: PE32+
        14,  # MajorLinkerVersion
        0,  # MinorLinkerVersion
        0x200,  # SizeOfCode
        0,  # SizeOfInitializedData
        0,  # SizeOfUninitializedData
        0x1000,  # AddressOfEntryPoint
        0x1000,  # BaseOfCode
        0x140000000,  # ImageBase
        0x1000,  # SectionAlignment
        0x200,  # FileAlignment
        6,  # MajorOperatingSystemVersion
        0,
        0,  # MajorImageVersion
        0,
        6,  # MajorSubsystemVersion
        0,
        0,  # Win32VersionValue
        0x2000,  # SizeOfImage
        0x200,  # SizeOfHeaders
        0,  # CheckSum
        3,  # Subsystem: WINDOWS_CUI
        0x8160,  # DllCharacteristics
        0x100000,  # SizeOfStackReserve
        0x1000,  # SizeOfStackCommit
        0x100000,  # SizeOfHeapReserve
        0x1000,  # SizeOfHeapCommit
        0,  # LoaderFlags
        16,  # NumberOfRvaAndSizes
    ).ljust(optional_size, b"\0")  # 16 empty data directories
    section = struct.pack(
        "<8sIIIIIIHHI",
        b".text",
        0x1000,  # VirtualSize
        0x1000,  # VirtualAddress
        0x200,  # SizeOfRawData
        0x200,  # PointerToRawData
        0,
        0,
        0,
        0,
        0x60000020,  # CODE | EXECUTE | READ
    )
    headers = (stub + coff + optional + section).ljust(0x200, b"\0")
    text = b"\xc3".ljust(0x200, b"\xcc")  # ret, then int3 padding
    return (headers + text).ljust(4096, b"\0")


def zip_archive() -> bytes:
    """An ordinary zip (not an Office file) with two UTF-8 text files."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(_zip_info("readme.txt"), b"Plain archive with notes.\n")
        archive.writestr(_zip_info("notes/риски.txt"), "Риски: сбой ETL, утечка данных.\n".encode())
    return out.getvalue()


def oversized(size: int = 11 * 1024 * 1024) -> bytes:
    """``size`` bytes that start with a PDF header ("%PDF-1.7\\n"), then comment filler: not a valid PDF."""
    header = b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n"
    line = b"% filler line of an oversized upload\n"
    body = line * ((max(0, size - len(header)) // len(line)) + 1)
    return (header + body)[:size]


def deeply_nested_json(depth: int = 100_000) -> bytes:
    """``[[[...]]]`` nested ``depth`` levels deep: valid JSON, but it overflows recursive parsers."""
    return b"[" * depth + b"]" * depth


def pdf_encrypted() -> bytes:
    """A one-page PDF encrypted (RC4-128, standard security handler) with PDF_ENCRYPTED_USER_PASSWORD.

    Its text (PDF_ENCRYPTED_TEXT) can only be read by opening it with the user (or owner) password.
    RC4 keeps the bytes deterministic (AES would draw random IVs from os.urandom).
    """
    pdf = _new_pdf()
    pdf.set_encryption(
        owner_password=PDF_ENCRYPTED_OWNER_PASSWORD,
        user_password=PDF_ENCRYPTED_USER_PASSWORD,
        encryption_method=EncryptionMethod.RC4,
    )
    pdf.add_page()
    pdf.multi_cell(w=0, h=7, text=PDF_ENCRYPTED_TEXT)
    return _pdf_bytes(pdf)
