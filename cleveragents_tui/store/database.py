"""Database URLs to SQLAlchemy engines: the embedded SQLite default and PostgreSQL for teams."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError

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


def default_database_path() -> Path:
    """The embedded database file: ``agents.db`` in the user data directory."""
    from platformdirs import user_data_path

    return user_data_path("cleveragents", appauthor=False) / "agents.db"


def normalise_url(raw: str | None) -> URL:
    """Turn what a user typed into a SQLAlchemy URL.

    A plain path means a SQLite file; ``postgresql://`` and ``postgres://`` select psycopg 3.
    """
    if raw is None or not raw.strip():
        path = default_database_path()
        path.parent.mkdir(parents=True, exist_ok=True)
        return URL.create("sqlite", database=str(path))
    text = raw.strip()
    if "://" not in text:
        return URL.create("sqlite", database=str(Path(text).expanduser().resolve()))
    for prefix in ("postgres://", "postgresql://"):
        if text.startswith(prefix):
            text = "postgresql+psycopg://" + text[len(prefix) :]
    try:
        url = make_url(text)
    except ArgumentError as exc:
        raise DatabaseUnavailableError(
            f"database URL {raw!r} cannot be parsed",
            "use a file path, sqlite:///PATH or postgresql://USER@HOST/DB",
        ) from exc
    if url.get_backend_name() not in ("sqlite", "postgresql"):
        raise DatabaseUnavailableError(
            f"database URL {url.render_as_string()!r} is not supported",
            "use SQLite (a file path) or PostgreSQL (postgresql://...)",
        )
    return url


def make_engine(url: URL) -> Engine:
    """An engine with the settings the store relies on for each backend."""
    if url.get_backend_name() == "sqlite":
        database = url.database or ""
        if database and database != ":memory:":
            parent = Path(database).parent
            if not parent.is_dir():
                raise DatabaseUnavailableError(
                    f"cannot create the database {database}: folder {parent} does not exist",
                    "create the folder or pass another --db path",
                )
        engine = create_engine(url, connect_args={"timeout": SQLITE_BUSY_TIMEOUT_MS / 1000})
        _configure_sqlite(engine)
    else:
        engine = create_engine(url, pool_pre_ping=True)
    event.listen(engine, "handle_error", _translate_refusals)
    return engine


APPEND_ONLY_MARKER = "decisions are append-only"
_LOCKED_MARKERS = ("could not obtain lock", "database is locked")


def _translate_refusals(context: Any) -> Exception | None:
    """Turn the database's refusals into the domain's errors, whatever code path hit them.

    The append-only triggers (migration 0001) raise with APPEND_ONLY_MARKER; lock timeouts
    mean another process holds the plan.
    """
    message = str(context.original_exception)
    if APPEND_ONLY_MARKER in message:
        return ImmutableRecordError(
            message.strip().splitlines()[0],
            "corrections add new decisions; they never delete or edit old ones",
        )
    if any(marker in message for marker in _LOCKED_MARKERS):
        return ConcurrentChangeError(
            "another process is changing this database right now", "wait for it to finish and retry"
        )
    return None


def _configure_sqlite(engine: Engine) -> None:
    """WAL, foreign keys, busy timeout, and SQLAlchemy's documented pysqlite transaction fix.

    pysqlite's own transaction handling breaks SAVEPOINT; we turn it off and emit BEGIN
    ourselves (IMMEDIATE for writers).
    """

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA foreign_keys = ON")
        cursor.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}")
        cursor.execute("PRAGMA journal_mode = WAL")
        cursor.execute("PRAGMA synchronous = NORMAL")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Any) -> None:
        mode = connection.get_execution_options().get(SQLITE_BEGIN, "DEFERRED")
        if mode not in ("DEFERRED", "IMMEDIATE"):
            raise ValueError(f"unknown SQLite begin mode {mode!r}")
        connection.exec_driver_sql(f"BEGIN {mode}")
