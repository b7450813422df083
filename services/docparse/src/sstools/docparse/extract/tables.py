"""Bounding a table: rows, columns and cell length, with the cut recorded."""

from collections.abc import Iterable, Sequence

from sstools.docparse.model import ExtractedTable, Limits


def cell_text(value: object, limits: Limits) -> str:
    text = "" if value is None else str(value)
    return text[: limits.max_cell_chars]


def bounded_table(name: str, rows: Iterable[Sequence[object]], limits: Limits) -> ExtractedTable:
    """The first row is the header; at most ``max_rows`` rows of at most ``max_columns`` cells."""
    table = ExtractedTable(name, [], [])
    for number, row in enumerate(rows):
        if number > limits.max_rows:
            table.truncated = True
            break
        cells = [cell_text(value, limits) for value in row[: limits.max_columns]]
        if len(row) > limits.max_columns or any(len(str(v or "")) > limits.max_cell_chars for v in row):
            table.truncated = True
        if number == 0:
            table.header = cells
        else:
            table.rows.append(cells)
    return table
