"""The ``postgres_copy`` sandbox: SQL run in the working copy, checkpoints, rollback, Apply.

Each operation takes the state file's lock, settles a rollback a crash cut short, and
opens no connection that outlives it (see the package docstring).
"""

from __future__ import annotations

import contextlib

import psycopg
from psycopg import sql
from sqlalchemy import text
from sqlalchemy.exc import SQLAlchemyError

from cleveragents_tui.sandbox.base import Change, CheckpointMissingError, SandboxError
from cleveragents_tui.sandbox.landing import LandConflictError, Landed
from cleveragents_tui.sandbox.postgres_copy import land
from cleveragents_tui.sandbox.postgres_copy.databases import CopyDatabases, conninfo
from cleveragents_tui.sandbox.postgres_copy.state import LOCK_FILE_NAME, STATE_FILE_NAME, State
from cleveragents_tui.sandbox.postgres_copy.statements import SCHEMA_STATEMENT, refusal
from cleveragents_tui.sandbox.read_result import Params, ReadResult
from cleveragents_tui.sandbox.safety import check_savepoint_name, new_savepoint_name
from cleveragents_tui.sandbox.sql_confinement import POSTGRES_DENIED_FIX
from cleveragents_tui.sandbox.transaction.connection import TRANSACTION_CONTROL, first_line
from cleveragents_tui.sandbox.transaction.core import (
    SqlStatementError,
    refuse_several_in_a_read,
    statement_head,
)
from cleveragents_tui.sandbox.transaction.snapshots import compare


