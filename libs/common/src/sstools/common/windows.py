"""Fixed-window counters in PostgreSQL, for limits every replica must see alike (service tokens
issued per client, chat turns per user).

A counter is a row of a table with the columns ``key`` (primary key), ``count`` and ``since``
(when its window began, :func:`counter_columns`); each service keeps its own table. Counting is
one upsert under the row's lock: parallel callers never both see the last free place.
"""

import math
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from sqlalchemy import Column, DateTime, Integer, Interval, Table, Text, case, func, literal
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncConnection


def counter_columns() -> list[Column[Any]]:
    """The columns a counter table needs (a service may add its own)."""
    return [
        Column("key", Text, primary_key=True),
        Column("count", Integer, nullable=False, server_default="0"),
        Column("since", DateTime(timezone=True), nullable=False, server_default=func.now()),
    ]


@dataclass(frozen=True)
class WindowCount:
    count: int
    """Events in the current window, this one included."""
    retry_after: int
    """Whole seconds (at least 1) until the window ends."""

    def over(self, limit: int) -> bool:
        return self.count > limit


async def count_in_window(
    connection: AsyncConnection, table: Table, key: str, window: timedelta
) -> WindowCount:
    """Count one event on ``key``; a window older than ``window`` starts over with it."""
    column = table.c
    stale = column.since <= func.now() - literal(window, Interval)
    statement = (
        insert(table)
        .values(key=key, count=1, since=func.now())
        .on_conflict_do_update(
            index_elements=[column.key],
            set_={
                "count": case((stale, 1), else_=column.count + 1),
                "since": case((stale, func.now()), else_=column.since),
            },
        )
        .returning(column.count, func.extract("epoch", column.since + literal(window, Interval) - func.now()))
    )
    count, remaining = (await connection.execute(statement)).one()
    return WindowCount(int(count), whole_seconds(float(remaining)))


def whole_seconds(seconds: float) -> int:
    """A wait as Retry-After gives it: whole seconds, never 0 ("now" would be refused again)."""
    return max(1, math.ceil(seconds))
