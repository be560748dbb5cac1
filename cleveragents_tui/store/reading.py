"""A read of one snapshot of the store on one of the pool's connections, without the ORM's
session (a correction's preview, issue 22).

A unit of work's session costs ~0.1 ms to open, begin and end on SQLite (its transaction
object, the begin event's statement through SQLAlchemy, two rollbacks) — half a recursive
CTE of a small affected subtree, and as much as the preview's own reads once they run on
the driver's cursor (store/driver_reads.py). Here the transaction is the driver's: on
SQLite ``BEGIN DEFERRED`` on its cursor (heard, as every statement) — the reads are one
snapshot — and its ROLLBACK; on PostgreSQL no transaction (READ COMMITTED gives each
statement its own snapshot anyway: BEGIN and ROLLBACK bought only a round trip each). A
session is opened on the same connection, in the same transaction, only when a read needs
the ORM (a repository).

On PostgreSQL the connection is the store's reading one (:class:`HeldReading`), kept from
one preview to the next and used for nothing else: it never ends a transaction with
ROLLBACK, at which psycopg drops every prepared statement of the connection (and its counts
towards preparing one), so the preview's statements stay prepared from one preview to the
next — pooled, they were parsed and planned at every preview, as the pool's other users
(units of work, SQLAlchemy's own connections) end theirs with ROLLBACK. On SQLite a pooled
connection reads as before: one held apart never writes, so every commit of another
connection emptied its page cache, and a preview after a write through the pool read the
plan's pages again (docs/benchmarks.md, *The cold preview after a write*).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from functools import cached_property
from typing import Any, Concatenate, ParamSpec, TypeVar

from sqlalchemy import Engine
from sqlalchemy.engine import Connection
from sqlalchemy.orm import Session

from cleveragents_tui.domain.ids import ULID_LENGTH, parse_ulid
from cleveragents_tui.store.database import SQLITE_BEGIN, SQLITE_BEGUN, sqlite_begin
from cleveragents_tui.store.driver import heard
from cleveragents_tui.store.driver_reads import Reads
from cleveragents_tui.store.profile_repository import AutomationProfileRepository
from cleveragents_tui.store.repositories import DecisionRepository, PlanRepository

P = ParamSpec("P")
R = TypeVar("R")


class HeldReading:
    """One idle connection kept for :class:`Reading` from one to the next (``Store`` holds
    this; :meth:`close` with the store). A reading made while another holds it checks one
    out of the pool, as before, and only one goes back to be held. On PostgreSQL the held
    connection is pinged when taken, as the pool pings at every checkout (a server that
    dropped it: a new one from the pool)."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._lock = threading.Lock()
        self._idle: Connection | None = None

    def take(self) -> Connection:
        with self._lock:
            connection, self._idle = self._idle, None
        if connection is not None and self._alive(connection):
            return connection
        if connection is not None:
            connection.close()
        return self._engine.connect()

    def _alive(self, connection: Connection) -> bool:
        if connection.closed or connection.invalidated:
            return False
        dialect = self._engine.dialect
        if dialect.name == "sqlite":
            return True
        raw: Any = connection.connection.dbapi_connection
        if dialect._do_ping_w_event(raw):  # raises nothing: False for a dropped connection
            return True
        connection.invalidate()
        return False

    def give_back(self, connection: Connection) -> None:
        if not (connection.closed or connection.invalidated or connection.in_transaction()):
            with self._lock:
                if self._idle is None:
                    self._idle = connection
                    return
        connection.close()  # back to the pool: one is held already, or it is unusable

    def close(self) -> None:
        """Return the held connection to the pool (before the engine is disposed)."""
        with self._lock:
            connection, self._idle = self._idle, None
        if connection is not None:
            connection.close()


class Reading:
    """Use as a context manager; it only reads. ``run`` calls a read of ``store/`` taking
    :class:`Reads`; the repositories a preview may need are opened on first use."""

    def __init__(self, engine: Engine, held: HeldReading | None = None) -> None:
        self._engine = engine
        self._held = held
        self._sqlite = engine.dialect.name == "sqlite"

    def __enter__(self) -> Reading:
        connection = self._held.take() if self._held is not None else self._engine.connect()
        self._connection = connection
        raw: Any = connection.connection.dbapi_connection
        self._raw = raw
        try:
            if self._sqlite:
                begin = sqlite_begin(self._engine, "DEFERRED")
                cursor = raw.cursor()
                try:
                    heard(connection, cursor, begin, ())
                    cursor.execute(begin)
                finally:
                    cursor.close()
            else:
                raw.autocommit = True
        except BaseException:
            connection.close()
            raise
        return self

    def connection(self) -> Connection:
        return self._connection

    def get_bind(self) -> Engine:
        return self._engine

    def run(
        self, query: Callable[Concatenate[Reads, P], R], *args: P.args, **kwargs: P.kwargs
    ) -> R:
        """Call a read of ``store/`` (``f(reads, ...)``) in this snapshot."""
        return query(self, *args, **kwargs)

    def resolve_decision(self, ref: str) -> str:
        """A decision's id from its ULID or a unique prefix, as the repository resolves it
        (a whole ULID needs no statement, nor the session)."""
        whole = ref.strip().upper()
        if len(whole) == ULID_LENGTH:
            return parse_ulid(whole, "decision")
        return self.decisions.resolve(ref)

    @cached_property
    def _session(self) -> Session:
        # it joins the transaction begun on the driver: its begin sends nothing
        connection = self._connection.execution_options(**{SQLITE_BEGIN: SQLITE_BEGUN})
        return Session(bind=connection, expire_on_commit=False, autoflush=False)

    @cached_property
    def decisions(self) -> DecisionRepository:
        return DecisionRepository(self._session)

    @cached_property
    def plans(self) -> PlanRepository:
        return PlanRepository(self._session)

    @cached_property
    def automation_profiles(self) -> AutomationProfileRepository:
        return AutomationProfileRepository(self._session)

    def __exit__(self, *exc_info: object) -> None:
        ended = False
        try:
            if "_session" in self.__dict__:
                self._session.close()  # ends the transaction it joined
            if self._sqlite:
                self._raw.rollback()  # nothing was written: ends the snapshot
            else:
                self._raw.autocommit = False
            ended = True
        finally:
            if ended and self._held is not None:
                self._held.give_back(self._connection)
            else:
                self._connection.close()
