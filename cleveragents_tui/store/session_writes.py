"""Writes on the driver's cursor of a unit of work's connection, in its transaction (issue 22).

A correction's execute writes a few rows in each of its transactions (the plan's version,
the correction's status, the affected decisions superseded). Through the ORM each such
``UPDATE`` cost ~1 ms of Python (its cache key, the ORM's bulk-update context, the result)
against ~0.05 ms of SQL. Here each statement is built once, compiled once per dialect
(:func:`store.driver.compiled`) and sent on the driver's cursor of the session's own
connection, so it runs in the session's transaction, in the order called, heard by the
engine's listeners as SQLAlchemy's statements are (:func:`store.driver.heard`).

A statement the database refuses is raised as SQLAlchemy's execution would raise it (the
``handle_error`` translations of ``store.database``): the append-only triggers' refusal as
``ImmutableRecordError``, a lock as ``ConcurrentChangeError``, SQLite's environment failures
as one line; any other error wrapped as SQLAlchemy wraps it, a dropped connection
invalidated. The transaction is then the caller's to roll back (the unit of work does, on
leaving), as after any refused statement.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import Connection
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session
from sqlalchemy.sql.expression import Executable

from cleveragents_tui.store.database import refusal
from cleveragents_tui.store.driver import compiled, heard


def write(session: Session, statement: Executable, values: Mapping[str, Any]) -> int:
    """Run ``statement`` (built once) with ``values`` in the session's transaction; the
    number of rows it changed."""
    connection = session.connection()
    found = compiled(statement, connection.dialect, values)
    params = found.params(values)
    cursor = connection.connection.cursor()
    try:
        heard(connection, cursor, found.sql, params, statement=statement, values=values)
        _send(connection, cursor, found.sql, params, many=False)
        return int(cursor.rowcount)
    finally:
        cursor.close()


def locking(session: Session, statement: Executable, values: Mapping[str, Any]) -> list[Any]:
    """The rows of a read that takes locks (``FOR UPDATE NOWAIT``) in the session's
    transaction, as SQLAlchemy gives them; refused as :func:`write` is refused (a lock held
    elsewhere: ``ConcurrentChangeError``). Not :func:`store.driver_reads.fetch`, which sends
    a refused statement again through SQLAlchemy: on PostgreSQL the refusal has aborted the
    transaction, and that second try would fail for that instead."""
    connection = session.connection()
    found = compiled(statement, connection.dialect, values)
    params = found.params(values)
    cursor = connection.connection.cursor()
    try:
        heard(connection, cursor, found.sql, params, statement=statement, values=values)
        _send(connection, cursor, found.sql, params, many=False)
        fetched = cursor.fetchall()
        found.described(cursor)
        return [found.named(row) for row in fetched]
    finally:
        cursor.close()


def write_many(session: Session, statement: Executable, rows: Sequence[Mapping[str, Any]]) -> None:
    """One statement for several rows (an ``INSERT`` of the same columns each), in the
    session's transaction; a lone row as :func:`write`."""
    if len(rows) == 1:
        write(session, statement, rows[0])
        return
    if not rows:
        return
    connection = session.connection()
    found = compiled(statement, connection.dialect, rows[0])
    params = [found.params(values) for values in rows]
    cursor = connection.connection.cursor()
    try:
        heard(connection, cursor, found.sql, params, True, statement, list(rows))
        _send(connection, cursor, found.sql, params, many=True)
    finally:
        cursor.close()


def _send(connection: Connection, cursor: Any, sql: str, params: Any, many: bool) -> None:
    dialect = connection.dialect
    error: type[Exception] = dialect.loaded_dbapi.Error
    try:
        if many:
            cursor.executemany(sql, params)
        else:
            cursor.execute(sql, params)
    except error as exc:
        raw = connection.connection.dbapi_connection
        if dialect.is_disconnect(exc, raw, cursor):  # type: ignore[arg-type]
            connection.invalidate(exc)
        wrapped = DBAPIError.instance(sql, params, exc, error, dialect=dialect)
        raise (refusal(exc, connection.engine) or wrapped) from exc