class PostgresCopySandbox(CopyDatabases):
    """A PostgreSQL target's sandbox as a copy of its database; checkpoints are copies too.

    Keeps no transaction between calls: every process sees and changes the same databases,
    one operation at a time (``flock``). ``workdir`` is None: tools reach it through SQL.
    """

    # -- the tool-facing API ---------------------------------------------------------------

    def _execute(
        self, sql_text: str, params: Params, read_only_rows: int | None = None
    ) -> ReadResult:
        """In a transaction of its own. Refused: transaction control, statements that reach
        outside the database (``sql_confinement.py``) and statements on databases or
        tablespaces."""
        first = statement_head(sql_text)
        if TRANSACTION_CONTROL.match(sql_text):
            raise SqlStatementError(
                f"statement {first!r} refused in the sandbox of {self._resource.resource_id}",
                "the sandbox owns its database: checkpoints, rollback, apply and discard go "
                "through the plan, not through SQL",
            )
        why = refusal(sql_text)
        if why is not None:
            raise SqlStatementError(
                f"statement {first!r} refused in the sandbox of {self._resource.resource_id}: "
                f"{why}",
                POSTGRES_DENIED_FIX,
            )
        if read_only_rows is not None:
            refuse_several_in_a_read(sql_text, self._resource.resource_id)
        schema = SCHEMA_STATEMENT.match(sql_text) is not None
        if schema and params:
            raise SqlStatementError(
                f"statement {first!r} refused in the sandbox of {self._resource.resource_id}: "
                "a schema statement takes no parameters",
                "write its values into the statement",
            )
        with self._operation() as state:
            if state.status == "applied":
                raise self._applied()
            self._settle(state)
            try:
                engine = self._engine_for_work(state)
                with engine.connect() as connection, connection.begin() as transaction:
                    if read_only_rows is not None:  # the query after it fixes the mode, so
                        # a SET TRANSACTION READ WRITE in the statement is refused
                        connection.exec_driver_sql("SET TRANSACTION READ ONLY")
                        connection.exec_driver_sql("SELECT 1")
                    result = connection.execute(text(sql_text), params)
                    # Read every row now: the connection closes with this operation.
                    read = ReadResult.whole(result, read_only_rows)
                    if read_only_rows is not None:
                        transaction.rollback()  # a read keeps nothing, whatever it ran
            except SQLAlchemyError as exc:
                raise SqlStatementError(
                    f"SQL failed in the sandbox of {self._resource.resource_id}: {first_line(exc)}"
                ) from exc
            finally:
                self._close()
            if schema:  # committed: Apply runs it again on the target
                state.schema_log.append(sql_text)
                self._save(state)
            return read

    # -- the Sandbox protocol --------------------------------------------------------------

    def checkpoint(self) -> str:
        """A copy of the working database; returns its reference (``sp_<hex>``)."""
        with self._operation() as state:
            if state.status == "applied":
                raise self._applied()
            ref = new_savepoint_name()
            try:
                self._settle(state)
                with self._admin() as admin:
                    self._copy(admin, self._name(state, "work"), self._name(state, ref))
                state.checkpoints.append(ref)
                state.schema_at[ref] = len(state.schema_log)
                self._save(state)
            except (psycopg.Error, OSError) as exc:
                raise self._failed("checkpoint", exc) from exc
            return ref

    def _require(self, state: State, ref: str) -> str:
        if state.status == "applied":
            raise self._applied()
        if check_savepoint_name(ref) not in state.checkpoints:
            raise CheckpointMissingError(
                f"checkpoint {ref} of resource {self._resource.resource_id} is not a "
                "checkpoint of this sandbox (dropped, or rolled back over)",
                "pick a checkpoint of the current attempt",
            )
        return self._name(state, ref)

    def verify(self, ref: str) -> None:
        """Valid while its copy exists on the server."""
        with self._operation() as state:
            name = self._require(state, ref)
            try:
                with self._admin() as admin:
                    present = name in self._existing(admin, [name])
            except psycopg.Error as exc:
                raise self._failed("verify", exc) from exc
            if not present:
                raise CheckpointMissingError(
                    f"checkpoint {ref} of resource {self._resource.resource_id} is missing: "
                    f"its database {name} was dropped",
                    "roll back to an earlier checkpoint",
                )

    def rollback(self, ref: str, *, current: str | None = None) -> None:
        """Make the working database a copy of checkpoint ``ref`` again; ``ref`` stays valid,
        and so do later checkpoints' copies until they are dropped."""
        del current
        with self._operation() as state:
            source = self._require(state, ref)
            work, following = self._name(state, "work"), self._name(state, "next")
            try:
                self._settle(state)
                state.replacing = True
                self._save(state)
                with self._admin() as admin:
                    self._drop(admin, following)
                    self._copy(admin, source, following)
                    self._drop(admin, work)
                    admin.execute(
                        sql.SQL("ALTER DATABASE {} RENAME TO {}").format(
                            sql.Identifier(following), sql.Identifier(work)
                        )
                    )
                state.replacing = False
                del state.schema_log[state.schema_at.get(ref, len(state.schema_log)) :]
                self._save(state)
            except (psycopg.Error, OSError) as exc:
                raise SandboxError(
                    f"cannot roll {self._resource.resource_id} back to {ref}: {first_line(exc)}",
                    "retry; the working copy is either as it was or as the checkpoint",
                ) from exc

    def _changes(self, state: State) -> list[Change]:
        return compare(
            self._rows(self._name(state, "base"), "creation"),
            self._rows(self._name(state, "work"), "present"),
        )

    def changes_since_baseline(self) -> list[Change]:
        """Row changes of the working copy against the target at creation."""
        with self._operation() as state:
            if state.status == "applied":
                raise self._applied()
            self._settle(state)
            return self._changes(state)

    def pending_changes(self) -> list[Change]:
        """As ``changes_since_baseline``, without settling a rollback a crash interrupted:
        the present rows are in ``next`` when it replaced ``work`` but was not renamed."""
        with self._operation() as state:
            if state.status == "applied":
                raise self._applied()
            return compare(
                self._rows(self._name(state, "base"), "creation"),
                self._rows(self._present(state), "present"),
            )

    def _present(self, state: State) -> str:
        """The database holding the present rows, read only: ``next`` when a rollback a crash
        interrupted replaced ``work`` with it but did not rename it."""
        present = self._name(state, "work")
        if state.replacing:
            following = self._name(state, "next")
            with self._admin() as admin:
                found = self._existing(admin, [present, following])
            if present not in found and following in found:
                present = following
        return present

    def _logged_refusal(self, state: State) -> str | None:
        for statement in state.schema_log:  # checked when run; the state file is only a file
            why = refusal(statement)
            if why is not None:
                return (
                    f"its logged schema statement {' '.join(statement.split())[:80]!r} is "
                    f"refused: {why}"
                )
        return None

    def _land_refusal(self, state: State) -> str | None:
        """What :meth:`_land` would refuse, read only: a logged statement, or the target
        changed where the plan changed it (:func:`.land.refusal`)."""
        logged = self._logged_refusal(state)
        if logged is not None:
            return logged
        url = self._target
        try:
            with (
                psycopg.connect(conninfo(url, self._name(state, "base"))) as base,
                psycopg.connect(conninfo(url, self._present(state))) as final,
                psycopg.connect(conninfo(url, str(url.database))) as target,
            ):
                for connection in (base, final):
                    connection.read_only = True
                return land.refusal(target, base, final, state.schema_log)
        except psycopg.Error:
            return None  # the server cannot be read now: only the real Apply can tell

    def _land(self, state: State) -> Landed:
        """The rows the plan produced, after its schema statements (:mod:`.land`)."""
        logged = self._logged_refusal(state)
        if logged is not None:
            raise LandConflictError(logged)
        url = self._target
        try:
            with (
                psycopg.connect(conninfo(url, self._name(state, "base"))) as base,
                psycopg.connect(conninfo(url, self._name(state, "work"))) as final,
                psycopg.connect(conninfo(url, str(url.database))) as target,
            ):
                for connection in (base, final):
                    connection.read_only = True
                target.autocommit = True  # the landing transaction is opened explicitly
                return land.land(target, base, final, state.schema_log)
        except psycopg.Error as exc:
            raise self._refused("PostgreSQL", first_line(exc)) from exc

    def discard(self) -> None:
        """Drop the sandbox's databases and remove its files; the target is untouched.
        Idempotent."""
        with self._lock:
            self._close()
            prefix = self._prefix
            if prefix is None:
                with contextlib.suppress(SandboxError):
                    loaded = State.load(self._root / STATE_FILE_NAME, self._plan_id)
                    prefix = None if loaded is None else loaded.prefix
            if prefix is not None:
                self._drop_all(prefix)
            for name in (STATE_FILE_NAME, LOCK_FILE_NAME):
                (self._root / name).unlink(missing_ok=True)
            with contextlib.suppress(OSError):
                self._root.rmdir()  # only when empty: root may hold other things
