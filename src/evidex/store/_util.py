"""Small helpers the store's modules share: time, ids, filtered selects, safe URLs."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

import sqlalchemy as sa

from evidex.errors import StoreError

__all__ = ["aware", "new_id", "now", "safe_url", "select_where"]


def now() -> datetime:
    return datetime.now(timezone.utc)


def aware(value: datetime | None) -> datetime | None:
    """A datetime read back from the database, in UTC (SQLite drops the offset)."""
    if value is not None and value.tzinfo is None:
        return value.replace(tzinfo=timezone.utc)
    return value


def safe_url(url: str) -> str:
    """The URL without its password, for messages."""
    try:
        return sa.engine.make_url(url).render_as_string(hide_password=True)
    except Exception:
        return "<unparseable URL>"


def new_id(result: Any) -> int:
    """The primary key of the row an INSERT just wrote."""
    key = result.inserted_primary_key
    if key is None:
        raise StoreError("the database returned no id for the new row")
    return int(key[0])


def select_where(table: sa.Table, order: Any, limit: int | None, **equal: str | None) -> Any:
    """Rows of ``table`` in ``order`` whose columns equal the given values (a value of None or
    "" matches any), at most ``limit`` (None or 0: all)."""
    query = sa.select(table).order_by(order)
    for column, value in equal.items():
        if value:
            query = query.where(table.c[column] == value)
    return query.limit(limit) if limit else query
