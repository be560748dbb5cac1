"""A SQLite database sandbox that any process can roll back exactly: a copy of the file.

The ``transaction_rollback`` strategy's savepoints live in one connection of one process, so
every later process (each CLI command is one) had to *replay* a statement log, and a
database whose rows are not deterministic (``CURRENT_TIMESTAMP``, a trigger writing
``datetime('now')``, ``random()``) replayed to other rows: corrections were refused and
Apply landed nothing. For a SQLite target the sandbox is therefore a copy of the database
file, and a checkpoint a copy of that copy: what the plan produced is kept as the bytes
SQLite wrote, never re-computed.

Files under ``root`` (mode 0600 when created: the rows may be sensitive):

* ``baseline.db``: the target as it was when the sandbox was made (SQLite's backup API,
  a consistent copy even while others write to the target, WAL or not);
* ``work.db``: where tools run their SQL (:meth:`SqliteCopySandbox.execute`), each
  statement on a connection of its own, committed in the copy at once: no transaction or
  connection outlives an operation, so nothing needs handing over between processes, and
  the closed file can be copied and replaced as a whole;
* ``checkpoints/<ref>.db``: one fsynced file copy of ``work.db`` per checkpoint (``ref`` is
  ``sp_<hex>``, like a savepoint name); :meth:`~SqliteCopySandbox.rollback` copies it
  beside ``work.db`` and renames it over it (a crash leaves one or the other whole);
* ``sqlite_copy.json``: the state (resource, plan, valid checkpoints, open or applied);
* ``sqlite_copy.flock``: held with ``flock`` during each operation, so a checkpoint or a
  rollback never copies a half-written file while another process runs a statement.

Apply (``sqlite_land.py``) writes the difference between ``baseline.db`` and ``work.db``
into the target in one transaction, after checking that nothing the plan changed was
changed in the target meanwhile; on a conflict or error nothing lands and Apply fails.
Rolling back over a checkpoint keeps the later checkpoints' files (for diffs) until they
are dropped; after Apply every checkpoint is refused, as a committed savepoint is.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import sqlite3
from pathlib import Path
from typing import Final

from sqlalchemy import Engine, create_engine, event, text
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.pool import NullPool

from cleveragents_tui.domain.resource import Resource
from cleveragents_tui.domain.timeutil import utc_now
from cleveragents_tui.sandbox.base import Change, CheckpointMissingError, SandboxError
from cleveragents_tui.sandbox.copy_sandbox import CopySandbox, CopyState, CopyStrategy
from cleveragents_tui.sandbox.database_common import owned_state
from cleveragents_tui.sandbox.landing import Landed
from cleveragents_tui.sandbox.read_result import Params, ReadResult
from cleveragents_tui.sandbox.safety import check_savepoint_name, new_savepoint_name
from cleveragents_tui.sandbox.sql_confinement import (
    SQLITE_DENIED_FIX,
    confine_sqlalchemy_connection,
    sqlite_denied,
)
from cleveragents_tui.sandbox.sqlite_land import (
    BUSY_TIMEOUT_S,
    land,
    q,
    virtual_tables,
)
from cleveragents_tui.sandbox.sqlite_land import (
    refusal as land_refusal,
)
from cleveragents_tui.sandbox.transaction.connection import (
    TRANSACTION_CONTROL,
    first_line,
    target_of_kind,
)
from cleveragents_tui.sandbox.transaction.core import SqlStatementError
from cleveragents_tui.sandbox.transaction.snapshots import (
    Snapshot,
    Table,
    compare,
    key_rows,
    path_part,
)

STATE_FILE_NAME: Final = "sqlite_copy.json"
LOCK_FILE_NAME: Final = "sqlite_copy.flock"
BASELINE: Final = "baseline.db"
WORK: Final = "work.db"
CHECKPOINTS: Final = "checkpoints"
# ATTACH would let a tool write to a file outside the sandbox (the real database included).
_ATTACH = re.compile(
    r"^\s*(?:(?:--[^\n]*(?:\n|$)|/\*.*?\*/)\s*)*(ATTACH|DETACH)\b", re.IGNORECASE | re.DOTALL
)


class _State(CopyState):
    STRATEGY = "sqlite_copy"


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def copy_database(source: Path, destination: Path) -> None:
    """A consistent copy of the live SQLite database ``source`` (SQLite's backup API, so
    others may write meanwhile), as one file in rollback-journal mode, readable by its
    owner only, on disk when this returns."""
    destination.unlink(missing_ok=True)
    os.close(os.open(destination, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    with (
        contextlib.closing(sqlite3.connect(source, timeout=BUSY_TIMEOUT_S)) as reader,
        contextlib.closing(sqlite3.connect(destination)) as writer,
    ):
        writer.execute("PRAGMA synchronous = OFF")  # one fsync below instead of several
        reader.backup(writer)
        writer.execute("PRAGMA journal_mode = DELETE")
    _fsync(destination)


def settle(path: Path) -> None:
    """Make the file ``path`` hold the whole database: a journal left by a process that died
    mid-statement is rolled back, a WAL folded in. Then a plain file copy is exact."""
    if any(path.with_name(path.name + suffix).exists() for suffix in ("-journal", "-wal")):
        with contextlib.closing(sqlite3.connect(path, timeout=BUSY_TIMEOUT_S)) as connection:
            connection.execute("PRAGMA journal_mode = DELETE")


def copy_file(source: Path, destination: Path) -> None:
    """Replace ``destination`` with a copy of the settled, closed database file ``source``:
    copied beside it, fsynced, renamed over it (a crash leaves the old or the new file)."""
    temporary = destination.with_name(f".{destination.name}.{os.getpid()}.tmp")
    try:
        shutil.copyfile(source, temporary)
        os.chmod(temporary, 0o600)
        _fsync(temporary)
        os.replace(temporary, destination)
    finally:
        temporary.unlink(missing_ok=True)
    for suffix in ("-journal", "-wal", "-shm"):  # settled: none belongs to the new file
        destination.with_name(destination.name + suffix).unlink(missing_ok=True)
    _fsync(destination.parent)


def snapshot(path: Path, max_rows: int) -> Snapshot | None:
    """Every table's rows of the copy ``path`` keyed as ``transaction_rollback`` keys them
    (primary key, else ``~hash``); None above ``max_rows`` rows."""
    connection = sqlite3.connect(
        f"{path.absolute().as_uri()}?mode=ro", uri=True, timeout=BUSY_TIMEOUT_S
    )
    try:
        names = [
            row[0]
            for row in connection.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' "
                "AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY name"
            )
        ]
        result: Snapshot = {}
        remaining = max_rows
        for name in names:
            info = connection.execute(f"PRAGMA table_info({q(name)})").fetchall()
            pk = [row[1] for row in sorted(info, key=lambda r: r[5]) if row[5] > 0]
            cursor = connection.execute(f"SELECT * FROM {q(name)}")  # noqa: S608
            columns = tuple(d[0] for d in cursor.description)
            keyed = key_rows(cursor, [columns.index(column) for column in pk], remaining)
            if keyed is None:
                return None
            rows, remaining = keyed
            result[path_part(name)] = Table(columns, rows)
        return result
    finally:
        connection.close()


# SQLite runs one statement a call ("You can only execute one statement at a time"): say how
# a model sends several
_ONE_AT_A_TIME = (
    "put one statement in sql: local/run-sql takes several as a statements list "
    '([{"sql": ...}, ...]), local/query-sql one per call'
)


class SqliteCopySandbox(CopySandbox[_State, Path]):
    """A SQLite target's sandbox as a copy of its file; checkpoints are copies of the copy.

    Keeps no transaction between calls: every process sees and changes the same files, one
    operation at a time (``flock``). ``workdir`` is None: tools reach it through SQL.
    """

    @property
    def dialect(self) -> str:
        return "sqlite"

    # -- files and locking -----------------------------------------------------------------

    def _checkpoint_path(self, ref: str) -> Path:
        return self._root / CHECKPOINTS / f"{check_savepoint_name(ref)}.db"

    STATE_FILE_NAME = STATE_FILE_NAME
    LOCK_FILE_NAME = LOCK_FILE_NAME

    def _load_state(self) -> _State | None:
        return _State.load(self._root / STATE_FILE_NAME, self._plan_id)

    def _engine_for_work(self) -> Engine:
        """Connections to the working copy, one per statement: none stays open between
        operations, so a checkpoint or rollback may copy and replace the file."""
        if self._engine is None:
            self._engine = create_engine(
                f"sqlite:///{self._root / WORK}",
                poolclass=NullPool,
                isolation_level="AUTOCOMMIT",
                connect_args={"timeout": BUSY_TIMEOUT_S, "check_same_thread": False},
            )
            event.listen(self._engine, "connect", confine_sqlalchemy_connection)
        return self._engine

    def _read_only_engine(self) -> Engine:
        """A read-only connection to the working copy (``mode=ro``), confined as the others:
        SQLite itself refuses any write through it."""
        uri = f"{(self._root / WORK).absolute().as_uri()}?mode=ro"
        engine = create_engine(
            "sqlite://",
            creator=lambda: sqlite3.connect(
                uri, uri=True, timeout=BUSY_TIMEOUT_S, check_same_thread=False
            ),
            poolclass=NullPool,
            isolation_level="AUTOCOMMIT",
        )
        event.listen(engine, "connect", confine_sqlalchemy_connection)
        return engine

    # -- the tool-facing API ---------------------------------------------------------------

    def _execute(self, sql: str, params: Params, read_only_rows: int | None = None) -> ReadResult:
        """Transaction control and ATTACH/DETACH are refused: checkpoints, rollback and apply
        belong to the sandbox, and an attached file would be written outside it."""
        if TRANSACTION_CONTROL.match(sql) or _ATTACH.match(sql):
            first = sql.strip().splitlines()[0][:80]
            raise SqlStatementError(
                f"statement {first!r} refused in the sandbox of {self._resource.resource_id}",
                "the sandbox owns its database: checkpoints, rollback, apply and discard go "
                "through the plan, and no other database may be attached",
            )
        with self._operation() as state:
            if state.status == "applied":
                raise self._applied()
            read_only = read_only_rows is not None
            engine = self._read_only_engine() if read_only else self._engine_for_work()
            try:
                with engine.connect() as connection:
                    result = connection.execute(text(sql), params)
                    # Read every row now: the connection closes with this operation.
                    return ReadResult.whole(result, read_only_rows)
            except SQLAlchemyError as exc:
                if sqlite_denied(first_line(exc)):
                    raise SqlStatementError(
                        f"statement {' '.join(sql.split())[:80]!r} refused in the sandbox of "
                        f"{self._resource.resource_id}: it reaches outside its database",
                        SQLITE_DENIED_FIX,
                    ) from exc
                said = first_line(exc).rstrip(".")
                raise SqlStatementError(
                    f"SQL failed in the sandbox of {self._resource.resource_id}: {said}",
                    _ONE_AT_A_TIME if "one statement at a time" in said else None,
                ) from exc
            finally:
                if read_only:  # the read-only engine is this statement's alone
                    engine.dispose()

    # -- the Sandbox protocol --------------------------------------------------------------

    def checkpoint(self) -> str:
        """A copy of the working copy; returns its reference (``sp_<hex>``)."""
        with self._operation() as state:
            if state.status == "applied":
                raise self._applied()
            ref = new_savepoint_name()
            path = self._checkpoint_path(ref)
            try:
                path.parent.mkdir(mode=0o700, exist_ok=True)
                settle(self._root / WORK)
                copy_file(self._root / WORK, path)
                state.checkpoints.append(ref)
                self._save(state)
            except (OSError, sqlite3.Error) as exc:
                path.unlink(missing_ok=True)
                raise SandboxError(
                    f"cannot checkpoint {self._resource.resource_id} under {self._root}: {exc}",
                    "check the free space and that the folder is writable",
                ) from exc
            return ref

    def _require(self, state: _State, ref: str) -> Path:
        if state.status == "applied":
            raise self._applied()
        path = self._checkpoint_path(ref)
        if ref not in state.checkpoints or not path.is_file():
            raise CheckpointMissingError(
                f"checkpoint {ref} of resource {self._resource.resource_id} is not a "
                "checkpoint of this sandbox (dropped, or its copy is missing)",
                "pick a checkpoint of the current attempt",
            )
        return path

    def verify(self, ref: str) -> None:
        """Valid while its copy exists and SQLite finds it intact."""
        with self._operation() as state:
            path = self._require(state, ref)
            try:
                connection = sqlite3.connect(f"{path.absolute().as_uri()}?mode=ro", uri=True)
                try:
                    verdict = connection.execute("PRAGMA quick_check").fetchone()[0]
                finally:
                    connection.close()
            except sqlite3.Error as exc:
                verdict = str(exc)
            if verdict != "ok":
                raise CheckpointMissingError(
                    f"checkpoint {ref} of resource {self._resource.resource_id} is damaged: "
                    f"{verdict}",
                    "roll back to an earlier checkpoint",
                )

    def rollback(self, ref: str, *, current: str | None = None) -> None:
        """Copy checkpoint ``ref`` back over the working copy; ``ref`` stays valid, and so do
        later checkpoints' files until they are dropped."""
        del current
        with self._operation() as state:
            path = self._require(state, ref)
            try:
                settle(self._root / WORK)
                copy_file(path, self._root / WORK)
            except (OSError, sqlite3.Error) as exc:
                raise SandboxError(
                    f"cannot roll {self._resource.resource_id} back to {ref}: {exc}",
                    "retry; the working copy is either as it was or as the checkpoint",
                ) from exc

    def _snapshot(self, path: Path, what: str) -> Snapshot:
        taken = snapshot(path, self._max_rows)
        if taken is None:
            raise SandboxError(
                f"cannot list the rows of {self._resource.resource_id} at {what}: more than "
                f"{self._max_rows} rows",
                "compare the database copies under the sandbox folder with sqlite3",
            )
        return taken

    def _rows_at(self, state: _State, ref: str) -> Snapshot:
        path = self._checkpoint_path(ref)
        if ref not in state.checkpoints or not path.is_file():
            raise CheckpointMissingError(
                f"checkpoint {ref} of resource {self._resource.resource_id} was dropped",
                "pick a checkpoint of the current attempt",
            )
        return self._snapshot(path, f"checkpoint {ref}")

    def _changes(self, state: _State) -> list[Change]:
        return compare(
            self._snapshot(self._root / BASELINE, "creation"),
            self._snapshot(self._root / WORK, "present"),
        )

    def changes_since_baseline(self) -> list[Change]:
        """Row changes of the working copy against the target at creation."""
        with self._operation() as state:
            return self._changes(state)

    def pending_changes(self) -> list[Change]:
        """What Apply would land: ``changes_since_baseline``, which only reads."""
        return self.changes_since_baseline()

    def _drop_copy(self, state: _State, ref: str) -> None:
        del state
        self._checkpoint_path(ref).unlink(missing_ok=True)

    def _land(self, state: _State) -> Landed:
        """The rows and schema the plan produced (``sqlite_land.py``)."""
        del state
        self._close()
        try:
            return land(self._target, self._root / BASELINE, self._root / WORK)
        except sqlite3.Error as exc:
            raise self._refused("SQLite", str(exc)) from exc

    def _land_refusal(self, state: _State) -> str | None:
        del state
        return land_refusal(self._target, self._root / BASELINE, self._root / WORK)

    def discard(self) -> None:
        """Remove the copies and the state; the target is untouched. Idempotent."""
        with self._lock:
            self._close()
            for name in (STATE_FILE_NAME, BASELINE, WORK, f"{WORK}-journal", LOCK_FILE_NAME):
                (self._root / name).unlink(missing_ok=True)
            shutil.rmtree(self._root / CHECKPOINTS, ignore_errors=True)
            with contextlib.suppress(OSError):
                self._root.rmdir()  # only when empty: root may hold other things


