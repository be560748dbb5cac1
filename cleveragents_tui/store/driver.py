"""Statements sent on the driver's own connection, compiled once per dialect (issue 22).

SQLAlchemy's execution layer costs ~20 µs a statement and ~23 µs a transaction, several
times what the database spends on a recording's small statements (docs/benchmarks.md,
"record_decision, where the rest goes"). Here SQLAlchemy compiles each Core statement once
per dialect, and what it compiled is kept: the SQL text, the parameters' order, the
constants it bound, and the bind and result processors of their types (UTC datetimes).
Each execution then costs the driver's call and the Python putting values in order.
Errors become SQLAlchemy's and the domain's exactly as the engine's ``handle_error`` makes
them. Statements are reported to :func:`listen`'s listeners (tests count them there).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, Engine
from sqlalchemy.engine import Dialect
from sqlalchemy.exc import DBAPIError
from sqlalchemy.sql import Insert
from sqlalchemy.sql.expression import Executable, SelectBase

from cleveragents_tui.store.database import refusal, sqlite_begin

Values = Mapping[str, Any]
Row = tuple[Any, ...]
COMMIT, ROLLBACK = "COMMIT", "ROLLBACK"


@dataclass(frozen=True)
class Sent:
    """What went to the driver: the SQL and its parameters (``many``: a list of them), and
    the Core statement with the values before processing (``statement`` None: a BEGIN, or
    a transaction's end, ``COMMIT`` or ``ROLLBACK``, with no parameters)."""

    sql: str
    params: Any
    many: bool = False
    statement: Executable | None = None
    values: Any = None


Listener = Callable[[Sent], None]
_LISTENERS: dict[Engine, list[Listener]] = {}


def listen(engine: Engine, listener: Listener) -> None:
    """Call ``listener`` with everything sent on ``engine``'s connections through here."""
    _LISTENERS.setdefault(engine, []).append(listener)


def remove(engine: Engine, listener: Listener) -> None:
    listeners = _LISTENERS[engine]
    listeners.remove(listener)
    if not listeners:
        del _LISTENERS[engine]


class Compiled:
    """One statement in one dialect's words, with what turns values into its parameters."""

    def __init__(self, statement: Executable, dialect: Dialect, keys: Sequence[str] | None):
        compiled = statement.compile(  # type: ignore[attr-defined]
            dialect=dialect, column_keys=keys, for_executemany=True
        )
        self.sql: str = compiled.string
        self.positional = bool(dialect.positional)
        names = compiled.positiontup if self.positional else list(compiled.params)
        self.names: tuple[str, ...] = tuple(names or ())
        binds = compiled.binds
        self.constants = {
            name: value for name, value in compiled.params.items() if not binds[name].required
        }
        self.processors = tuple(
            (name, binds[name].type.dialect_impl(dialect).bind_processor(dialect))
            for name in self.names
        )
        self.results: tuple[Callable[[Any], Any] | None, ...] = ()
        if isinstance(statement, SelectBase):
            self.results = tuple(
                column.type.dialect_impl(dialect).result_processor(dialect, None)
                for column in statement.selected_columns
            )

    def params(self, values: Values) -> Any:
        """The driver's parameters for these values: a tuple (qmark) or a dict (pyformat)."""
        if self.constants:
            values = {**self.constants, **values}
        if self.positional:
            return tuple(
                values[name] if process is None else process(values[name])
                for name, process in self.processors
            )
        return {
            name: values[name] if process is None else process(values[name])
            for name, process in self.processors
        }

    def rows(self, fetched: list[Any]) -> list[Row]:
        results = self.results
        if not any(results):
            return [tuple(row) for row in fetched]
        return [
            tuple(v if p is None else p(v) for p, v in zip(results, row, strict=True))
            for row in fetched
        ]


class Statement:
    """A Core statement (built once, at import), compiled when first sent on a dialect
    (and, for an INSERT, for each set of columns given)."""

    def __init__(self, core: Executable) -> None:
        self.core = core
        self._insert = isinstance(core, Insert)
        self._compiled: dict[tuple[str, str, tuple[str, ...] | None], Compiled] = {}

    def compiled(self, dialect: Dialect, values: Values) -> Compiled:
        key = (dialect.name, dialect.driver, tuple(values) if self._insert else None)
        found = self._compiled.get(key)
        if found is None:
            found = self._compiled[key] = Compiled(self.core, dialect, key[2])
        return found


class Driver:
    """One of the pool's connections (checked out by SQLAlchemy: its pool, its ping), used
    through the driver: statements and transactions, nothing else in between."""

    def __init__(self, engine: Engine, connection: Connection) -> None:
        self._engine = engine
        self._dialect = engine.dialect
        self._sqlite = self._dialect.name == "sqlite"
        self._connection = connection
        raw: Any = connection.connection.driver_connection
        self._raw = raw
        self._cursor: Any = raw.cursor()
        self._error: type[Exception] = self._dialect.loaded_dbapi.Error
        self._reading = False

    def begin(self, write: bool) -> None:
        """A transaction that writes (``write``) or only reads. On SQLite: BEGIN
        (IMMEDIATE for a writer: the write lock up front; DEFERRED for a read, which makes
        its reads one snapshot). On PostgreSQL psycopg begins a writer's transaction at its
        first statement, and a read runs without one: READ COMMITTED gives each statement
        a snapshot of its own anyway, so BEGIN and its end bought only two round trips
        (as UnitOfWork's ``read_only``)."""
        self._reading = not write
        if self._sqlite:
            self._send(sqlite_begin(self._engine, "IMMEDIATE" if write else "DEFERRED"), None)
        elif self._reading:
            self._raw.autocommit = True

    def commit(self) -> None:
        self._end(COMMIT)

    def rollback(self) -> None:
        self._end(ROLLBACK)

    def execute(self, statement: Statement, values: Values) -> int:
        """Run a statement that writes; its row count."""
        self._writing()
        compiled = statement.compiled(self._dialect, values)
        self._send(compiled.sql, compiled.params(values), statement=statement, values=values)
        return int(self._cursor.rowcount)

    def executemany(self, statement: Statement, rows: Sequence[Values]) -> None:
        self._writing()
        compiled = statement.compiled(self._dialect, rows[0])
        params = [compiled.params(values) for values in rows]
        self._send(compiled.sql, params, many=True, statement=statement, values=rows)

    def fetch(self, statement: Statement, values: Values) -> list[Row]:
        compiled = statement.compiled(self._dialect, values)
        self._send(compiled.sql, compiled.params(values), statement=statement, values=values)
        return compiled.rows(self._cursor.fetchall())

    def scalar(self, statement: Statement, values: Values) -> Any:
        rows = self.fetch(statement, values)
        return rows[0][0] if rows else None

    def _writing(self) -> None:
        if self._reading:
            raise ValueError("this transaction only reads: begin it with write=True to write")

    def _end(self, sql: str) -> None:
        if self._reading and not self._sqlite:
            self._raw.autocommit = False  # nothing was begun: nothing to end
            return
        self._notify(Sent(sql, None))
        try:
            if sql == COMMIT:
                self._raw.commit()
            else:
                self._raw.rollback()
        except self._error as exc:
            raise self._failed(exc, sql, None) from exc

    def _send(
        self,
        sql: str,
        params: Any,
        many: bool = False,
        statement: Statement | None = None,
        values: Any = None,
    ) -> None:
        if self._engine in _LISTENERS:
            core = None if statement is None else statement.core
            self._notify(Sent(sql, params, many, core, values))
        try:
            if many:
                self._cursor.executemany(sql, params)
            elif params is None:
                self._cursor.execute(sql)
            else:
                self._cursor.execute(sql, params)
        except self._error as exc:
            raise self._failed(exc, sql, params) from exc

    def _notify(self, sent: Sent) -> None:
        for listener in tuple(_LISTENERS.get(self._engine, ())):
            listener(sent)

    def _failed(self, exc: Exception, sql: str, params: Any) -> Exception:
        """As SQLAlchemy's execution layer would: invalidate a connection the server
        dropped, wrap the driver's error, and let the store name the refusals."""
        if self._dialect.is_disconnect(exc, self._raw, self._cursor):  # type: ignore[arg-type]
            self._connection.invalidate(exc)
        wrapped = DBAPIError.instance(sql, params, exc, self._error, dialect=self._dialect)
        return refusal(exc, self._engine) or wrapped
