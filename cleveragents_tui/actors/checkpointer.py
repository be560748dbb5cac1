"""LangGraph checkpoint savers: SQLite beside the embedded store, PostgreSQL with a team store.

Serialisation is strict (no pickle fallback): actor state holds plain JSON values only.
For a SQLite store ``agents.db`` the actor checkpoints live in ``agents.actors.db`` next to
it, so the store's schema stays Alembic's alone; with PostgreSQL they share the database
(LangGraph's tables do not clash with ours).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.checkpoint.sqlite import SqliteSaver
from sqlalchemy.engine import URL

from cleveragents_tui import failpoints


def strict_serde() -> JsonPlusSerializer:
    return JsonPlusSerializer(pickle_fallback=False)


def _with_failpoint(saver: BaseCheckpointSaver[str]) -> BaseCheckpointSaver[str]:
    """Every checkpoint LangGraph writes goes through ``put``: the ``saver.put`` failpoint."""
    put = saver.put

    def put_or_fail(*args: Any, **kwargs: Any) -> RunnableConfig:
        failpoints.hit("saver.put")
        return put(*args, **kwargs)

    saver.put = put_or_fail  # type: ignore[method-assign]
    return saver


def actor_database_path(store_database: str) -> Path:
    path = Path(store_database)
    return path.with_name(f"{path.stem}.actors{path.suffix or '.db'}")


@contextmanager
def open_checkpointer(store_url: URL) -> Iterator[BaseCheckpointSaver[str]]:
    """A saver for the store at ``store_url``, closed on exit."""
    if store_url.get_backend_name() == "sqlite":
        connection = sqlite3.connect(
            actor_database_path(store_url.database or "agents.db"),
            check_same_thread=False,
            timeout=10,
        )
        connection.execute("PRAGMA journal_mode = WAL")
        try:
            saver = SqliteSaver(connection, serde=strict_serde())
            saver.setup()
            yield _with_failpoint(saver)
        finally:
            connection.close()
        return
    from langgraph.checkpoint.postgres import PostgresSaver
    from psycopg import Connection
    from psycopg.rows import dict_row

    conninfo = store_url.set(drivername="postgresql").render_as_string(hide_password=False)
    with Connection.connect(
        conninfo, autocommit=True, prepare_threshold=0, row_factory=dict_row
    ) as conn:
        saver_pg = PostgresSaver(conn, serde=strict_serde())
        saver_pg.setup()
        yield _with_failpoint(saver_pg)
