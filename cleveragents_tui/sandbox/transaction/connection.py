"""The savepoint sandbox's own connection to the target database, and what the driver says.

The engine factory (SQLite: ``BEGIN IMMEDIATE``, confined by an authorizer; PostgreSQL: a
named application), the statements a tool may not run, and how a failed statement reads.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.engine import URL, RootTransaction
from sqlalchemy.pool import NullPool

from cleveragents_tui.database_url import normalise_url
from cleveragents_tui.domain.errors import UserError
from cleveragents_tui.domain.resource import Resource
from cleveragents_tui.sandbox.base import SandboxError
from cleveragents_tui.sandbox.sql_confinement import confine_sqlite

SQLITE_BUSY_TIMEOUT_S: Final = 10.0
# psycopg.pq.TransactionStatus values (not imported: SQLite users need not load psycopg).
PG_IDLE, PG_INERROR, PG_UNKNOWN = 0, 3, 4

# A statement that would end or restructure the sandbox's transaction. Tools may not run
# these: checkpoints, apply and discard are the sandbox's job. Leading comments are skipped.
TRANSACTION_CONTROL = re.compile(
    r"^\s*(?:(?:--[^\n]*(?:\n|$)|/\*.*?\*/)\s*)*"
    r"(BEGIN|COMMIT|END|ROLLBACK|SAVEPOINT|RELEASE|ABORT|START\s+TRANSACTION|PREPARE\s+TRANSACTION)\b",
    re.IGNORECASE | re.DOTALL,
)


@dataclass
class Live:
    engine: Engine
    connection: Connection
    transaction: RootTransaction


# Connections a forked child inherited from its parent: kept, never used nor closed there.
FORKED: list[Live] = []


def target_url(resource: Resource) -> URL:
    try:
        url = normalise_url(resource.location)
    except UserError as exc:
        raise SandboxError(f"resource {resource.resource_id}: {exc.problem}", exc.fix) from exc
    if url.get_backend_name() == "sqlite":
        database = url.database or ""
        if not database or database == ":memory:" or database.startswith("file:"):
            raise SandboxError(
                f"resource {resource.resource_id}: {resource.location!r} is not a database file",
                "set the resource location to a SQLite file path or a postgresql:// URL",
            )
        if not Path(database).is_file():
            raise SandboxError(
                f"resource {resource.resource_id}: database file {database} does not exist",
                "create the database first or fix the resource location",
            )
    return url


def target_of_kind(resource: Resource, backend: str, kind: str, fix: str) -> URL:
    """:func:`target_url`, refused unless it names a ``backend`` database (``kind``)."""
    url = target_url(resource)
    if url.get_backend_name() != backend or not url.database:
        raise SandboxError(f"resource {resource.resource_id} is not a {kind}", fix)
    return url


def display(url: URL) -> str:
    return url.render_as_string(hide_password=True)


def first_line(exc: BaseException) -> str:
    original = getattr(exc, "orig", None) or exc
    lines = str(original).strip().splitlines()
    return lines[0] if lines else type(original).__name__


def _sqlite_on_connect(dbapi_connection: Any, _record: Any) -> None:
    # SQLAlchemy's documented pysqlite workaround: stop the driver from issuing its own
    # BEGIN/COMMIT around statements (which breaks SAVEPOINT); we emit BEGIN ourselves.
    dbapi_connection.isolation_level = None
    confine_sqlite(dbapi_connection)  # this file only: no ATTACH, file pragmas, extensions


def _sqlite_on_begin(connection: Connection) -> None:
    connection.exec_driver_sql("BEGIN IMMEDIATE")


def make_engine(url: URL, plan_id: str) -> Engine:
    """A connection factory for the target; NullPool, so closing really ends the connection."""
    if url.get_backend_name() == "sqlite":
        engine = create_engine(
            url,
            poolclass=NullPool,
            connect_args={"timeout": SQLITE_BUSY_TIMEOUT_S, "check_same_thread": False},
        )
        event.listen(engine, "connect", _sqlite_on_connect)
        event.listen(engine, "begin", _sqlite_on_begin)
        return engine
    application_name = f"cleveragents sandbox {plan_id}"[:63]
    return create_engine(
        url, poolclass=NullPool, connect_args={"application_name": application_name}
    )
