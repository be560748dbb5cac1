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
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, TypeVar

from sqlalchemy import Select
from sqlalchemy.engine import Connection, Dialect
from sqlalchemy.orm import Session
from sqlalchemy.sql.compiler import SQLCompiler


@dataclass(frozen=True)
class _Compiled:
    compiled: SQLCompiler
    processors: tuple[Callable[[Any], Any] | None, ...]
    row: type[tuple[Any, ...]]


M = TypeVar("M")
_COMPILED: dict[tuple[int, str], tuple[Select[Any], _Compiled]] = {}
_BUILT_KEPT = 1024
_BUILDERS: dict[tuple[int, Callable[[Any], Any]], Callable[[Any], Any]] = {}


def fetch(session: Session, statement: Select[Any], **params: Any) -> list[Any]:
    """The rows of ``statement`` (built once, at import or per dialect) with ``params``, in
    the session's transaction."""
    connection = session.connection()
    found = _compiled(connection.dialect, statement)
    return [
        found.row(*_processed(found.processors, r))
        for r in _raw(connection, found, params)
    ]


def _raw(connection: Connection, found: _Compiled, params: dict[str, Any]) -> list[Any]:
    """The driver's rows. A statement the driver refuses is sent again through SQLAlchemy,
    which raises the error as the store does everywhere (or gives the rows, when a lock
    was let go meanwhile)."""
    values = found.compiled.construct_params(params, escape_names=False)
    order = found.compiled.positiontup
    driver_params: Any = values if order is None else tuple(values[name] for name in order)
    sql = found.compiled.string
    cursor = connection.connection.cursor()
    try:
        for listener in connection.dispatch.before_cursor_execute:
            listener(connection, cursor, sql, driver_params, None, False)
        try:
            cursor.execute(sql, driver_params)
            return list(cursor.fetchall())
        except connection.dialect.loaded_dbapi.Error:
            pass
    finally:
        cursor.close()
    return list(connection.exec_driver_sql(sql, driver_params))


def built(session: Session, statement: Select[Any], build: Callable[[Any], M], **params: Any) -> list[M]:
    """The rows of ``statement`` as ``build`` makes them from each row, built once per row
    as stored (the last :data:`_BUILT_KEPT` of each statement): a domain model validated
    from the same stored values is the same model, and a correction's preview read the same
    plan, checkpoints and resources at each preview (a third of its Python, issue 22). A
    row that fails to build raises each time (an error is not kept)."""
    connection = session.connection()
    found = _compiled(connection.dialect, statement)
    key = (id(found), build)
    make = _BUILDERS.get(key)
    if make is None:
        make = _BUILDERS[key] = lru_cache(maxsize=_BUILT_KEPT)(
            lambda raw: build(found.row(*_processed(found.processors, raw)))
        )
    return [make(raw) for raw in _raw(connection, found, params)]


def _processed(processors: tuple[Callable[[Any], Any] | None, ...], row: Any) -> list[Any]:
    return [value if p is None else p(value) for p, value in zip(processors, row, strict=True)]


def _compiled(dialect: Dialect, statement: Select[Any]) -> _Compiled:
    key = (id(statement), dialect.name)
    cached = _COMPILED.get(key)
    if cached is not None and cached[0] is statement:
        return cached[1]
    compiled = statement.compile(dialect=dialect)
    if not isinstance(compiled, SQLCompiler):
        raise TypeError(f"{dialect.name} compiled a SELECT into {type(compiled).__name__}")
    columns = list(statement.selected_columns)
    processors = tuple(
        c.type.dialect_impl(dialect).result_processor(dialect, None) for c in columns
    )
    names = list(statement.selected_columns.keys())
    found = _Compiled(compiled, processors, namedtuple("Row", names, rename=True))  # type: ignore[misc]
    _COMPILED[key] = (statement, found)  # the statement is kept: its id stays its own
    return found
