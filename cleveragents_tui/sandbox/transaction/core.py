"""The state every layer of the savepoint sandbox shares, and its guards.

:class:`SandboxCore` holds the connection, the checkpoint stack and the snapshots; the
statement log (:mod:`.statement_log`), taking a sandbox over (:mod:`.replay`) and the
Sandbox protocol (:mod:`.sandbox`) build on it, in that order.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

from sqlalchemy import Connection, event
from sqlalchemy.engine import URL
from sqlalchemy.exc import DBAPIError, SQLAlchemyError
from sqlalchemy.sql.base import Executable

from cleveragents_tui.domain.resource import Resource
from cleveragents_tui.sandbox.base import CheckpointMissingError, SandboxError, start_again_fix
from cleveragents_tui.sandbox.database_common import DatabaseSandboxIdentity
from cleveragents_tui.sandbox.safety import check_savepoint_name
from cleveragents_tui.sandbox.sql_confinement import (
    POSTGRES_DENIED_FIX,
    later_statements,
    postgres_refusal,
)
from cleveragents_tui.sandbox.transaction.connection import (
    PG_IDLE,
    PG_INERROR,
    PG_UNKNOWN,
    TRANSACTION_CONTROL,
    Live,
    first_line,
    make_engine,
)
from cleveragents_tui.sandbox.transaction.snapshots import Snapshot, take_snapshot
from cleveragents_tui.sandbox.transaction.state import STATE_FILE_NAME, State

log = logging.getLogger(__name__)


def lost_fix(plan_id: str) -> str:
    """What to do about a sandbox whose transaction is gone: its work cannot be had back."""
    return "correct the plan with --mode=append (compensating changes), or " + start_again_fix(
        plan_id
    )


APPLIED_FIX = "correct the plan with --mode=append (compensating changes)"

Status = Literal["open", "released", "lost", "applied", "discarded"]


class SqlStatementError(SandboxError):
    """A tool's SQL statement failed; the sandbox and its checkpoints are still there."""


def refuse_several_in_a_read(sql: str, resource_id: str) -> None:
    """A PostgreSQL read (``local/query-sql``) is one statement: a second could turn the
    read-only mode off or end the transaction (``RESET transaction_read_only; DELETE …``)."""
    if later_statements(sql) != []:
        raise SqlStatementError(
            f"statement {statement_head(sql)!r} refused in the sandbox of {resource_id}: a read "
            "is one statement, and this is more than one",
            "send one statement per local/query-sql call; change rows with local/run-sql "
            "(in Execute)",
        )


def statement_head(sql: str) -> str:
    """``sql`` on one line, cut at 80 characters: how a refusal names the statement."""
    return " ".join(sql.split())[:80]


