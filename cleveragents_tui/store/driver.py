"""Statements sent on the database driver's own cursor, compiled once per dialect (issue 22).

SQLAlchemy's execution layer costs ~20 µs a statement and ~23 µs a transaction, several
times what the database spends on a recording's or a preview's small statements (and a
statement's cache key is worked out at every call: 0.3 ms for the preview's later writers,
against 0.15 ms of SQL; docs/benchmarks.md). Here SQLAlchemy compiles each Core statement
once per dialect (:func:`compiled`), and what it compiled is kept: the SQL text, the
parameters' order, the constants it bound, the bind processors of their types and the
result processors of the columns (chosen with the types the driver describes: PostgreSQL's
numeric types). Each execution then costs the driver's call and the Python putting values
in order. :class:`Driver` runs the recording's transactions this way (the preview's reads
are in :mod:`store.driver_reads`).

Tests hear these statements as they hear SQLAlchemy's, through the engine's events
(:func:`heard`); nothing here takes a listener's return value.
"""

from __future__ import annotations

from collections import namedtuple
from collections.abc import Callable, Mapping, Sequence
from operator import itemgetter
from typing import Any, cast

from sqlalchemy import Connection, Engine
from sqlalchemy.engine import Dialect
from sqlalchemy.exc import DBAPIError
from sqlalchemy.sql import Insert
from sqlalchemy.sql.expression import Executable, SelectBase

from cleveragents_tui.store.database import refusal, sqlite_begin

Values = Mapping[str, Any]
Row = tuple[Any, ...]
Processor = Callable[[Any], Any] | None


class Compiled:
    """One statement in one dialect's words, with what turns values into its parameters
    and the driver's rows into the values SQLAlchemy would give."""

    def __init__(self, statement: Executable, dialect: Dialect, keys: Sequence[str] | None):
        select = isinstance(statement, SelectBase)
        compiled = statement.compile(  # type: ignore[attr-defined]
            dialect=dialect, column_keys=keys, for_executemany=not select
        )
        self.sql: str = compiled.string
        self.positional = bool(dialect.positional)
        names = compiled.positiontup if self.positional else list(compiled.params)
        self.names: tuple[str, ...] = tuple(names or ())
        binds = compiled.binds
        self.constants = {
            name: value for name, value in compiled.params.items() if not binds[name].required
        }
        processors = [_bind(binds[name].type, dialect) for name in self.names]
        # the values in the parameters' order, then the few that need processing
        self._ordered = _getter(self.names)
        self._process = tuple((i, p) for i, p in enumerate(processors) if p is not None)
        columns = statement.selected_columns if isinstance(statement, SelectBase) else None
        self._dialect = dialect
        self._types = tuple(c.type for c in columns) if columns is not None else ()
        names = list(columns.keys()) if columns is not None else []
        self.row = namedtuple("Row", names, rename=True)  # type: ignore[misc]
        # each column's processor, once the driver has described the columns
        self.results: tuple[Processor, ...] | None = None
        self._plain = True  # no column needs one

    def params(self, values: Values) -> Any:
        """The driver's parameters for these values: a tuple (qmark) or a dict (pyformat)."""
        if self.constants:
            values = {**self.constants, **values}
        ordered = self._ordered(values)
        if self._process:
            ordered = list(ordered)
            for i, process in self._process:
                ordered[i] = process(ordered[i])
        if self.positional:
            return tuple(ordered)
        return dict(zip(self.names, ordered, strict=True))

    def described(self, cursor: Any) -> None:
        """Choose the columns' result processors, as SQLAlchemy does, with the type codes
        the driver gave for the cursor's result (once: they are the same at every execution;
        psycopg builds the description's column objects each time it is asked, ~0.1 ms for
        a preview's reads)."""
        if self.results is None:
            description = cursor.description
            dialect = self._dialect
            self.results = tuple(
                t.dialect_impl(dialect).result_processor(dialect, d[1])
                for t, d in zip(self._types, description, strict=True)
            )
            self._plain = not any(self.results)

    def named(self, row: Any) -> Any:
        """One of the driver's rows as SQLAlchemy's row would read: values, columns by name."""
        if self._plain:
            return self.row(*row)
        results = self.results
        assert results is not None
        return self.row(*(v if p is None else p(v) for p, v in zip(results, row, strict=True)))

    def rows(self, fetched: list[Any]) -> list[Row]:
        """The driver's rows as tuples of SQLAlchemy's values (after :meth:`described`)."""
        if self._plain:
            return [tuple(row) for row in fetched]
        results = self.results
        assert results is not None
        return [
            tuple(v if p is None else p(v) for p, v in zip(results, row, strict=True))
            for row in fetched
        ]


