"""Database URLs to SQLAlchemy engines: the embedded SQLite default and PostgreSQL for teams."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any
from weakref import WeakKeyDictionary

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import URL

# Re-exported: the store's callers open databases by what a user typed.
from cleveragents_tui.database_url import default_database_path as default_database_path
from cleveragents_tui.database_url import normalise_url as normalise_url
from cleveragents_tui.domain.display import shorten
from cleveragents_tui.domain.errors import (
    ConcurrentChangeError,
    DatabaseUnavailableError,
    ImmutableRecordError,
)

ENV_VAR = "AGENTS_DATABASE_URL"
SQLITE_BUSY_TIMEOUT_MS = 10_000
# Execution option naming how a SQLite transaction begins: "IMMEDIATE" takes the write lock
# up front, so two writers queue on busy_timeout instead of failing on lock upgrade.
SQLITE_BEGIN = "sqlite_begin"
# SQLITE_BEGIN's value on a connection whose transaction was begun on the driver's cursor
# (store/reading.py): a session opened on it joins that transaction, sending no BEGIN
SQLITE_BEGUN = "BEGUN"


def sqlite_file(url: URL) -> str:
    """The file a SQLite URL names (``sqlite:///file:PATH?mode=ro&uri=true`` too)."""
    database = url.database or ""
    return database.removeprefix("file:") if url.query.get("uri") == "true" else database


def in_memory_refusal(raw: str) -> DatabaseUnavailableError:
    """The store keeps the decision history: a database that vanishes at exit is refused."""
    return DatabaseUnavailableError(
        f"database {shorten(raw)!r} is an in-memory database: nothing would be kept "
        "after the command ends",
        "pass a file path, e.g. --db ./agents.db (or leave --db out for the default)",
    )


def in_memory(url: URL) -> bool:
    """``sqlite://``, ``sqlite:///:memory:``, ``file::memory:`` or ``?mode=memory``."""
    database = url.database or ""
    return (
        database in ("", ":memory:")
        or database.startswith("file::memory:")
        or "mode=memory" in database
        or url.query.get("mode") == "memory"
    )


def make_engine(url: URL) -> Engine:
    """An engine with the settings the store relies on for each backend."""
    if url.get_backend_name() == "sqlite":
        database = sqlite_file(url)
        if database:
            parent = Path(database).parent
            if not parent.is_dir():
                raise DatabaseUnavailableError(
                    f"cannot create the database {database}: folder {parent} does not exist",
                    "create the folder or pass another --db path",
                )
        engine = create_engine(url, connect_args={"timeout": SQLITE_BUSY_TIMEOUT_MS / 1000})
        _configure_sqlite(engine)
    else:
        engine = create_engine(url, pool_pre_ping=True, connect_args=_postgres_options(url))
    event.listen(engine, "handle_error", _translate_refusals)
    return engine


def _postgres_options(url: URL) -> dict[str, str]:
    """The connection's ``options``: PostgreSQL's JIT off, then any the URL gives.

    The URL's come last so that ``options=-c jit=on`` turns JIT back on (the last ``-c``
    of a setting wins).

    Every statement of the store is a few index lookups; JIT is chosen by the planner's
    cost estimate and compiles anew at each execution. On tables not yet analysed (a plan
    just bulk-recorded) the preview's affected-subtree CTE was estimated past
    ``jit_above_cost`` and spent ~30 ms compiling a 9 ms query (docs/benchmarks.md, issue 22).
    """
    given = url.query.get("options")
    parts = [given] if isinstance(given, str) else list(given or ())
    return {"options": " ".join(["-c jit=off", *parts])}


APPEND_ONLY_MARKER = "decisions are append-only"
_LOCKED_MARKERS = ("could not obtain lock", "database is locked")


def _translate_refusals(context: Any) -> Exception | None:
    return refusal(context.original_exception, context.engine)


def refusal(original: BaseException, engine: Engine | None) -> Exception | None:
    """Turn the database's refusals into the domain's errors, whatever code path hit them
    (SQLAlchemy's ``handle_error``, or a statement sent on the driver: store/driver.py).

    The append-only triggers (migration 0001) raise with APPEND_ONLY_MARKER; lock timeouts
    mean another process holds the plan.
    """
    message = str(original)
    if APPEND_ONLY_MARKER in message:
        return ImmutableRecordError(
            message.strip().splitlines()[0],
            "corrections add new decisions; they never delete or edit old ones",
        )
    if any(marker in message for marker in _LOCKED_MARKERS):
        return ConcurrentChangeError(
            "another process is changing this database right now", "wait for it to finish and retry"
        )
    if engine is not None and engine.url.get_backend_name() == "sqlite":
        return sqlite_environment_error(message, sqlite_file(engine.url))
    return None


def sqlite_environment_error(message: str, database: str) -> DatabaseUnavailableError | None:
    """A SQLite failure that the environment caused, not the command, as one line that
    names the fix: a read-only file or folder, a full disk, a file that vanished in use."""
    name = shorten(database, 200)
    if "database or disk is full" in message:
        return DatabaseUnavailableError(
            f"the disk holding the database {name} is full",
            "free some space, then run `agents doctor`",
        )
    if "readonly database" in message or "read-only" in message:
        if database and not Path(database).exists():  # SQLITE_READONLY_DBMOVED
            return DatabaseUnavailableError(
                f"the database {name} was moved or deleted while in use",
                "put it back, or pass --db with its new path",
            )
        return DatabaseUnavailableError(
            f"the database {name} is read-only",
            "make the file and its folder writable, or pass another --db",
        )
    if "unable to open database file" in message or "disk I/O error" in message:
        return DatabaseUnavailableError(
            f"cannot read or write the database {name}",
            "check that the file and its folder exist and are readable and writable",
        )
    return None


SQLITE_CACHE_KIB = 16_384  # each connection's page cache, at most


def _configure_sqlite(engine: Engine) -> None:
    """WAL, foreign keys, busy timeout, the page cache, and SQLAlchemy's documented pysqlite
    transaction fix.

    pysqlite's own transaction handling breaks SAVEPOINT; we turn it off and emit BEGIN
    ourselves (IMMEDIATE for writers).
    """

    path = sqlite_file(engine.url)
    opened: list[tuple[int, int] | None] = []  # the file the engine's first connection opened

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA foreign_keys = ON")
        cursor.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}")
        cursor.execute("PRAGMA journal_mode = WAL")
        cursor.execute("PRAGMA synchronous = NORMAL")
        # SQLite's default page cache is 2 MiB: a correction's preview of a 10,000-decision
        # plan (its later writers and affected calls spread over the tables) reads more,
        # and each miss costs a read from the OS, so half its SQL time was misses (issue
        # 22). The cache grows only as pages are read.
        cursor.execute(f"PRAGMA cache_size = -{SQLITE_CACHE_KIB}")
        cursor.close()
        if not opened:
            opened.append(_file_identity(path))

    def begin(mode: str) -> str:
        if mode not in ("DEFERRED", "IMMEDIATE"):
            raise ValueError(f"unknown SQLite begin mode {mode!r}")
        if mode == "IMMEDIATE" and opened and opened[0] != _file_identity(path):
            # SQLite goes on writing to a deleted file's inode: every write would be lost
            raise DatabaseUnavailableError(
                f"the database {shorten(path, 200)} was moved or deleted while in use",
                "put it back, or pass --db with its new path; this change was not recorded",
            )
        return f"BEGIN {mode}"

    _SQLITE_BEGINS[engine] = begin

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Any) -> None:
        mode = connection.get_execution_options().get(SQLITE_BEGIN, "DEFERRED")
        if mode != SQLITE_BEGUN:
            connection.exec_driver_sql(begin(mode))


_SQLITE_BEGINS: WeakKeyDictionary[Engine, Callable[[str], str]] = WeakKeyDictionary()


def sqlite_begin(engine: Engine, mode: str) -> str:
    """The BEGIN statement of a transaction in ``mode`` (DEFERRED or IMMEDIATE) on this
    engine's SQLite file, refused when the file was moved or deleted since it was opened."""
    return _SQLITE_BEGINS[engine](mode)


def _file_identity(path: str) -> tuple[int, int] | None:
    """Which file ``path`` is now (device and inode), None when there is none."""
    try:
        found = os.stat(path)
    except OSError:
        return None
    return (found.st_dev, found.st_ino)
