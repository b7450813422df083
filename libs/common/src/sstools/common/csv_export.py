"""Records as CSV for an admin's spreadsheet.

A proper writer quotes commas, quotes and line breaks. And no cell may be one a spreadsheet runs:
a value starting with ``=``, ``+``, ``-`` or ``@`` (or a tab or carriage return, which some skip
before reading one of those) is a formula there, and audit cells hold what people typed —
so such a cell is written with a single quote before it, which spreadsheets show as text.
"""

import csv
import io
import json
from collections.abc import AsyncIterable, AsyncIterator, Iterable, Sequence

from fastapi.responses import StreamingResponse
from pydantic import BaseModel

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
_ROWS_A_WRITE = 500


def cell(value: object) -> str:
    text = "" if value is None else str(value)
    return "'" + text if text.startswith(FORMULA_STARTS) else text


def csv_text(rows: Iterable[Sequence[object]]) -> str:
    """``rows`` as CSV lines (RFC 4180: CRLF, quoted where needed), every cell made safe."""
    out = io.StringIO()
    csv.writer(out, lineterminator="\r\n").writerows([cell(value) for value in row] for row in rows)
    return out.getvalue()


def csv_response(
    filename: str, columns: Sequence[str], records: AsyncIterable[BaseModel]
) -> StreamingResponse:
    """A CSV download of ``records``: a header line of ``columns`` (field names), then each record's
    fields as JSON would show them (objects and lists as compact JSON), written as the records
    come, so an export of any length is never held whole."""

    async def lines() -> AsyncIterator[str]:
        yield csv_text([columns])
        batch: list[Sequence[object]] = []
        async for record in records:
            fields = record.model_dump(mode="json")
            batch.append([_flat(fields[column]) for column in columns])
            if len(batch) == _ROWS_A_WRITE:
                yield csv_text(batch)
                batch.clear()
        if batch:
            yield csv_text(batch)

    return StreamingResponse(
        lines(),
        media_type="text/csv; charset=utf-8",
        headers={"Content-Disposition": f'attachment; filename="{filename}"', "Cache-Control": "no-store"},
    )


def _flat(value: object) -> object:
    return json.dumps(value, ensure_ascii=False, sort_keys=True) if isinstance(value, dict | list) else value