def _getter(names: Sequence[str]) -> Callable[[Values], Sequence[Any]]:
    """The values of ``names``, in that order, as a sequence (itemgetter gives a lone value
    for one name)."""
    if len(names) == 1:
        name = names[0]
        return lambda values: (values[name],)
    return itemgetter(*names) if names else (lambda _values: ())


def _bind(type_: Any, dialect: Dialect) -> Processor:
    """The processor that turns a value of ``type_`` into the driver's: SQLAlchemy's, or
    the one-call equivalent a type offers (UtcDateTime)."""
    fast = getattr(type_, "driver_bind_processor", None)
    if fast is not None:
        return cast(Processor, fast(dialect))
    return cast(Processor, type_.dialect_impl(dialect).bind_processor(dialect))


_COMPILED: dict[tuple[int, str, str, tuple[str, ...] | None], tuple[Executable, Compiled]] = {}


def compiled(statement: Executable, dialect: Dialect, values: Values) -> Compiled:
    """``statement`` (built once, at import or per dialect) compiled for ``dialect``; an
    INSERT once for each set of columns given."""
    keys = tuple(values) if isinstance(statement, Insert) else None
    key = (id(statement), dialect.name, dialect.driver, keys)
    found = _COMPILED.get(key)
    if found is not None and found[0] is statement:
        return found[1]
    made = Compiled(statement, dialect, keys)
    _COMPILED[key] = (statement, made)  # the statement is kept: its id stays its own
    return made


def heard(
    connection: Connection,
    cursor: Any,
    sql: str,
    params: Any,
    many: bool = False,
    statement: Executable | None = None,
    values: Any = None,
) -> None:
    """Tell the engine's listeners, as SQLAlchemy's execution would: ``before_execute``
    hears a Core statement with its values (``values``: a list of them, for ``many``),
    ``before_cursor_execute`` the SQL and the driver's parameters."""
    dispatch = connection.dispatch
    if statement is not None and dispatch.before_execute:
        if many:
            multiparams, single = values, {}
        else:
            multiparams, single = [], values
        for listener in dispatch.before_execute:
            listener(connection, statement, multiparams, single, {})
    if dispatch.before_cursor_execute:  # nobody listening: nothing to tell (most runs)
        for listener in dispatch.before_cursor_execute:
            listener(connection, cursor, sql, params, None, many)


