"""Files a person might attach, written for the tests: a PDF with Cyrillic text (DejaVu Sans,
so the text extracts as text), a workbook, a CSV."""

import csv
import io
from pathlib import Path

import openpyxl  # type: ignore[import-untyped, unused-ignore]
from fpdf import FPDF

FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"


def pdf(folder: Path, name: str, paragraphs: list[str]) -> Path:
    document = FPDF(unit="mm", format="A4")
    document.add_font("DejaVu", "", FONT)
    document.set_font("DejaVu", size=12)
    document.add_page()
    for paragraph in paragraphs:
        document.multi_cell(w=0, h=7, text=paragraph, new_x="LMARGIN", new_y="NEXT")
    path = folder / name
    path.write_bytes(bytes(document.output()))
    return path


def xlsx(folder: Path, name: str, rows: list[list[str]]) -> Path:
    workbook = openpyxl.Workbook()
    sheet = workbook.active
    for row in rows:
        sheet.append(row)
    path = folder / name
    workbook.save(path)
    return path


def csv_file(folder: Path, name: str, rows: list[list[str]]) -> Path:
    buffer = io.StringIO()
    csv.writer(buffer).writerows(rows)
    path = folder / name
    path.write_text(buffer.getvalue(), encoding="utf-8")
    return path
