"""Column types that behave the same on SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import DateTime
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeDecorator


class UtcDateTime(TypeDecorator[datetime]):
    """A timezone-aware UTC datetime, stored naive-UTC on SQLite and timestamptz on PostgreSQL.

    Binding a naive datetime is a programming error: the domain only has aware ones.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetimes are not stored: pass an aware UTC datetime")
        value = value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        assert isinstance(value, datetime)
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)

    def driver_bind_processor(self, dialect: Dialect) -> Callable[[datetime | None], Any]:
        """:meth:`process_bind_param` and the dialect's own processor in one call, for the
        statements sent on the driver (store/driver.py): SQLAlchemy's two calls cost twice
        this for each datetime of a recording. SQLite's text is the dialect's storage
        format (``YYYY-MM-DD HH:MM:SS.ffffff``), which ``isoformat`` gives as well."""
        sqlite = dialect.name == "sqlite"

        def process(value: datetime | None) -> Any:
            if value is None:
                return None
            if value.tzinfo is not UTC:
                if value.tzinfo is None:
                    raise ValueError("naive datetimes are not stored: pass an aware UTC datetime")
                value = value.astimezone(UTC)
            # the naive part of an aware UTC time: its first 26 characters (4-digit years)
            return value.isoformat(" ", "microseconds")[:26] if sqlite else value

        return process