class Driver:
    """One of the pool's connections (checked out by SQLAlchemy: its pool, its ping), used
    through the driver: statements and transactions, nothing else in between."""

    def __init__(self, engine: Engine, connection: Connection) -> None:
        self.engine = engine
        self._dialect = engine.dialect
        self._sqlite = self._dialect.name == "sqlite"
        self._connection = connection
        self._error: type[Exception] = self._dialect.loaded_dbapi.Error
        self._reading = False
        self._auto = False  # statements outside a transaction (see _autocommit)
        self._begin: str | None = None  # a writer's BEGIN, checked already (check_write)
        self._checked: str | None = None  # the same, checked once a recording (new_recording)
        self._listening = True  # anyone to tell of statements (see _tune_in)
        self._attach()
        # a held connection's first statement is its ping: sent again, once, on a new
        # connection when the server had dropped it (store/recording.py HeldConnections)
        self.retry_first = False

    def _attach(self) -> None:
        raw: Any = self._connection.connection.driver_connection
        self._raw = raw
        self._cursor: Any = raw.cursor()

    def idle(self) -> bool:
        """Usable for the next transaction: open, valid, in none."""
        connection = self._connection
        if connection.closed or connection.invalidated:
            return False
        if self._sqlite:
            return not self._raw.in_transaction
        return bool(self._raw.info.transaction_status == 0)  # psycopg's IDLE

    def close(self) -> None:
        """Back to the pool (which rolls back whatever was left open)."""
        self._connection.close()

    def begin(self, write: bool) -> None:
        """A transaction that writes (``write``) or only reads. A writer's takes the write
        lock up front on SQLite (BEGIN IMMEDIATE); on PostgreSQL psycopg begins it at its
        first statement. A read runs without one on both: each statement reads a snapshot
        of its own (SQLite's autocommit, PostgreSQL's READ COMMITTED), and no reader of a
        recording needs two statements to agree (its reads are a number and a parent's
        plan read together, and writes that only grow); BEGIN and its end bought two
        statements (two round trips on PostgreSQL; as a preview's store/reading.py)."""
        self._reading = not write
        self._tune_in()
        if self._reading:
            self._autocommit(True)
        elif self._sqlite:
            self._send(self._begin or sqlite_begin(self.engine, "IMMEDIATE"), ())
        self._begin = None

    def check_write(self) -> None:
        """Refuse a writer before its first statement as its BEGIN would (SQLite: a file
        moved or deleted while in use); ``begin(True)`` then sends that BEGIN. The file is
        checked at the first writer of a recording (:meth:`new_recording`), not again at
        its second: a ``stat`` each, ~1 µs warm and ~8 µs within a recording (issue 22)."""
        self._reading = False
        self._tune_in()
        if self._sqlite:
            if self._checked is None:
                self._checked = sqlite_begin(self.engine, "IMMEDIATE")
            self._begin = self._checked

    def new_recording(self) -> None:
        """The next writer checks the file again (a recording's first: ``HeldConnections``)."""
        self._checked = None

    def _tune_in(self) -> None:
        """Whether the engine's statement events have listeners, asked once a transaction
        (asking SQLAlchemy's event collections cost ~1 µs a statement, ten a recording): a
        listener added within a transaction hears from the next one on."""
        dispatch = self._connection.dispatch
        self._listening = bool(dispatch.before_execute or dispatch.before_cursor_execute)

    def alone(self, statement: Executable, values: Values) -> int:
        """One write as a transaction of its own (the database's autocommit: pysqlite sends
        no BEGIN on its own here, psycopg none in autocommit): what BEGIN, it and COMMIT
        did, in one statement. Heard as the statement it is; no ``commit`` event, as no
        COMMIT is sent. After :meth:`check_write`."""
        self._begin = None
        self._autocommit(True)
        try:
            return self.execute(statement, values)
        finally:
            self._autocommit(False)

    def _autocommit(self, on: bool) -> None:
        """PostgreSQL: statements outside a transaction (SQLite's are, outside BEGIN)."""
        self._auto = on
        if not self._sqlite:
            self._raw.autocommit = on

    def commit(self) -> None:
        self._end(True)

    def rollback(self) -> None:
        self._end(False)

    def execute(self, statement: Executable, values: Values) -> int:
        """Run a statement that writes; its row count."""
        self._writing()
        found = compiled(statement, self._dialect, values)
        self._send(found.sql, found.params(values), statement=statement, values=values)
        return int(self._cursor.rowcount)

    def executemany(self, statement: Executable, rows: Sequence[Values]) -> None:
        """One statement for several rows; a lone row as a plain execution (psycopg runs an
        executemany as a pipeline of its own: twice the time of one execute, per row the
        recording stores most often)."""
        if len(rows) == 1:
            self.execute(statement, rows[0])
            return
        self._writing()
        found = compiled(statement, self._dialect, rows[0])
        params = [found.params(values) for values in rows]
        self._send(found.sql, params, many=True, statement=statement, values=rows)

    def fetch(self, statement: Executable, values: Values) -> list[Row]:
        found = compiled(statement, self._dialect, values)
        self._send(found.sql, found.params(values), statement=statement, values=values)
        found.described(self._cursor)
        return found.rows(self._cursor.fetchall())

    def scalar(self, statement: Executable, values: Values) -> Any:
        rows = self.fetch(statement, values)
        return rows[0][0] if rows else None

    def _writing(self) -> None:
        if self._reading:
            raise ValueError("this transaction only reads: begin it with write=True to write")

    def _end(self, commit: bool) -> None:
        """COMMIT or ROLLBACK, heard through the engine's ``commit`` and ``rollback`` events
        as SQLAlchemy's own ends are (a replay of the recording needs to know which of its
        transactions were kept; a BEGIN is heard as the statement it is, never as the
        ``begin`` event, whose store listener would send another)."""
        if self._reading:  # nothing was begun: nothing to end
            self._autocommit(False)
            return
        dispatch = self._connection.dispatch
        for listener in dispatch.commit if commit else dispatch.rollback:
            listener(self._connection)
        try:
            if commit:
                self._raw.commit()
            else:
                self._raw.rollback()
        except self._error as exc:
            raise self._failed(exc, "COMMIT" if commit else "ROLLBACK", None) from exc

    def _send(
        self,
        sql: str,
        params: Any,
        many: bool = False,
        statement: Executable | None = None,
        values: Any = None,
    ) -> None:
        if self._listening:
            heard(self._connection, self._cursor, sql, params, many, statement, values)
        retry, self.retry_first = self.retry_first, False
        try:
            if many:
                self._cursor.executemany(sql, params)
            else:
                self._cursor.execute(sql, params)
        except self._error as exc:
            failed = self._failed(exc, sql, params)
            if not (retry and self._connection.invalidated):
                raise failed from exc
            self._attach()  # a new connection (SQLAlchemy's), in no transaction yet
            self._autocommit(self._auto)
            self._send(sql, params, many, statement, values)

    def _failed(self, exc: Exception, sql: str, params: Any) -> Exception:
        """As SQLAlchemy's execution layer would: invalidate a connection the server
        dropped, wrap the driver's error, and let the store name the refusals."""
        if self._dialect.is_disconnect(exc, self._raw, self._cursor):  # type: ignore[arg-type]
            self._connection.invalidate(exc)
        wrapped = DBAPIError.instance(sql, params, exc, self._error, dialect=self._dialect)
        return refusal(exc, self.engine) or wrapped