class SandboxCore(DatabaseSandboxIdentity):
    """What every layer shares: the connection, the savepoint stack, the row snapshots, the
    status, and the guards each statement passes. See :class:`TransactionRollbackSandbox`."""

    def __init__(
        self,
        resource: Resource,
        plan_id: str,
        root: Path,
        state: State,
        *,
        max_snapshot_rows: int,
        savepoint_warning_at: int,
    ) -> None:
        """Made by :class:`TransactionRollbackStrategy`; not meant to be built directly."""
        super().__init__(resource, plan_id, root)
        self._state = state
        self._max_snapshot_rows = max_snapshot_rows
        self._savepoint_warning_at = savepoint_warning_at
        self._lock = threading.RLock()
        self._live: Live | None = None
        self._status: Status = "open"
        self._unavailable: tuple[str, str] | None = None  # (why unusable here, what to do)
        self._internal = False  # lets our own SAVEPOINT/ROLLBACK statements past the guard
        # Savepoints alive in the transaction, oldest first (dropped ones stay: drop_checkpoint).
        self._stack: list[str] = []
        self._dropped: set[str] = set()
        self._gone: dict[str, str] = {}  # invalid reference -> why
        self._baseline: Snapshot | None = None
        self._snapshots: dict[str, Snapshot | None] = {}
        self._last_snapshot: Snapshot | None = None
        self._snapshot_off_reason = ""
        self._warned = False
        # The statement log as written, and the descriptor holding the sandbox's flock.
        self._entries: list[dict[str, Any]] = []
        self._log_broken: str | None = state.unreplayable
        self._lock_fd: int | None = None

    # -- properties ------------------------------------------------------------------------

    @property
    def status(self) -> Status:
        """``open`` (live in this process), ``released`` (no transaction here: the next use
        replays the statement log; see transaction_handover.py), ``lost``, ``applied`` or
        ``discarded``."""
        return self._status

    @property
    def held(self) -> bool:
        """Whether this process holds the sandbox's transaction now."""
        return self._status == "open" and self._live is not None

    @property
    def lost(self) -> bool:
        """True when the transaction is gone: restart, another process, dropped connection."""
        return self._status == "lost"

    @property
    def lost_reason(self) -> str | None:
        return self._unavailable[0] if self.lost and self._unavailable else None

    @property
    def dialect(self) -> str:
        """``sqlite`` or ``postgresql``."""
        return self._state.dialect

    @property
    def checkpoints(self) -> tuple[str, ...]:
        """The savepoint references valid now, oldest first."""
        return tuple(name for name in self._stack if name not in self._dropped)

    @property
    def savepoints_held(self) -> int:
        """Savepoints alive in the transaction, dropped references included."""
        return len(self._stack)

    @property
    def savepoint_warning(self) -> str | None:
        """Set while a PostgreSQL sandbox holds more savepoints than the server caches well."""
        if self.dialect != "postgresql" or len(self._stack) <= self._savepoint_warning_at:
            return None
        return (
            f"the sandbox of {self._resource.resource_id} holds {len(self._stack)} savepoints "
            f"in one PostgreSQL transaction; past {self._savepoint_warning_at} PostgreSQL "
            "overflows its subtransaction cache and every session on the server slows down: "
            "split the plan into child plans, or lower its budget: agents config set "
            f"sandbox.checkpoint.max-per-plan {max(2, self._savepoint_warning_at // 2)} "
            f"--resource {self._resource.resource_id}"
        )

    # -- the connection and the status ------------------------------------------------------

    def _connect(self, url: URL) -> Live:
        """A new engine, connection and open transaction on the target."""
        engine = make_engine(url, self._plan_id)
        event.listen(engine, "before_cursor_execute", self._guard_statement)
        try:
            connection = engine.connect()
            try:
                with self._internal_sql():
                    transaction = connection.begin()
                    connection.exec_driver_sql("SELECT 1")  # PostgreSQL begins lazily
            except BaseException:
                connection.close()
                raise
        except BaseException:
            engine.dispose()
            raise
        return Live(engine, connection, transaction)

    def _init_snapshots(self) -> None:
        """Take the baseline snapshot (or say why there is none)."""
        if self._max_snapshot_rows == 0:
            self._snapshot_off_reason = "row snapshots are off (max_snapshot_rows=0)"
            return
        self._baseline = self._take_snapshot()
        self._snapshot_off_reason = (
            f"the database had more than {self._max_snapshot_rows} rows when the "
            "sandbox was created, so no row snapshots are taken"
        )

    def _applied_reason(self) -> str:
        return (
            f"the sandbox of {self._resource.resource_id} was applied: its transaction was "
            "committed and its changes are in the real database"
        )

    def _lost_reason(self, what_happened: str) -> str:
        return (
            f"the database transaction of the sandbox of {self._resource.resource_id} "
            f"(plan {self._plan_id}) {what_happened}; its uncommitted changes went with it "
            "and the resource can no longer be rolled back to its checkpoints"
        )

    def _mark(self, status: Status, reason: str, fix: str) -> None:
        self._status = status
        self._unavailable = (reason, fix)

    def _release_lock(self) -> None:
        fd, self._lock_fd = self._lock_fd, None
        if fd is not None:
            os.close(fd)  # releases the flock

    def _close(self) -> None:
        live, self._live = self._live, None
        if live is not None:
            with contextlib.suppress(SQLAlchemyError):
                live.connection.close()
            live.engine.dispose()
        self._release_lock()

    def _lose(self, what_happened: str, *, replayable: bool = False) -> None:
        """The transaction is gone. Unless the server surely rolled it back (``replayable``),
        the log is marked unreplayable first: part of it may have been committed."""
        if not replayable:
            self._break_log(f"the transaction ended in process {os.getpid()}: {what_happened}")
        self._close()
        reason = self._lost_reason(what_happened)
        self._mark("lost", reason, lost_fix(self._plan_id))
        log.warning("%s", reason)

    # -- guards ----------------------------------------------------------------------------

    @contextlib.contextmanager
    def _internal_sql(self) -> Iterator[None]:
        self._internal = True
        try:
            yield
        finally:
            self._internal = False

    def _guard_statement(
        self,
        _conn: Connection,
        _cursor: Any,
        statement: str,
        _parameters: Any,
        _context: Any,
        _executemany: bool,
    ) -> None:
        if not self._internal and TRANSACTION_CONTROL.match(statement):
            first = statement.strip().splitlines()[0][:80]
            raise SqlStatementError(
                f"statement {first!r} refused in the sandbox of {self._resource.resource_id}",
                "the sandbox owns its transaction: checkpoints, rollback, apply and discard go "
                "through the plan, not through SQL",
            )

    def _confine(self, sql: str | Executable) -> None:
        """Refuse a PostgreSQL statement that reaches outside the database (files, programs,
        other roles); SQLite connections are confined by their authorizer instead."""
        if self.dialect != "postgresql" or not isinstance(sql, str):
            return
        why = postgres_refusal(sql)
        if why is not None:
            first = statement_head(sql)
            raise SqlStatementError(
                f"statement {first!r} refused in the sandbox of {self._resource.resource_id}: "
                f"{why}",
                POSTGRES_DENIED_FIX,
            )

    def _pg_status(self, live: Live) -> int:
        raw: Any = live.connection.connection.dbapi_connection
        return int(raw.info.transaction_status)

    def _transaction_ended(self, live: Live) -> bool:
        """Whether the driver says no transaction is open (a statement or the server ended it)."""
        if live.connection.closed or live.connection.invalidated:
            return True
        if self.dialect == "sqlite":
            raw: Any = live.connection.connection.dbapi_connection
            return not raw.in_transaction
        return self._pg_status(live) in (PG_IDLE, PG_UNKNOWN)

    def _failed(self, live: Live) -> bool:
        """PostgreSQL aborts the whole transaction on an error, until ROLLBACK TO SAVEPOINT."""
        return self.dialect == "postgresql" and self._pg_status(live) == PG_INERROR

    def _db_error(self, exc: SQLAlchemyError, doing: str) -> SandboxError:
        """The error to raise for a failed statement of ours; a dropped connection loses all."""
        if isinstance(exc, DBAPIError) and exc.connection_invalidated:
            # The server rolls back a transaction whose connection ended: still replayable.
            self._lose(f"the connection dropped during {doing}: {first_line(exc)}", replayable=True)
            reason, fix = self._unavailable or (doing, lost_fix(self._plan_id))
            return CheckpointMissingError(reason, fix)
        return SandboxError(
            f"{doing} failed on resource {self._resource.resource_id}: {first_line(exc)}"
        )

    def _run_internal(self, live: Live, sql: str, doing: str) -> None:
        try:
            with self._internal_sql():
                live.connection.exec_driver_sql(sql)
        except SQLAlchemyError as exc:
            raise self._db_error(exc, doing) from exc

    @staticmethod
    def _quoted(live: Live, name: str) -> str:
        preparer = live.connection.dialect.identifier_preparer
        return preparer.quote_identifier(check_savepoint_name(name))

    def _missing(self, ref: str) -> CheckpointMissingError:
        if self._unavailable is not None and self._status != "open":
            reason, fix = self._unavailable
            return CheckpointMissingError(f"savepoint {ref}: {reason}", fix)
        why = self._gone.get(ref, "is not a checkpoint of this sandbox")
        return CheckpointMissingError(
            f"savepoint {ref} of resource {self._resource.resource_id} {why}",
            "pick a checkpoint of the current attempt",
        )

    def _break_log(self, why: str) -> None:
        """The log no longer describes the transaction, for good: record it in the state."""
        if self._log_broken is not None:
            return
        self._log_broken = self._state.unreplayable = why
        log.warning("the sandbox of %s cannot be replayed: %s", self._resource.resource_id, why)
        self._save_state()

    def _save_state(self) -> None:
        """Best effort once the database step is done: the file only serves diagnosis."""
        self._state.savepoints = list(self.checkpoints)
        try:
            self._state.save(self._root / STATE_FILE_NAME)
        except OSError as exc:
            log.warning("cannot update the sandbox state under %s: %s", self._root, exc)

    def _take_snapshot(self) -> Snapshot | None:
        """Every user table's rows as the transaction sees them; None above the row limit."""
        live = self._live
        if live is None:
            raise SandboxError("the sandbox has no transaction")
        snapshot = take_snapshot(
            live.connection, self.dialect, self._max_snapshot_rows, self._last_snapshot
        )
        if snapshot is not None:
            self._last_snapshot = snapshot
        return snapshot
