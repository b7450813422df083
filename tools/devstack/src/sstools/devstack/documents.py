"""Files a person might attach, written for the tests: a PDF with Cyrillic text (DejaVu Sans,
so the text extracts as text), a workbook, a CSV, a screenshot of an error panel."""

import csv
import io
from collections.abc import Sequence
from pathlib import Path

import openpyxl  # type: ignore[import-untyped, unused-ignore]
from fpdf import FPDF
from PIL import Image, ImageDraw, ImageFont

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


def screenshot_bytes(lines: Sequence[str], *, kind: str = "PNG", width: int = 900) -> bytes:
    """A screenshot-like image: dark ``lines`` of DejaVu Sans on white, as an error panel shows
    them, in ``kind`` (PNG or JPEG)."""
    font = ImageFont.truetype(FONT, 26)
    image = Image.new("RGB", (width, 60 + 48 * len(lines)), "white")
    draw = ImageDraw.Draw(image)
    for number, line in enumerate(lines):
        draw.text((30, 30 + 48 * number), line, fill=(30, 30, 30), font=font)
    out = io.BytesIO()
    image.save(out, format=kind, **({"quality": 92} if kind == "JPEG" else {}))
    return out.getvalue()


def screenshot(folder: Path, name: str, lines: Sequence[str]) -> Path:
    path = folder / name
    path.write_bytes(
        screenshot_bytes(lines, kind="JPEG" if name.lower().endswith((".jpg", ".jpeg")) else "PNG")
    )
    return path
