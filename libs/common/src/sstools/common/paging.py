"""Listings in pages, for the services' stores: an opaque cursor naming where the last page
ended (a keyset, never an offset, so rows added meanwhile neither repeat nor skip a row), pages
of rows newest first, and substring patterns that match what was typed and nothing more.
"""

import base64
import binascii
import json
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Self

from pydantic import AwareDatetime, BaseModel, Field, model_validator
from sqlalchemy import Column, Select, and_, or_
from sqlalchemy.engine import RowMapping

# The most rows one page of an API's listing holds.
PAGE_MAX = 200


class BadCursor(ValueError):
    """A page token this service did not issue."""


@dataclass(frozen=True)
class Page:
    items: list[RowMapping]
    next_cursor: str | None


class PageQuery(BaseModel):
    """Where a page starts and how long it is, as query parameters."""

    limit: int = Field(default=50, ge=1, le=PAGE_MAX)
    cursor: str | None = Field(default=None, max_length=1000)


class Period(BaseModel):
    """A time filter as query parameters: ``since`` (inclusive) and ``until`` (exclusive), ISO-8601
    with a zone — a time without one is refused, since whose clock it means is unknown."""

    since: AwareDatetime | None = None
    until: AwareDatetime | None = None

    @model_validator(mode="after")
    def _ordered(self) -> Self:
        if self.since is not None and self.until is not None and self.since >= self.until:
            raise ValueError("since must be before until")
        return self


def encode_cursor(*values: Any) -> str:
    return base64.urlsafe_b64encode(json.dumps(values, default=str).encode()).decode()


def decode_cursor(cursor: str, size: int) -> list[Any]:
    """The ``size`` values :func:`encode_cursor` packed; :class:`BadCursor` for anything else."""
    try:
        values = json.loads(base64.urlsafe_b64decode(cursor.encode()))
    except (binascii.Error, ValueError, UnicodeDecodeError):
        raise BadCursor("page token is not valid") from None
    if not isinstance(values, list) or len(values) != size:
        raise BadCursor("page token is not valid")
    return values


def substring_pattern(text: str) -> str:
    """An ``ILIKE ... ESCAPE '\\'`` pattern for ``text`` anywhere: its % and _ are literal."""
    return "%" + text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def newest_first(
    query: Select[Any], at: Column[datetime], key: Column[uuid.UUID], *, limit: int, cursor: str | None
) -> Select[Any]:
    """``query`` ordered by ``at`` then ``key``, both descending, from past the row ``cursor``
    names, one row more than ``limit`` (which tells whether another page follows)."""
    if cursor:
        at_text, key_text = decode_cursor(cursor, 2)
        try:
            last_at, last_key = datetime.fromisoformat(at_text), uuid.UUID(key_text)
        except (TypeError, ValueError):
            raise BadCursor("page token is not valid") from None
        query = query.where(or_(at < last_at, and_(at == last_at, key < last_key)))
    return query.order_by(at.desc(), key.desc()).limit(limit + 1)


def newest_first_page(
    rows: list[RowMapping], at: Column[datetime], key: Column[uuid.UUID], *, limit: int
) -> Page:
    """The page :func:`newest_first`'s query answered, with the cursor of the next one."""
    shown = rows[:limit]
    if len(rows) <= limit or not shown:
        return Page(shown, None)
    last = shown[-1]
    return Page(shown, encode_cursor(last[at.name].isoformat(), str(last[key.name])))


async def every_row(page: Callable[[str | None], Awaitable[Page]]) -> AsyncIterator[RowMapping]:
    """Every row of a listing, one page (one short query) at a time: an export of any length
    holds neither a connection nor the whole result while its reader takes it."""
    cursor: str | None = None
    while True:
        found = await page(cursor)
        for row in found.items:
            yield row
        if found.next_cursor is None:
            return
        cursor = found.next_cursor
