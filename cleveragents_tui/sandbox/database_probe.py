"""Can a database resource be reached? ``SELECT 1`` on its own connection, changing
nothing: ``agents resource add`` and the pre-flight check ask before a plan uses it."""

from __future__ import annotations

from pathlib import Path

from cleveragents_tui.domain.errors import UserError

CONNECT_TIMEOUT_SECONDS = 10


def postgres_problem(location: str) -> str | None:
    """Connect and run ``SELECT 1``, giving up after CONNECT_TIMEOUT_SECONDS: a host that
    drops packets must not hang ``resource add``. Nothing is changed."""
    from sqlalchemy import create_engine, text
    from sqlalchemy.exc import SQLAlchemyError
    from sqlalchemy.pool import NullPool

    from cleveragents_tui.database_url import normalise_url

    url = normalise_url(location)
    engine = create_engine(
        url, poolclass=NullPool, connect_args={"connect_timeout": CONNECT_TIMEOUT_SECONDS}
    )
    try:
        with engine.connect() as connection:
            connection.execute(text("SELECT 1"))
    except SQLAlchemyError as exc:
        reason = str(getattr(exc, "orig", None) or exc).strip().splitlines()[0]
        return f"cannot connect to the database {url.render_as_string()} ({reason})"
    finally:
        engine.dispose()
    return None


def connect_problem(location: str) -> str | None:
    """Connect read-only and run ``SELECT 1``; never change the database (no WAL switch)."""
    import sqlite3

    from sqlalchemy import create_engine, text
    from sqlalchemy.exc import SQLAlchemyError
    from sqlalchemy.pool import NullPool

    from cleveragents_tui.database_url import normalise_url

    try:
        url = normalise_url(location)
        if url.get_backend_name() == "sqlite":
            path = Path(url.database or "")
            if not path.is_file():
                return f"database file {path} does not exist"
            with sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True) as connection:
                connection.execute("SELECT 1")
            return None
        engine = create_engine(url, poolclass=NullPool)
        try:
            with engine.connect() as connection:
                connection.execute(text("SELECT 1"))
        finally:
            engine.dispose()
    except (SQLAlchemyError, sqlite3.Error, UserError) as exc:
        return f"cannot connect to the database ({str(exc).splitlines()[0]})"
    return None
