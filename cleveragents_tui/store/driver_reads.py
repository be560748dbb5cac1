"""The preview's reads on the driver's cursor of the unit of work's connection: ``select``
statements compiled once per dialect (:func:`store.driver.compiled`), their rows given as
SQLAlchemy gives them (named tuples, columns by name, the same values), several at once in
one round trip on PostgreSQL (issue 22).

A correction's preview of a small affected set is a dozen small reads; through SQLAlchemy
each one's cache key, execution context and result object cost more than its rows.
Statements are heard as :func:`store.driver.heard` tells. A statement the driver refuses
is run again through SQLAlchemy, which raises the error as everywhere else (the store's
translations of locks and environment failures included).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Any, Protocol

from sqlalchemy import Engine, Select
from sqlalchemy.engine import Connection

from cleveragents_tui.store.database import SQLITE_BEGIN, SQLITE_BEGUN
from cleveragents_tui.store.driver import Compiled, compiled, heard

AnySelect = Select[*tuple[Any, ...]]  # a SELECT of any columns
Read = tuple[AnySelect, Callable[[Any], Any] | None, dict[str, Any]]
_BUILT_KEPT = 1024
_BUILDERS: dict[tuple[int, Callable[[Any], Any]], Callable[[Any], Any]] = {}


class Reads(Protocol):
    """Where these reads run: a unit of work's session, or a :class:`store.reading.Reading`
    (the preview's snapshot, without the ORM's session)."""

    def connection(self) -> Connection: ...

    def get_bind(self) -> Engine | Connection: ...


def fetch(session: Reads, statement: AnySelect, **params: Any) -> list[Any]:
    """The rows of ``statement`` (built once, at import or per dialect) with ``params``, in
    the session's transaction."""
    return batch(session, [(statement, None, params)])[0]


def batch(session: Reads, reads: Sequence[Read]) -> list[list[Any]]:
    """The rows of each of ``reads`` (statement, ``build`` as :func:`built` takes it or None
    for rows, parameters), in order. On PostgreSQL they are sent together, in one round
    trip (psycopg's pipeline mode), where each read cost one (0.1–0.3 ms on this project's
    machines, against a few microseconds of work); elsewhere one after the other."""
    connection = session.connection()
    dialect = connection.dialect
    found = [compiled(statement, dialect, params) for statement, _, params in reads]
    sent = [(f, f.params(params)) for f, (_, _, params) in zip(found, reads, strict=True)]
    dbapi: Any = connection.connection.dbapi_connection
    raws: list[list[Any]] | None = None
    # in autocommit only (a preview's reads): a statement refused inside a transaction
    # would abort it, and the one sent again on its own would fail for that instead
    if dialect.name == "postgresql" and len(sent) > 1 and dbapi.autocommit:
        raws = _pipelined(connection, dbapi, reads, sent)
    if raws is None:
        cursor = connection.connection.cursor()  # one for the batch
        try:
            raws = [
                _raw(connection, cursor, read, f, params)
                for read, (f, params) in zip(reads, sent, strict=True)
            ]
        finally:
            cursor.close()
    return [
        rows if build is driver_rows else [_maker(f, build)(raw) for raw in rows]
        for f, (_, build, _), rows in zip(found, reads, raws, strict=True)
    ]


def driver_rows(row: Any) -> Any:
    """As a read's ``build``: the driver's rows as it gives them, no row object made (for
    a statement whose columns need no conversion, of many rows: the affected-subtree CTE)."""
    return row


def _pipelined(
    connection: Connection, dbapi: Any, reads: Sequence[Read], sent: list[tuple[Compiled, Any]]
) -> list[list[Any]] | None:
    """The rows of each statement, sent in one pipeline; None when the driver has no
    pipeline or refused one of them (then each is sent again on its own, whose error is
    raised as the store raises it)."""
    from psycopg import Pipeline  # PostgreSQL's driver: not loaded by commands on SQLite

    if not Pipeline.is_supported():
        return None
    cursors = [connection.connection.cursor() for _ in sent]
    try:
        for cursor, read, (found, params) in zip(cursors, reads, sent, strict=True):
            heard(connection, cursor, found.sql, params, statement=read[0], values=read[2])
        try:
            with dbapi.pipeline():
                for cursor, (found, params) in zip(cursors, sent, strict=True):
                    cursor.execute(found.sql, params)
            rows = []
            for cursor, (found, _) in zip(cursors, sent, strict=True):
                rows.append(list(cursor.fetchall()))
                found.described(cursor)
        except connection.dialect.loaded_dbapi.Error:
            return None
        return rows
    finally:
        for cursor in cursors:
            cursor.close()


def _maker(found: Compiled, build: Callable[[Any], Any] | None) -> Callable[[Any], Any]:
    """What makes one result of a driver's row: the named row, or ``build`` of it, kept."""
    if build is None:
        return found.named
    key = (id(found), build)
    make = _BUILDERS.get(key)
    if make is None:
        make = _BUILDERS[key] = lru_cache(maxsize=_BUILT_KEPT)(lambda raw: build(found.named(raw)))
    return make


def _raw(
    connection: Connection, cursor: Any, read: Read, found: Compiled, driver_params: Any
) -> list[Any]:
    """The driver's rows. A statement the driver refuses is sent again through SQLAlchemy,
    which raises the error as the store does everywhere (or gives the rows, when a lock
    was let go meanwhile)."""
    heard(connection, cursor, found.sql, driver_params, statement=read[0], values=read[2])
    try:
        cursor.execute(found.sql, driver_params)
        rows = list(cursor.fetchall())
    except connection.dialect.loaded_dbapi.Error:
        if not connection.in_transaction() and getattr(cursor.connection, "in_transaction", False):
            # a transaction begun on the driver's cursor (store/reading.py): SQLAlchemy's
            # joins it, sending no BEGIN of its own
            connection.execution_options(**{SQLITE_BEGIN: SQLITE_BEGUN})
        result = connection.exec_driver_sql(found.sql, driver_params)
        found.described(result.cursor)
        return list(result)
    found.described(cursor)
    return rows
