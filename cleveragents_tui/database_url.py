"""What a user typed as a database into a SQLAlchemy URL.

Outside the layers (like failpoints.py) because both the store and the transaction
sandbox, which must not import the store, read the same locations.
"""

from __future__ import annotations

from pathlib import Path

from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError

from cleveragents_tui.domain.errors import DatabaseUnavailableError


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
    if text == ":memory:":  # not a file named ":memory:" in the current folder
        return URL.create("sqlite")
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
