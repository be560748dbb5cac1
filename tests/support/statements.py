"""Counting the SQL statements a piece of work sends, as the engine's ``before_cursor_execute``
event hears them: those SQLAlchemy executes, and those the store sends on the driver's
cursor (store/driver.py tells the same event)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Engine


@contextmanager
def sent_statements(engine: Engine) -> Iterator[list[str]]:
    """The statements ``engine`` sends inside the ``with`` block, in order (a BEGIN sent as
    a statement included; a transaction's end not, as the event does not see it)."""
    statements: list[str] = []

    def count(*args: Any) -> None:
        statements.append(args[2])

    event.listen(engine, "before_cursor_execute", count)
    try:
        yield statements
    finally:
        event.remove(engine, "before_cursor_execute", count)
