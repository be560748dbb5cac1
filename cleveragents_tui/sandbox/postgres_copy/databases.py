"""The PostgreSQL copy sandbox's databases on the target's server: named, copied, dropped.

:class:`CopyDatabases` makes, finds and drops the ``agents_<prefix>_<what>`` databases from
the server's maintenance database, settles a rollback a crash cut short, and reads a copy's
rows; the Sandbox protocol (:mod:`.sandbox`) builds on it.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator, Sequence
from typing import Any, Final

import psycopg
from psycopg import sql
from sqlalchemy import Engine, create_engine
from sqlalchemy.engine import URL
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.pool import NullPool

from cleveragents_tui.sandbox.base import CheckpointMissingError, SandboxError
from cleveragents_tui.sandbox.copy_sandbox import CopySandbox
from cleveragents_tui.sandbox.postgres_copy.state import LOCK_FILE_NAME, STATE_FILE_NAME, State
from cleveragents_tui.sandbox.safety import check_savepoint_name
from cleveragents_tui.sandbox.transaction.connection import first_line
from cleveragents_tui.sandbox.transaction.snapshots import (
    PG_TABLES,
    Snapshot,
    Table,
    key_rows,
    path_part,
)

log = logging.getLogger(__name__)

_MAINTENANCE: Final = ("postgres", "template1")


def conninfo(url: URL, database: str) -> str:
    """A libpq URI for ``database`` on the target's server, with the target's login."""
    return url.set(drivername="postgresql", database=database).render_as_string(hide_password=False)


def _snapshot(url: URL, database: str, max_rows: int) -> Snapshot | None:
    """Every user table's rows of ``database`` keyed as ``transaction_rollback`` keys them;
    None above ``max_rows`` rows."""
    engine = create_engine(url.set(database=database), poolclass=NullPool)
    try:
        with engine.connect() as connection:
            result: Snapshot = {}
            remaining = max_rows
            for schema, table, is_default, pk in connection.execute(PG_TABLES).all():
                path = path_part(table) if is_default else f"{path_part(schema)}.{path_part(table)}"
                query = sql.SQL("SELECT * FROM {}").format(sql.Identifier(schema, table))
                raw: Any = connection.connection.dbapi_connection
                rows_result = connection.exec_driver_sql(query.as_string(raw))
                columns = tuple(rows_result.keys())
                keyed = key_rows(rows_result, [columns.index(c) for c in pk], remaining)
                if keyed is None:
                    return None
                rows, remaining = keyed
                result[path] = Table(columns, rows)
            return dict(sorted(result.items()))
    finally:
        engine.dispose()


class CopyDatabases(CopySandbox[State, URL]):
    """The databases of one PostgreSQL copy sandbox, and its state (see the package docstring)."""

    _prefix: str | None = None  # the databases' (the state file's), once known

    @property
    def dialect(self) -> str:
        return "postgresql"

    # -- databases and locking -------------------------------------------------------------

    @staticmethod
    def database(prefix: str, what: str) -> str:
        """The name of one of the sandbox's databases (``what``: base, work, next, sp_<hex>)."""
        return f"agents_{prefix}_{what}"

    def _name(self, state: State, what: str) -> str:
        return self.database(state.prefix, what)

    @contextlib.contextmanager
    def _admin(self) -> Iterator[psycopg.Connection[tuple[Any, ...]]]:
        """An autocommit connection to the server's maintenance database, for CREATE and
        DROP DATABASE (which cannot run while connected to the database they copy or drop)."""
        errors = []
        for name in _MAINTENANCE:
            try:
                connection = psycopg.connect(conninfo(self._target, name), autocommit=True)
            except psycopg.Error as exc:
                errors.append(first_line(exc))
                continue
            try:
                yield connection
            finally:
                connection.close()
            return
        raise SandboxError(
            f"cannot reach the server of {self._resource.resource_id} to copy its database: "
            f"{'; '.join(errors)}",
            "let the resource's login connect to the postgres (or template1) database",
        )

    @staticmethod
    def _existing(admin: psycopg.Connection[tuple[Any, ...]], names: Sequence[str]) -> set[str]:
        found = admin.execute(
            "SELECT datname FROM pg_database WHERE datname = ANY(%s)", (list(names),)
        ).fetchall()
        return {str(row[0]) for row in found}

    @staticmethod
    def _copy(admin: psycopg.Connection[tuple[Any, ...]], source: str, copy: str) -> None:
        admin.execute(
            sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
                sql.Identifier(copy), sql.Identifier(source)
            )
        )

    @staticmethod
    def _drop(admin: psycopg.Connection[tuple[Any, ...]], name: str) -> None:
        admin.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )

    def _settle(self, state: State) -> None:
        """Finish or undo a rollback a crash interrupted (``next`` left behind)."""
        if not state.replacing:
            return
        work, following = self._name(state, "work"), self._name(state, "next")
        with self._admin() as admin:
            present = self._existing(admin, [work, following])
            if following not in present:
                return
            if work in present:  # the old rows are still there: the rollback never happened
                self._drop(admin, following)
            else:
                admin.execute(
                    sql.SQL("ALTER DATABASE {} RENAME TO {}").format(
                        sql.Identifier(following), sql.Identifier(work)
                    )
                )
        state.replacing = False
        self._save(state)

    STATE_FILE_NAME = STATE_FILE_NAME
    LOCK_FILE_NAME = LOCK_FILE_NAME

    def _load_state(self) -> State | None:
        return State.load(self._root / STATE_FILE_NAME, self._plan_id)

    def _opened(self, state: State) -> None:
        self._prefix = state.prefix

    def _failed(self, doing: str, exc: BaseException) -> SandboxError:
        return SandboxError(
            f"cannot {doing} the sandbox of {self._resource.resource_id}: {first_line(exc)}",
            "check that the database server is reachable, then retry",
        )

    def _engine_for_work(self, state: State) -> Engine:
        """Connections to the working copy, one per statement: none stays open between
        operations, so a checkpoint or rollback may copy or replace the database."""
        if self._engine is None:
            application_name = f"cleveragents sandbox {self._plan_id}"[:63]
            self._engine = create_engine(
                self._target.set(database=self._name(state, "work")),
                poolclass=NullPool,
                connect_args={"application_name": application_name},
            )
        return self._engine

    def _rows(self, database: str, what: str) -> Snapshot:
        try:
            taken = _snapshot(self._target, database, self._max_rows)
        except SQLAlchemyError as exc:
            raise SandboxError(
                f"cannot read the rows of {self._resource.resource_id} at {what}: "
                f"{first_line(exc)}",
                "check that the database server is reachable",
            ) from exc
        if taken is None:
            raise SandboxError(
                f"cannot list the rows of {self._resource.resource_id} at {what}: more than "
                f"{self._max_rows} rows",
                f"compare the databases {database} and the target with psql",
            )
        return taken

    def _rows_at(self, state: State, ref: str) -> Snapshot:
        if check_savepoint_name(ref) not in state.checkpoints:
            raise CheckpointMissingError(
                f"checkpoint {ref} of resource {self._resource.resource_id} was dropped",
                "pick a checkpoint of the current attempt",
            )
        return self._rows(self._name(state, ref), f"checkpoint {ref}")

    def _drop_copy(self, state: State, ref: str) -> None:
        try:
            with self._admin() as admin:
                self._drop(admin, self._name(state, ref))
        except psycopg.Error as exc:  # forgotten already; discard drops it later
            log.warning("cannot drop the checkpoint database of %s: %s", ref, exc)

    def _drop_copies(self, state: State) -> None:
        """``base`` and ``work`` (and a ``next`` left behind); the checkpoints stay for diffs."""
        with contextlib.suppress(psycopg.Error, SandboxError), self._admin() as admin:
            for what in ("base", "work", "next"):
                self._drop(admin, self._name(state, what))

    def _drop_all(self, prefix: str) -> None:
        """Drop every database named ``agents_<prefix>_...`` (a crash may have left some)."""
        pattern = f"agents\\_{prefix}\\_%"  # the prefix is hex: nothing else to escape
        try:
            with self._admin() as admin:
                found = admin.execute(
                    "SELECT datname FROM pg_database WHERE datname LIKE %s", (pattern,)
                ).fetchall()
                for (name,) in found:
                    self._drop(admin, str(name))
        except (psycopg.Error, SandboxError) as exc:
            raise SandboxError(
                f"cannot drop the sandbox databases agents_{prefix}_* of "
                f"{self._resource.resource_id}: {first_line(exc)}",
                "drop them with psql (DROP DATABASE), or retry when the server is reachable",
            ) from exc
