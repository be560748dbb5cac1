"""Counting the SQL statements a piece of work sends: those SQLAlchemy executes, and those
the store sends on the driver's cursor (store/driver.py: the recording's statements)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Engine

from cleveragents_tui.store import driver


@contextmanager
def sent_statements(engine: Engine) -> Iterator[list[str]]:
    """The statements ``engine`` sends inside the ``with`` block, in order (a BEGIN the
    store sends itself included, as SQLAlchemy's event sees the one the engine sends;
    a transaction's end not, as SQLAlchemy's event does not see it)."""
    statements: list[str] = []

    def count(*args: Any) -> None:
        statements.append(args[2])

    def sent(what: driver.Sent) -> None:
        if what.sql not in (driver.COMMIT, driver.ROLLBACK):
            statements.append(what.sql)

    event.listen(engine, "before_cursor_execute", count)
    driver.listen(engine, sent)
    try:
        yield statements
    finally:
        event.remove(engine, "before_cursor_execute", count)
        driver.remove(engine, sent)