def is_copy_sandbox(root: Path) -> bool:
    """Whether ``root`` holds a :class:`SqliteCopySandbox` (its state file)."""
    return (root / STATE_FILE_NAME).is_file()


class SqliteCopyStrategy(CopyStrategy):
    """Makes :class:`SqliteCopySandbox` objects for SQLite targets (``database.py`` picks)."""

    def _target(self, resource: Resource) -> Path:
        url = target_of_kind(
            resource,
            "sqlite",
            "SQLite database file",
            "use the transaction_rollback sandbox for other databases",
        )
        return Path(str(url.database))

    def create(self, resource: Resource, plan_id: str, root: Path) -> SqliteCopySandbox:
        """Copy the target into ``root``. Refused while an open sandbox is there."""
        target = self._target(resource)
        _State.refuse_open(resource, plan_id, root, STATE_FILE_NAME)
        sandbox = SqliteCopySandbox(resource, plan_id, root, target, self.max_snapshot_rows)
        sandbox.discard()
        try:
            root.mkdir(parents=True, exist_ok=True)
            copy_database(target, root / BASELINE)
            with contextlib.closing(sqlite3.connect(root / BASELINE)) as connection:
                virtual = virtual_tables(connection)
            if virtual:
                raise SandboxError(
                    f"resource {resource.resource_id} has virtual tables "
                    f"({', '.join(virtual)}), which a database copy cannot land row by row",
                    "give the resource the sandbox strategy none, or drop the virtual tables",
                )
            copy_file(root / BASELINE, root / WORK)
            state = _State(
                resource_id=resource.resource_id, plan_id=plan_id, created_at=utc_now().isoformat()
            )
            state.save(root / STATE_FILE_NAME)  # last: a sandbox without it was never made
        except (OSError, sqlite3.Error) as exc:
            sandbox.discard()
            raise SandboxError(
                f"cannot copy the database {target} of resource {resource.resource_id} "
                f"into {root}: {first_line(exc)}",
                "check that the database is readable and the sandbox folder has free space",
            ) from exc
        except BaseException:
            sandbox.discard()
            raise
        return sandbox

    def open(self, resource: Resource, plan_id: str, root: Path) -> SqliteCopySandbox:
        """The sandbox ``create`` made (in any process)."""
        state = _State.load(root / STATE_FILE_NAME, plan_id)
        owned_state(state, resource, plan_id, root, "database")
        return SqliteCopySandbox(
            resource, plan_id, root, self._target(resource), self.max_snapshot_rows
        )
