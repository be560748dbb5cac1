"""The ``transaction_rollback`` sandbox on a database the server cannot copy.

One open transaction, a ``SAVEPOINT`` per checkpoint, a statement log a later process
replays. The design, its limits and the log's format: docs/sandboxes.md, "The savepoint
sandbox"; ADR-035 "Long-Running Database Transaction Constraint".
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import text
from sqlalchemy.engine import CursorResult
from sqlalchemy.exc import DBAPIError, SQLAlchemyError
from sqlalchemy.sql.base import Executable

from cleveragents_tui import failpoints
from cleveragents_tui.sandbox import pg_commit
from cleveragents_tui.sandbox.base import ApplyResult, Change, NothingLandedError, SandboxError
from cleveragents_tui.sandbox.read_result import Params, ReadResult
from cleveragents_tui.sandbox.safety import check_savepoint_name, new_savepoint_name
from cleveragents_tui.sandbox.sql_confinement import later_statements
from cleveragents_tui.sandbox.transaction.connection import TRANSACTION_CONTROL, first_line
from cleveragents_tui.sandbox.transaction.core import (
    APPLIED_FIX,
    SqlStatementError,
    lost_fix,
    refuse_several_in_a_read,
    statement_head,
)
from cleveragents_tui.sandbox.transaction.replay import ReplayingSandbox
from cleveragents_tui.sandbox.transaction.snapshots import compare, read_row, snapshot_digest
from cleveragents_tui.sandbox.transaction.state import LOCK_FILE_NAME, STATE_FILE_NAME
from cleveragents_tui.sandbox.transaction.statement_log import LOG_FILE_NAME

log = logging.getLogger(__name__)


class TransactionRollbackSandbox(ReplayingSandbox):
    """One open transaction on the target database, checkpointed with savepoints.

    Tools use :meth:`execute`. Every method holds a lock, so the sandbox may be used from
    several threads, one call at a time. ``workdir`` is None: a database is not a directory.
    """

    def execute(
        self,
        sql: str | Executable,
        params: Mapping[str, Any] | Sequence[Mapping[str, Any]] | None = None,
    ) -> CursorResult[Any]:
        """Run one statement inside the sandbox's transaction (``:name`` binds for text).

        A list of parameter mappings runs it once per mapping. Statements that control the
        transaction (BEGIN, COMMIT, ROLLBACK, SAVEPOINT, RELEASE, ...) are refused. A failing
        statement raises :class:`SqlStatementError`; on PostgreSQL the transaction then stays
        failed until :meth:`rollback` to a checkpoint. Should a statement end the transaction
        anyway (PostgreSQL runs ``...; COMMIT`` as one string), the sandbox is marked lost.
        """
        with self._lock:
            live = self._require_live()
            self._confine(sql)
            self._refuse_ending(sql)
            statement = text(sql) if isinstance(sql, str) else sql
            try:
                result = live.connection.execute(statement, params)
            except SQLAlchemyError as exc:
                if isinstance(exc, DBAPIError) and exc.connection_invalidated:
                    raise self._db_error(exc, "an SQL statement") from exc
                fix = None
                if self._failed(live):
                    fix = "the PostgreSQL transaction is now failed: roll back to a checkpoint"
                    # Replay must leave it failed too, until a rollback cuts this line off.
                    self._append({"failed": first_line(exc), "after": len(self._stack) - 1})
                raise SqlStatementError(
                    f"SQL failed in the sandbox of {self._resource.resource_id}: {first_line(exc)}",
                    fix,
                ) from exc
            if self._transaction_ended(live):
                self._lose(
                    "an SQL statement ended it, so what ran before that statement may have "
                    "been committed to the real database"
                )
                reason, fix = self._unavailable or ("transaction ended", lost_fix(self._plan_id))
                raise SandboxError(reason, fix)
            self._log_statement(sql, params, result)
            return result

    def _refuse_ending(self, sql: str | Executable) -> None:
        """Refuse ``…; COMMIT`` (or ROLLBACK, END, …) before it runs: PostgreSQL runs the
        string as one, and its COMMIT would land the plan's rows in the real database before
        Apply (the first statement is refused by the transaction guard)."""
        if self.dialect != "postgresql" or not isinstance(sql, str):
            return
        if any(TRANSACTION_CONTROL.match(part) for part in later_statements(sql) or ()):
            raise SqlStatementError(
                f"statement {statement_head(sql)!r} refused in the sandbox of "
                f"{self._resource.resource_id}: "
                "a statement in it ends the sandbox's transaction, which would commit the "
                "plan's changes to the real database before Apply",
                "leave out COMMIT, ROLLBACK and the like: the sandbox owns its transaction",
            )

    def query(self, sql: str, params: Params, limit: int) -> ReadResult:
        """Run one statement read-only inside the transaction, at most ``limit`` rows read
        (``local/query-sql``, which Strategize runs): in a savepoint of its own with the
        transaction READ ONLY, so any write fails in PostgreSQL, then rolled back to it, so
        nothing the statement did stays; it is not logged (a replay has nothing to redo)."""
        rid = self._resource.resource_id
        with self._lock:
            live = self._usable("read", "", "roll back to a checkpoint first")
            if self.dialect != "postgresql":  # an older version's SQLite sandbox
                raise SqlStatementError(
                    f"the sandbox of {rid} is one open SQLite transaction, which has no "
                    "read-only connection",
                    "read it with local/run-sql (in Execute)",
                )
            self._confine(sql)
            refuse_several_in_a_read(sql, rid)
            savepoint = self._quoted(live, new_savepoint_name())
            self._run_internal(live, f"SAVEPOINT {savepoint}", "SAVEPOINT")
            try:
                self._run_internal(live, "SET TRANSACTION READ ONLY", "SET TRANSACTION")
                read = ReadResult.whole(live.connection.execute(text(sql), params), limit)
            except SQLAlchemyError as exc:
                if isinstance(exc, DBAPIError) and exc.connection_invalidated:
                    raise self._db_error(exc, "an SQL read") from exc
                raise SqlStatementError(
                    f"SQL failed in the sandbox of {rid}: {first_line(exc)}"
                ) from exc
            finally:  # also after a failed statement: the transaction is as it was
                if not self._transaction_ended(live):
                    self._run_internal(
                        live, f"ROLLBACK TO SAVEPOINT {savepoint}", "ROLLBACK TO SAVEPOINT"
                    )
                    self._run_internal(live, f"RELEASE SAVEPOINT {savepoint}", "RELEASE")
            return read

    # -- the Sandbox protocol --------------------------------------------------------------

    def checkpoint(self) -> str:
        """``SAVEPOINT sp_<hex>`` plus a row snapshot; returns the savepoint name."""
        with self._lock:
            live = self._usable("checkpoint", "", "roll back to a checkpoint first")
            name = new_savepoint_name()
            try:
                snapshot = None if self._baseline is None else self._take_snapshot()
            except SQLAlchemyError as exc:
                raise self._db_error(exc, "the row snapshot") from exc
            self._run_internal(live, f"SAVEPOINT {self._quoted(live, name)}", "SAVEPOINT")
            self._stack.append(name)
            self._snapshots[name] = snapshot
            entry: dict[str, Any] = {"savepoint": name}
            if snapshot is not None:
                entry["rows"] = snapshot_digest(snapshot)
            self._append(entry)
            self._save_state()
            warning = self.savepoint_warning
            if warning is not None and not self._warned:
                self._warned = True
                log.warning("%s", warning)
            return name

    def verify(self, ref: str) -> None:
        """Valid while this process holds the transaction, its connection answers, and
        ``ref`` was neither rolled back over nor dropped."""
        with self._lock:
            live = self._require_checkpoint(ref)
            if not self._failed(live):  # a failed PostgreSQL transaction refuses every query
                self._run_internal(live, "SELECT 1", "checking the connection")
            self._require_checkpoint(ref)

    def rollback(self, ref: str, *, current: str | None = None) -> None:
        """``ROLLBACK TO SAVEPOINT``: ``ref`` stays valid, every later savepoint is gone."""
        with self._lock:
            live = self._require_checkpoint(ref)
            self._run_internal(
                live, f"ROLLBACK TO SAVEPOINT {self._quoted(live, ref)}", "ROLLBACK TO SAVEPOINT"
            )
            index = self._stack.index(ref)
            for later in self._stack[index + 1 :]:
                if later not in self._dropped:
                    self._gone[later] = f"was undone when the sandbox rolled back to {ref}"
                self._dropped.discard(later)
            del self._stack[index + 1 :]
            self._last_snapshot = self._snapshots.get(ref)
            self._truncate_log(ref)
            self._save_state()

    def diff(self, old_ref: str, new_ref: str) -> list[Change]:
        """Row changes between two checkpoints' snapshots. Works for references rolled back
        over too (their snapshots stay until dropped), not after a restart."""
        old = self._snapshot_at(old_ref)
        new = self._snapshot_at(new_ref)
        return compare(old, new)

    def read(self, ref: str, path: str) -> bytes | None:
        """Row ``table/key`` at checkpoint ``ref`` as UTF-8 JSON (``{"column": value}``);
        None when the row is absent there or ``path`` names no row (a bare table name)."""
        return read_row(self._snapshot_at(ref), path)

    def changes_since_baseline(self) -> list[Change]:
        """Row changes in the transaction's current view against the rows at creation.

        On PostgreSQL (READ COMMITTED) the current view includes what other clients have
        committed since, so their changes are listed too.
        """
        with self._lock:
            self._require_live()
            if self._baseline is None:
                raise SandboxError(
                    f"cannot list the changes of {self._resource.resource_id}: "
                    f"{self._snapshot_off_reason}",
                    "raise max_snapshot_rows of the transaction_rollback strategy",
                )
            try:
                current = self._take_snapshot()
            except SQLAlchemyError as exc:
                raise self._db_error(exc, "reading the current rows") from exc
            if current is None:
                raise SandboxError(
                    f"cannot list the changes of {self._resource.resource_id}: the database "
                    f"now has more than {self._max_snapshot_rows} rows",
                    "raise max_snapshot_rows of the transaction_rollback strategy",
                )
            return compare(self._baseline, current)

    def drop_checkpoint(self, ref: str) -> None:
        """Forget ``ref`` and its snapshot; idempotent. The savepoint stays in the
        transaction, because ``RELEASE SAVEPOINT`` would release every later one too."""
        check_savepoint_name(ref)
        with self._lock:
            if self._status == "released":
                self._acquire()
                if self._status == "released":  # another process holds it: not ours to change
                    return
            self._snapshots.pop(ref, None)
            if ref in self._stack and ref not in self._dropped:
                self._dropped.add(ref)
                self._gone[ref] = "was dropped"
                self._save_state()

    def apply(self) -> ApplyResult:
        """``COMMIT``: the changes land on the target and the sandbox is finished.

        Applying again after a commit returns at once, so an Apply of several resources
        that was interrupted between two of them can simply be run again."""
        with self._lock:
            if self._status == "released":
                self._acquire()
            if self._status == "applied":
                return ApplyResult(
                    f"already committed: the changes of {self._resource.resource_id} are in "
                    "the real database",
                    (),
                )
            live = self._usable(
                "apply",
                " and would only roll back",
                "roll back to a checkpoint, or discard the sandbox",
            )
            changes: tuple[Change, ...] | None = None
            if self._baseline is not None:
                with contextlib.suppress(SandboxError):
                    changes = tuple(self.changes_since_baseline())
                live = self._require_live()
            state_path = self._root / STATE_FILE_NAME
            if self._state.dialect == "postgresql":  # the server then says how COMMIT ended
                try:
                    with self._internal_sql():
                        self._state.commit_txid = pg_commit.transaction_id(live.connection)
                except SQLAlchemyError as exc:
                    raise self._db_error(exc, "reading the transaction's id") from exc
            self._state.status = "applying"
            try:
                self._state.save(state_path, durable=True)
            except OSError as exc:
                self._state.status = "open"
                raise SandboxError(
                    f"cannot record the apply of {self._resource.resource_id} in {state_path}: "
                    f"{exc}",
                    "nothing was committed: make the folder writable, then retry apply",
                ) from exc
            try:
                failpoints.hit("transaction.commit", "commit")  # a crash here: rolled back
                with self._internal_sql():
                    live.transaction.commit()
                failpoints.hit("transaction.commit", "committed")  # here: committed
            except SQLAlchemyError as exc:
                self._state.status = "open"
                if not self._transaction_ended(live):
                    self._save_state()
                    raise NothingLandedError(
                        f"COMMIT failed on {self._resource.resource_id}: {first_line(exc)}",
                        "the sandbox is unchanged: retry apply when the database is free",
                    ) from exc
                self._lose(f"COMMIT failed and the database rolled back: {first_line(exc)}")
                raise SandboxError(
                    f"nothing was applied to {self._resource.resource_id}: {first_line(exc)}",
                    lost_fix(self._plan_id),
                ) from exc
            for name in self.checkpoints:
                self._gone[name] = "was committed by apply"
            self._stack.clear()
            self._state.status = "applied"
            self._save_state()  # before the lock goes, so no other process sees "applying"
            self._entries.clear()
            with contextlib.suppress(OSError):
                self._log_path.unlink(missing_ok=True)  # committed: nothing left to replay
            self._close()
            self._mark("applied", self._applied_reason(), APPLIED_FIX)
            if changes is None:
                detail = "changes not itemised: no row snapshots"
            else:
                tables = {change.path.partition("/")[0] for change in changes}
                detail = f"{len(changes)} changes in {len(tables)} tables"
            return ApplyResult(
                summary=f"committed the sandbox transaction on {self._resource.resource_id} "
                f"({detail})",
                changes=changes or (),
            )

    def discard(self) -> None:
        """``ROLLBACK`` and remove the state file, statement log and lock file: the target
        stays as it was. Idempotent.

        On a sandbox this process does not hold, only the files go: a transaction held
        elsewhere ends with its process, uncommitted.
        """
        with self._lock:
            live = self._live
            if live is not None:
                with contextlib.suppress(SQLAlchemyError), self._internal_sql():
                    live.transaction.rollback()
            self._close()
            for name in self.checkpoints:
                self._gone[name] = "was discarded with the sandbox"
            self._stack.clear()
            self._snapshots.clear()
            self._baseline = self._last_snapshot = None
            self._entries.clear()
            self._mark("discarded", "the sandbox was discarded", "create a new sandbox")
            for name in (STATE_FILE_NAME, LOG_FILE_NAME, LOCK_FILE_NAME):
                (self._root / name).unlink(missing_ok=True)
            with contextlib.suppress(OSError):
                self._root.rmdir()  # only when empty: root may hold other things
