"""Counting the SQL statements a piece of work sends, as SQLAlchemy executes them."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Engine


@contextmanager
def sent_statements(engine: Engine) -> Iterator[list[str]]:
    """The statements ``engine`` sends inside the ``with`` block, in order."""
    statements: list[str] = []

    def count(*args: Any) -> None:
        statements.append(args[2])

    event.listen(engine, "before_cursor_execute", count)
    try:
        yield statements
    finally:
        event.remove(engine, "before_cursor_execute", count)
