"""Taking a savepoint sandbox over: creating it, replaying its log, handing it over.

A savepoint dies with its connection, so a process that needs a sandbox another process
held replays the statement log into a new transaction (docs/sandboxes.md, "A database
sandbox moves between processes"; the protocol is in ``transaction_handover.py``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import threading
from typing import Any

from sqlalchemy import text
from sqlalchemy.engine import URL
from sqlalchemy.exc import SQLAlchemyError

from cleveragents_tui.domain.errors import UserError
from cleveragents_tui.sandbox import pg_commit, transaction_handover
from cleveragents_tui.sandbox.base import CheckpointMissingError, SandboxError, start_again_fix
from cleveragents_tui.sandbox.safety import check_savepoint_name
from cleveragents_tui.sandbox.transaction.connection import (
    FORKED,
    Live,
    display,
    first_line,
    target_url,
)
from cleveragents_tui.sandbox.transaction.core import APPLIED_FIX, lost_fix
from cleveragents_tui.sandbox.transaction.snapshots import Snapshot, snapshot_digest
from cleveragents_tui.sandbox.transaction.state import (
    LOCK_FILE_NAME,
    STATE_FILE_NAME,
    State,
    try_lock,
    write_private,
)
from cleveragents_tui.sandbox.transaction.statement_log import (
    LoggedSandbox,
    logged_params,
    read_log,
)

log = logging.getLogger(__name__)


class _ReplayFailed(Exception):
    """Replaying the statement log did not reproduce the transaction; the text says why."""


class ReplayingSandbox(LoggedSandbox):
    """Where the transaction comes from: created, replayed from the log by the next
    process to use the sandbox, or handed over when this process is done with it."""

    def _start(self, url: URL) -> None:
        """Connect, begin, take the baseline snapshot, write an empty log and the state file,
        register. The strategy has taken the lock already."""
        try:
            self._live = self._connect(url)
        except SQLAlchemyError as exc:
            raise SandboxError(
                f"cannot open a transaction on {display(url)} for resource "
                f"{self._resource.resource_id}: {first_line(exc)}",
                "check the resource location, and that the database is reachable and not "
                "locked by another writer",
            ) from exc
        try:
            self._init_snapshots()
            write_private(self._log_path, b"")
            self._state.save(self._root / STATE_FILE_NAME)
        except BaseException as exc:
            self._close()
            if isinstance(exc, SQLAlchemyError):
                raise SandboxError(
                    f"cannot read the rows of {display(url)} for resource "
                    f"{self._resource.resource_id}: {first_line(exc)}",
                    "check that the database is reachable and readable",
                ) from exc
            if isinstance(exc, OSError):
                raise SandboxError(
                    f"cannot write the sandbox state under {self._root}: {exc}",
                    "check that the folder is writable",
                ) from exc
            raise
        transaction_handover.register(self)

    def _reopen(self, state: State) -> None:
        """Open a sandbox this process has no object for, and take it (:meth:`_acquire`)
        unless it was applied, or this process held it and lost its connection."""
        with self._lock:
            self._reopen_locked(state)

    def _reopen_locked(self, state: State) -> None:
        self._state = state
        self._stack = list(state.savepoints)
        self._log_broken = state.unreplayable
        if state.status == "applied":
            self._mark("applied", self._applied_reason(), APPLIED_FIX)
            return
        if state.pid == os.getpid() and not state.released:
            held = "was lost: this process no longer holds its connection"
            self._mark("lost", self._lost_reason(held), lost_fix(self._plan_id))
            return
        self._status = "released"
        self._acquire()

    def _acquire(self) -> None:
        """Take a released sandbox: its lock, then a replay of its statement log as it is on
        disk now (another process may have rolled it back and gone on since). Leaves it
        ``open``; or ``released`` with the reason when another process holds it (the next
        use tries again); or ``lost``, ``applied`` or ``discarded``."""
        try:
            fd = try_lock(self._root / LOCK_FILE_NAME)
        except OSError as exc:
            raise SandboxError(
                f"cannot lock the sandbox under {self._root}: {exc}",
                "check that the folder is writable",
            ) from exc
        if fd is None:
            holder = "another process"
            with contextlib.suppress(SandboxError):
                current = State.load(self._root / STATE_FILE_NAME, self._plan_id)
                if current is not None:
                    holder = f"process {current.pid}"
            self._unavailable = (
                f"the database transaction of the sandbox of {self._resource.resource_id} "
                f"(plan {self._plan_id}) is held by {holder}, which is using "
                "it now (running, applying or correcting the plan), or keeps it because its "
                "statement log cannot be replayed",
                "wait for that to finish, then try again (a process hands the sandbox over "
                "when its run, Apply or correction ends)",
            )
            return
        self._lock_fd = fd
        try:
            fresh = State.load(self._root / STATE_FILE_NAME, self._plan_id)
        except SandboxError:
            self._release_lock()
            raise
        if fresh is None:
            self._release_lock()
            self._mark(
                "discarded",
                f"the sandbox of {self._resource.resource_id} under {self._root} was discarded",
                start_again_fix(self._plan_id),
            )
            return
        ours = fresh.token == self._state.token  # no other process held it since
        known, kept = self.checkpoints, dict(self._snapshots) if ours else {}
        self._state, self._log_broken = fresh, fresh.unreplayable
        self._stack = list(fresh.savepoints)
        self._dropped, self._snapshots, self._entries = set(), {}, []
        self._baseline = self._last_snapshot = None
        if fresh.status == "applied":
            self._release_lock()
            self._mark("applied", self._applied_reason(), APPLIED_FIX)
            return
        if fresh.released:
            ended = f"was handed over by process {fresh.pid}"
        else:
            ended = f"was lost on restart: process {fresh.pid} that held it has ended"
        if fresh.status == "applying":
            decided = self._commit_outcome(fresh)
            if decided == "committed":
                self._finish_commit()
                return
            if decided == "aborted":  # the server rolled it back: replay as after a hand-over
                fresh.status, fresh.commit_txid = "open", None
                ended += " before its COMMIT took effect"
        if fresh.status == "applying":
            self._release_lock()
            self._mark(
                "lost",
                self._lost_reason(
                    f"{ended} while committing it, so whether the changes reached the "
                    "database is unknown"
                ),
                "check the database; if the changes are missing, correct the plan with "
                f"--mode=append, or {start_again_fix(self._plan_id)}",
            )
            return
        entries, problem = read_log(self._log_path)
        try:
            if problem is not None or fresh.unreplayable is not None:
                raise _ReplayFailed(
                    f"its statement log cannot be replayed: {fresh.unreplayable or problem}"
                )
            self._replay(entries)
        except _ReplayFailed as exc:
            self._close()
            self._stack = list(fresh.savepoints)
            self._mark("lost", self._lost_reason(f"{ended}, and {exc}"), lost_fix(self._plan_id))
            log.warning("%s", self._unavailable[0] if self._unavailable else exc)
            return
        for ref in known:
            if ref not in self.checkpoints:
                self._gone.setdefault(ref, "was rolled back or dropped by another process")
        for ref, snapshot in kept.items():  # rolled back over: not rebuilt by the replay
            self._snapshots.setdefault(ref, snapshot)
        self._state.pid = os.getpid()
        self._state.token = secrets.token_hex(16)
        self._state.released = False
        self._save_state()
        self._status, self._unavailable = "open", None
        transaction_handover.register(self)
        warning = self.savepoint_warning
        if warning is not None and not self._warned:
            self._warned = True
            log.warning("%s", warning)

    def hand_over(self) -> bool:
        """Let go of the transaction so that any process (this one included) can take the
        sandbox by replaying its statement log: record it in the state file, roll the
        transaction back (its statements are all in the fsynced log), close the connection,
        release the lock. False, holding on, when the log cannot be replayed (the open
        transaction is then the only copy of the work). See transaction_handover.py."""
        with self._lock:
            if not self.held:
                return True
            if self.unreplayable_reason is not None:
                return False
            try:
                live = self._require_live()
            except SandboxError:
                return True  # its transaction ended: lost, nothing left to hold
            self._state.released = True
            self._save_state()
            with contextlib.suppress(SQLAlchemyError), self._internal_sql():
                live.transaction.rollback()
            self._close()
            self._status, self._unavailable = "released", None
            return True

    def forget_after_fork(self) -> None:
        """In a forked child: drop the parent's lock (this copy of it) and connection unused."""
        self._lock = threading.RLock()
        live, self._live = self._live, None
        if live is not None:
            FORKED.append(live)  # closing it here would end the parent's connection
        self._release_lock()
        if self._status == "open":
            self._status, self._unavailable = "released", None

    def _replay(self, entries: list[dict[str, Any]]) -> None:
        """Re-run ``entries`` in a new transaction; on failure roll it back and raise."""
        try:
            url = target_url(self._resource)
            self._live = live = self._connect(url)
        except SandboxError as exc:
            raise _ReplayFailed(f"its target is unusable: {exc.problem}") from exc
        except SQLAlchemyError as exc:
            raise _ReplayFailed(
                f"a new transaction could not be opened on {display(url)}: {first_line(exc)}"
            ) from exc
        self._stack = []
        valid = set(self._state.savepoints)
        total = sum(1 for entry in entries if "sql" in entry)
        number = 0
        doing = "taking the baseline row snapshot"
        try:
            self._init_snapshots()
            for entry in entries:
                if "savepoint" in entry:
                    name = check_savepoint_name(entry["savepoint"])
                    doing = f"re-creating savepoint {name}"
                    with self._internal_sql():
                        live.connection.exec_driver_sql(f"SAVEPOINT {self._quoted(live, name)}")
                    self._stack.append(name)
                    if name not in valid:  # dropped, or the state file missed it
                        self._dropped.add(name)
                        self._gone[name] = "was dropped"
                    elif self._baseline is not None:
                        snapshot = self._snapshots[name] = self._take_snapshot()
                        expected = entry.get("rows")
                        if snapshot is not None and expected not in (
                            None,
                            snapshot_digest(snapshot),
                        ):
                            raise _ReplayFailed(
                                f"the rows at savepoint {name} differ from the first run (a "
                                "default such as now() or random(), a sequence, or a commit "
                                "by someone else): the database changed meanwhile"
                            )
                    else:
                        self._snapshots[name] = None
                    continue
                if "failed" in entry:  # a statement failed here and left PostgreSQL failed
                    doing = "restoring the failed state of the transaction"
                    with contextlib.suppress(SQLAlchemyError), self._internal_sql():
                        live.connection.exec_driver_sql("SELECT 1/0")
                    if not self._failed(live):
                        raise _ReplayFailed("the failed state of the transaction was not restored")
                    continue
                number += 1
                sql: str = entry["sql"]
                doing = f"replaying statement {number} of {total} ({' '.join(sql.split())[:80]})"
                self._confine(sql)
                result = live.connection.execute(text(sql), logged_params(entry))
                try:
                    expected = entry.get("rowcount")
                    if expected is not None and result.rowcount != expected:
                        raise _ReplayFailed(
                            f"{doing} changed {result.rowcount} rows where it changed "
                            f"{expected} the first time: the database changed meanwhile"
                        )
                finally:
                    result.close()
            doing = "checking the replayed transaction"
            if self._transaction_ended(live):
                raise _ReplayFailed("a replayed statement ended the transaction")
        except (SQLAlchemyError, SandboxError, UserError, _ReplayFailed) as exc:
            with contextlib.suppress(SQLAlchemyError), self._internal_sql():
                live.transaction.rollback()
            self._close()
            self._stack.clear()
            self._dropped.clear()
            self._gone.clear()
            self._snapshots.clear()
            self._baseline = self._last_snapshot = None
            if isinstance(exc, _ReplayFailed):
                raise
            cause = exc.problem if isinstance(exc, UserError) else first_line(exc)
            raise _ReplayFailed(f"{doing} failed: {cause}") from exc
        self._entries = entries

    def _commit_outcome(self, state: State) -> pg_commit.Outcome | None:
        """How the COMMIT of an Apply whose process ended went, per the server (None: unknown)."""
        if state.dialect != "postgresql" or state.commit_txid is None:
            return None
        try:
            url = target_url(self._resource)
        except SandboxError:
            return None
        return pg_commit.outcome(url, state.commit_txid)

    def _finish_commit(self) -> None:
        """Record an Apply whose COMMIT took effect before its process ended: applied."""
        self._stack.clear()
        self._state.status = "applied"
        self._save_state()
        with contextlib.suppress(OSError):
            self._log_path.unlink(missing_ok=True)  # committed: nothing left to replay
        self._release_lock()
        self._mark("applied", self._applied_reason(), APPLIED_FIX)

    def _require_live(self, error: type[SandboxError] = SandboxError) -> Live:
        if self._status == "released":
            self._acquire()
        if self._live is not None and self._transaction_ended(self._live):
            self._lose("the connection or its transaction ended")
        if self._live is None:
            reason, fix = self._unavailable or (
                "the sandbox has no transaction",
                lost_fix(self._plan_id),
            )
            raise error(reason, fix)
        return self._live

    def _usable(self, doing: str, then: str, fix: str) -> Live:
        """The live transaction, refused for ``doing`` when it failed after an SQL error
        (``then``: what that would make of it)."""
        live = self._require_live()
        if self._failed(live):
            raise SandboxError(
                f"cannot {doing} {self._resource.resource_id}: its PostgreSQL transaction "
                f"failed after an SQL error{then}",
                fix,
            )
        return live

    def _require_checkpoint(self, ref: str) -> Live:
        check_savepoint_name(ref)
        try:
            live = self._require_live(CheckpointMissingError)
        except CheckpointMissingError:
            raise self._missing(ref) from None
        if ref in self._stack and ref not in self._dropped:
            return live
        raise self._missing(ref)

    def _snapshot_at(self, ref: str) -> Snapshot:
        check_savepoint_name(ref)
        with self._lock:
            if self._status == "released":
                self._acquire()
            if self._live is None or ref not in self._snapshots:
                raise self._missing(ref)
            snapshot = self._snapshots[ref]
            if snapshot is None:
                reason = self._snapshot_off_reason
                if self._baseline is not None:
                    reason = f"the database had more than {self._max_snapshot_rows} rows then"
                raise SandboxError(
                    f"no row snapshot for savepoint {ref} of {self._resource.resource_id}: "
                    f"{reason}",
                    "raise max_snapshot_rows of the transaction_rollback strategy",
                )
            return snapshot
