"""Reads run on the database driver's own cursor: a SQLAlchemy ``select`` compiled once per
dialect, its rows passed through the columns' own result processors (issue 22).

A correction's preview of a small affected set is a dozen small reads. Through SQLAlchemy
each one's cache key is worked out from the statement at every call (for the later writers'
statement, with its JSON functions and subquery, 0.3 ms against 0.15 ms of SQL), then the
execution context and a result object are built; on the driver's cursor a read costs what its
rows do. The rows are the same values SQLAlchemy would give (named tuples, columns by name).

The engine's ``before_cursor_execute`` listeners still hear each statement (the tests count a
preview's statements with one; nothing here takes their return value). A statement the
driver refuses is run again through SQLAlchemy, which raises the error as everywhere else
(the store's translations of locks and environment failures included).
"""

from __future__ import annotations

from collections import namedtuple
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from sqlalchemy import Select
from sqlalchemy.engine import Connection, Dialect
from sqlalchemy.orm import Session
from sqlalchemy.sql.compiler import SQLCompiler


@dataclass
class _Compiled:
    compiled: SQLCompiler
    types: tuple[Any, ...]  # the columns' SQLAlchemy types, for their result processors
    row: type[tuple[Any, ...]]
    # each column's processor, once the driver has described the columns (a driver's own
    # type codes choose some: PostgreSQL's numeric types)
    processors: tuple[Callable[[Any], Any] | None, ...] | None = None


AnySelect = Select[*tuple[Any, ...]]  # a SELECT of any columns
Read = tuple[AnySelect, Callable[[Any], Any] | None, dict[str, Any]]
_COMPILED: dict[tuple[int, str], tuple[AnySelect, _Compiled]] = {}
_BUILT_KEPT = 1024
_BUILDERS: dict[tuple[int, Callable[[Any], Any]], Callable[[Any], Any]] = {}


def fetch(session: Session, statement: AnySelect, **params: Any) -> list[Any]:
    """The rows of ``statement`` (built once, at import or per dialect) with ``params``, in
    the session's transaction."""
    return batch(session, [(statement, None, params)])[0]


def batch(session: Session, reads: Sequence[Read]) -> list[list[Any]]:
    """The rows of each of ``reads`` (statement, ``build`` as :func:`built` takes it or None
    for rows, parameters), in order. On PostgreSQL they are sent together, in one round
    trip (psycopg's pipeline mode), where each read cost one (0.1–0.3 ms on this project's
    machines, against a few microseconds of work); elsewhere one after the other."""
    connection = session.connection()
    found = [_compiled(connection.dialect, statement) for statement, _, _ in reads]
    sent = [(f, _driver_params(f, params)) for f, (_, _, params) in zip(found, reads, strict=True)]
    dbapi: Any = connection.connection.dbapi_connection
    raws: list[list[Any]] | None = None
    # in autocommit only (a preview's reads): a statement refused inside a transaction
    # would abort it, and the one sent again on its own would fail for that instead
    if connection.dialect.name == "postgresql" and len(sent) > 1 and dbapi.autocommit:
        raws = _pipelined(connection, dbapi, sent)
    if raws is None:
        raws = [_raw(connection, f, params) for f, params in sent]
    return [
        [_maker(f, build)(raw) for raw in rows]
        for f, (_, build, _), rows in zip(found, reads, raws, strict=True)
    ]


def _pipelined(
    connection: Connection, dbapi: Any, sent: list[tuple[_Compiled, Any]]
) -> list[list[Any]] | None:
    """The rows of each statement, sent in one pipeline; None when the driver has no
    pipeline or refused one of them (then each is sent again on its own, whose error is
    raised as the store raises it)."""
    from psycopg import Pipeline  # PostgreSQL's driver: not loaded by commands on SQLite

    if not Pipeline.is_supported():
        return None
    cursors = [connection.connection.cursor() for _ in sent]
    try:
        for cursor, (found, params) in zip(cursors, sent, strict=True):
            for listener in connection.dispatch.before_cursor_execute:
                listener(connection, cursor, found.compiled.string, params, None, False)
        try:
            with dbapi.pipeline():
                for cursor, (found, params) in zip(cursors, sent, strict=True):
                    cursor.execute(found.compiled.string, params)
            rows = []
            for cursor, (found, _) in zip(cursors, sent, strict=True):
                rows.append(list(cursor.fetchall()))
                _describe(found, connection.dialect, cursor.description)
        except connection.dialect.loaded_dbapi.Error:
            return None
        return rows
    finally:
        for cursor in cursors:
            cursor.close()


def _maker(found: _Compiled, build: Callable[[Any], Any] | None) -> Callable[[Any], Any]:
    """What makes one result of a driver's row: the named row, or ``build`` of it, kept."""
    if build is None:
        return lambda raw: found.row(*_processed(found.processors, raw))
    key = (id(found), build)
    make = _BUILDERS.get(key)
    if make is None:
        make = _BUILDERS[key] = lru_cache(maxsize=_BUILT_KEPT)(
            lambda raw: build(found.row(*_processed(found.processors, raw)))
        )
    return make


def _driver_params(found: _Compiled, params: dict[str, Any]) -> Any:
    values = found.compiled.construct_params(params, escape_names=False)
    order = found.compiled.positiontup
    return values if order is None else tuple(values[name] for name in order)


def _raw(connection: Connection, found: _Compiled, driver_params: Any) -> list[Any]:
    """The driver's rows. A statement the driver refuses is sent again through SQLAlchemy,
    which raises the error as the store does everywhere (or gives the rows, when a lock
    was let go meanwhile)."""
    sql = found.compiled.string
    cursor = connection.connection.cursor()
    try:
        for listener in connection.dispatch.before_cursor_execute:
            listener(connection, cursor, sql, driver_params, None, False)
        try:
            cursor.execute(sql, driver_params)
            rows = list(cursor.fetchall())
        except connection.dialect.loaded_dbapi.Error:
            pass
        else:
            _describe(found, connection.dialect, cursor.description)
            return rows
    finally:
        cursor.close()
    result = connection.exec_driver_sql(sql, driver_params)
    _describe(found, connection.dialect, result.cursor.description)
    return list(result)


def _describe(found: _Compiled, dialect: Dialect, description: Any) -> None:
    if found.processors is None:
        found.processors = tuple(
            t.dialect_impl(dialect).result_processor(dialect, d[1])
            for t, d in zip(found.types, description, strict=True)
        )


def _processed(processors: tuple[Callable[[Any], Any] | None, ...] | None, row: Any) -> list[Any]:
    assert processors is not None  # set by the first execution
    return [value if p is None else p(value) for p, value in zip(processors, row, strict=True)]


def _compiled(dialect: Dialect, statement: AnySelect) -> _Compiled:
    key = (id(statement), dialect.name)
    cached = _COMPILED.get(key)
    if cached is not None and cached[0] is statement:
        return cached[1]
    compiled = statement.compile(dialect=dialect)
    if not isinstance(compiled, SQLCompiler):
        raise TypeError(f"{dialect.name} compiled a SELECT into {type(compiled).__name__}")
    types = tuple(c.type for c in statement.selected_columns)
    names = list(statement.selected_columns.keys())
    found = _Compiled(compiled, types, namedtuple("Row", names, rename=True))
    _COMPILED[key] = (statement, found)  # the statement is kept: its id stays its own
    return found
