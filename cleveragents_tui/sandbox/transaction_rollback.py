"""The ``transaction_rollback`` strategy: one open database transaction, a SAVEPOINT per checkpoint.

The resource's ``location`` is the user's target database (a SQLite file path,
``sqlite:///PATH`` or ``postgresql://...``), never our own store. :meth:`create` opens one
connection and one transaction that stay open for the whole Execute phase; tools run their
SQL through :meth:`TransactionRollbackSandbox.execute`, so everything they do stays
uncommitted until :meth:`~TransactionRollbackSandbox.apply` (``COMMIT``) or
:meth:`~TransactionRollbackSandbox.discard` (``ROLLBACK``). A checkpoint is
``SAVEPOINT sp_<hex>``; rolling back is ``ROLLBACK TO SAVEPOINT``, which keeps that savepoint
and destroys every later one (their references then raise :class:`CheckpointMissingError`).

Things to know (DESIGN.md section 8, ADR-035 "Long-Running Database Transaction Constraint"):

* A savepoint dies with its connection, and the ``agents`` CLI runs each command in its own
  process (Execute in one, Apply or a correction in a later one). So every statement a tool
  runs through :meth:`~TransactionRollbackSandbox.execute` is also appended to a statement log
  (see "Statement log and replay" below); when the sandbox is opened in a later process it is
  *replayed* there: a new transaction re-runs the logged statements in order and re-creates
  the savepoints at the same positions with the same names, and the sandbox is live again.
  A state file under ``root`` records the process, a random token and the checkpoints; a lock
  file (``flock``) is held by the process that holds the transaction, so two processes never
  replay the same sandbox. :meth:`TransactionRollbackStrategy.open` in the same process returns
  the same object; one whose replay failed is returned with
  :attr:`~TransactionRollbackSandbox.lost` True, and its checkpoint operations say the
  transaction was lost, why, and what to do. A process holds the transaction only while it
  uses it and then hands it over (:meth:`~TransactionRollbackSandbox.hand_over`; the protocol
  is in ``transaction_handover.py``): a *released* sandbox is taken by its next use, in any
  process, by replaying the log; one another process holds at that moment says so and is
  tried again at the next use.
* PostgreSQL keeps at most 64 subtransactions per backend in shared memory; past that every
  session slows down. A sandbox holding more savepoints logs a warning once and reports it in
  :attr:`~TransactionRollbackSandbox.savepoint_warning`.
* On PostgreSQL a failed statement aborts the whole transaction until it is rolled back to a
  checkpoint; ``apply`` refuses to commit such a transaction (PostgreSQL would roll it back).
* On SQLite the transaction starts with ``BEGIN IMMEDIATE``: the sandbox holds the file's
  write lock for the whole Execute phase (readers are not blocked in WAL mode, nor in
  rollback-journal mode until the change set outgrows SQLite's page cache).
* The long transaction holds its row locks throughout, and a server timeout such as
  ``idle_in_transaction_session_timeout`` ends it: that is reported as a lost transaction.

Statement log and replay: ``statements.jsonl`` under ``root`` (created with mode 0600: the
SQL and its values may be sensitive) holds one JSON object per line: ``{"savepoint": name,
"rows": digest}`` for a checkpoint (``rows`` when row snapshots are on), ``{"sql", "params", "after", "rowcount"}`` for a statement that succeeded
(``after`` is the index of the savepoint it follows, -1 before the first; ``rowcount`` the rows
it changed, when the driver says; ``"bytes": [name, ...]`` when those parameters of a mapping
are bytes, logged as base64 text and decoded back to bytes on replay), ``{"failed": error, "after"}`` where a statement failed and
left a PostgreSQL transaction failed (replay leaves it failed too, so apply still refuses until
a rollback), or ``{"unreplayable": why, "after"}`` where a statement could not be logged
exactly. Each append is fsynced before ``execute``/``checkpoint`` return;
:meth:`~TransactionRollbackSandbox.rollback` cuts the log back to the savepoint (a new file,
then rename). On SQLite a statement starting with ``SELECT`` is not logged (it cannot change
anything); on PostgreSQL everything is, because a SELECT may call a function that writes.

* The SQL comes from tools and is replayed as it was run: the text with its ``:name`` binds
  and the logged values as parameters, never interpolated; transaction-control statements are
  refused on replay as they were the first time, and savepoint names must be ``sp_<hex>``.
* Parameters must survive JSON exactly (strings, numbers, booleans, None, lists and mappings
  of those; bytes too, as the top-level values of a mapping, through ``"bytes"`` above):
  values such as tuples, dates or decimals, and statement objects instead of
  SQL text, make the log unreplayable from that point (a rollback to an earlier checkpoint
  makes it replayable again). A log that cannot be written, or a transaction that ended inside
  its process (a hidden COMMIT, a failed COMMIT, an unexplained end), makes it unreplayable
  for good; a dropped connection does not (the server rolled the transaction back).
* Replay fails, and the sandbox is reported lost with the cause in
  :attr:`~TransactionRollbackSandbox.lost_reason` and in every error, when a statement fails
  or changes a different number of rows than it did the first time, or when the rows at a
  savepoint differ from the first run (each savepoint line carries a digest of the row
  snapshot, ``"rows"``: a sequence, a default such as ``now()`` or ``random()``, or a
  concurrent commit shows there). A failed replay is rolled back: the target is left as it
  was. Values written after the last savepoint are checked by row count only.
* Apply records ``applying`` (fsynced) in the state file before ``COMMIT``, on PostgreSQL
  with the transaction's id (``txid_current()``). A process that ends during ``COMMIT``
  leaves the outcome unknown to itself; the next process to open the sandbox asks the
  server (``pg_commit.py``): committed, the sandbox is applied (and a rerun of Apply goes
  on); rolled back, the log is replayed as after any hand-over. Only when the server cannot
  say (or on SQLite) is the sandbox reported lost, and never replayed.

Row snapshots: because an older savepoint's state cannot be read without destroying the
newer ones, the sandbox records the rows of every user table (key -> values) when it
is created (the baseline) and at each checkpoint. :meth:`diff`, :meth:`read` and
:meth:`changes_since_baseline` compare those snapshots. A table with a primary key yields
``table/<key>`` paths (composite keys joined by ``,``; parts percent-encoded); a table without
one has no row identity, so its rows are keyed ``table/~<hash>`` and an update shows as one
deletion plus one addition. A table created or dropped also yields a ``table`` entry.
Snapshots cost time and memory in proportion to the database, so they stop above
``max_snapshot_rows`` rows: then those calls raise :class:`SandboxError` saying why, while
checkpoints and rollback keep working. Replay rebuilds the snapshots: the baseline from the
target as it is when replay starts, and one at each live checkpoint as it is re-created; the
snapshots of checkpoints rolled back over before the restart are not rebuilt.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import hashlib
import json
import logging
import os
import re
import secrets
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal
from urllib.parse import quote

from sqlalchemy import Connection, Engine, create_engine, event, inspect, text
from sqlalchemy.engine import URL, CursorResult, RootTransaction
from sqlalchemy.exc import DBAPIError, SQLAlchemyError
from sqlalchemy.pool import NullPool
from sqlalchemy.sql import Select
from sqlalchemy.sql.base import Executable

from cleveragents_tui import failpoints
from cleveragents_tui.database_url import normalise_url
from cleveragents_tui.domain.enums import SandboxStrategyName
from cleveragents_tui.domain.errors import UserError
from cleveragents_tui.domain.resource import Resource
from cleveragents_tui.domain.timeutil import utc_now
from cleveragents_tui.sandbox import pg_commit, transaction_handover
from cleveragents_tui.sandbox.base import (
    ApplyResult,
    Change,
    ChangeKind,
    CheckpointMissingError,
    SandboxError,
)
from cleveragents_tui.sandbox.safety import check_savepoint_name, new_savepoint_name
from cleveragents_tui.sandbox.sql_confinement import (
    POSTGRES_DENIED_FIX,
    confine_sqlite,
    postgres_refusal,
)

log = logging.getLogger(__name__)

STATE_FILE_NAME: Final = "transaction_rollback.json"
LOG_FILE_NAME: Final = "statements.jsonl"
LOCK_FILE_NAME: Final = "transaction_rollback.lock"
POSTGRES_SAVEPOINT_LIMIT: Final = 64
DEFAULT_MAX_SNAPSHOT_ROWS: Final = 200_000
SQLITE_BUSY_TIMEOUT_S: Final = 10.0
_STATE_VERSION: Final = 1
# psycopg.pq.TransactionStatus values (not imported: SQLite users need not load psycopg).
_PG_IDLE, _PG_INERROR, _PG_UNKNOWN = 0, 3, 4

# A statement that would end or restructure the sandbox's transaction. Tools may not run
# these: checkpoints, apply and discard are the sandbox's job. Leading comments are skipped.
_TRANSACTION_CONTROL = re.compile(
    r"^\s*(?:(?:--[^\n]*(?:\n|$)|/\*.*?\*/)\s*)*"
    r"(BEGIN|COMMIT|END|ROLLBACK|SAVEPOINT|RELEASE|ABORT|START\s+TRANSACTION|PREPARE\s+TRANSACTION)\b",
    re.IGNORECASE | re.DOTALL,
)
# A statement that only reads on SQLite (which has no functions that write): not logged.
_SQLITE_READ = re.compile(
    r"^\s*(?:(?:--[^\n]*(?:\n|$)|/\*.*?\*/)\s*)*SELECT\b", re.IGNORECASE | re.DOTALL
)
_LOST_FIX = (
    "discard this sandbox and re-run Execute, or correct the plan with --mode=append "
    "(compensating changes)"
)
_APPLIED_FIX = "correct the plan with --mode=append (compensating changes)"

_PG_TABLES = text(
    """
    SELECT n.nspname, c.relname, n.nspname = current_schema(),
           ARRAY(SELECT a.attname
                 FROM pg_index i
                 CROSS JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k(attnum, position)
                 JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = k.attnum
                 WHERE i.indrelid = c.oid AND i.indisprimary
                 ORDER BY k.position)
    FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE c.relkind IN ('r', 'p') AND NOT c.relispartition
      AND n.nspname <> 'information_schema' AND n.nspname NOT LIKE 'pg\\_%'
      AND has_schema_privilege(n.oid, 'USAGE') AND has_table_privilege(c.oid, 'SELECT')
    """
)

Status = Literal["open", "released", "lost", "applied", "discarded"]


@dataclass(frozen=True, slots=True)
class _Table:
    """One table at one moment: its column names and its rows (row key -> values)."""

    columns: tuple[str, ...]
    rows: dict[str, tuple[Any, ...]]


# Table path ("name" or "schema.name") -> the table.
Snapshot = dict[str, _Table]


def _snapshot_digest(snapshot: Snapshot) -> str:
    """A digest of every row of a snapshot, logged with each savepoint: a replay that gives
    other values (not only other row counts) is caught at the savepoint where they differ."""
    digest = hashlib.sha256()
    for path in sorted(snapshot):
        table = snapshot[path]
        digest.update(repr((path, table.columns)).encode())
        for key in sorted(table.rows):
            digest.update(repr((key, table.rows[key])).encode())
    return digest.hexdigest()


# Connections a forked child inherited from its parent: kept, never used nor closed there.
_FORKED: list[_Live] = []


class SqlStatementError(SandboxError):
    """A tool's SQL statement failed; the sandbox and its checkpoints are still there."""


@dataclass
class _State:
    """What the state file under ``root`` records (no URL, so no credentials)."""

    resource_id: str
    plan_id: str
    pid: int
    token: str
    dialect: str
    created_at: str
    # "applying" while COMMIT runs: a process ending then leaves the outcome unknown.
    status: Literal["open", "applying", "applied"] = "open"
    savepoints: list[str] = field(default_factory=list)
    unreplayable: str | None = None  # why the statement log can no longer be replayed
    released: bool = False  # handed over by ``pid``: the next user replays the log
    commit_txid: int | None = None  # PostgreSQL: the transaction ``applying`` commits

    def dump(self) -> str:
        return json.dumps(
            {
                "version": _STATE_VERSION,
                "strategy": SandboxStrategyName.TRANSACTION_ROLLBACK.value,
                "resource_id": self.resource_id,
                "plan_id": self.plan_id,
                "pid": self.pid,
                "token": self.token,
                "dialect": self.dialect,
                "created_at": self.created_at,
                "status": self.status,
                "savepoints": self.savepoints,
                "unreplayable": self.unreplayable,
                "released": self.released,
                "commit_txid": self.commit_txid,
            },
            indent=2,
        )

    @classmethod
    def load(cls, path: Path) -> _State | None:
        try:
            raw = path.read_text("utf-8")
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise SandboxError(f"cannot read sandbox state {path}: {exc}") from exc
        try:
            data = json.loads(raw)
            status = data["status"]
            if data["version"] != _STATE_VERSION or status not in ("open", "applying", "applied"):
                raise ValueError(f"unsupported version or status in {path}")
            savepoints = [check_savepoint_name(str(name)) for name in data["savepoints"]]
            unreplayable = data.get("unreplayable")
            txid = data.get("commit_txid")
            return cls(
                resource_id=str(data["resource_id"]),
                plan_id=str(data["plan_id"]),
                pid=int(data["pid"]),
                token=str(data["token"]),
                dialect=str(data["dialect"]),
                created_at=str(data["created_at"]),
                status=status,
                savepoints=savepoints,
                unreplayable=None if unreplayable is None else str(unreplayable),
                released=bool(data.get("released", False)),
                commit_txid=None if txid is None else int(txid),
            )
        except (ValueError, KeyError, TypeError, UserError) as exc:
            raise SandboxError(
                f"the sandbox state file {path} is damaged ({exc})",
                "discard the sandbox and re-run Execute",
            ) from exc

    def save(self, path: Path, *, durable: bool = False) -> None:
        """Write atomically (temporary file + rename). Without ``durable`` no fsync: the file
        says which process holds the transaction and which checkpoints are valid, and the
        statement log (fsynced) holds what replay needs."""
        if durable:
            _write_private(path, self.dump().encode("utf-8"))
            return
        temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        temporary.write_text(self.dump(), "utf-8")
        os.replace(temporary, path)


class _ReplayFailed(Exception):
    """Replaying the statement log did not reproduce the transaction; the text says why."""


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _fsync_dir(folder: Path) -> None:
    """Make a rename in ``folder`` durable (best effort: not every file system allows it)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        with contextlib.suppress(OSError):
            os.fsync(fd)
    finally:
        os.close(fd)


def _write_private(path: Path, data: bytes) -> None:
    """Replace ``path`` atomically by ``data``: a new mode-0600 file, fsync, rename."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    temporary.unlink(missing_ok=True)
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        try:
            _write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)


def _append_private(path: Path, data: bytes) -> None:
    """Append and fsync. Never creates the file: a log deleted meanwhile must not restart."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND)
    try:
        _write_all(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)


def _log_line(entry: Mapping[str, Any]) -> bytes:
    return (json.dumps(entry, allow_nan=False) + "\n").encode("ascii")


def _try_lock(path: Path) -> int | None:
    """An exclusive ``flock`` on ``path`` (made 0600 if missing); None when another open
    file holds it. The lock lasts until the descriptor is closed or the process ends."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    except BaseException:
        os.close(fd)
        raise
    return fd


def _read_log(path: Path) -> tuple[list[dict[str, Any]], str | None]:
    """The log's entries, and why it cannot be replayed (None when it can).

    A last line without its newline is a write cut short by the process ending before
    ``execute`` or ``checkpoint`` returned: it is left out.
    """
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return [], f"there is no statement log {path}"
    except OSError as exc:
        return [], f"cannot read the statement log {path}: {exc}"
    lines = raw.split(b"\n")
    if lines[-1]:
        log.warning("ignoring an incomplete last line of %s", path)
    entries: list[dict[str, Any]] = []
    seen: set[str] = set()
    for number, line in enumerate(lines[:-1], start=1):
        try:
            entry = json.loads(line)
            if not isinstance(entry, dict):
                raise TypeError("not an object")
            if "savepoint" in entry:
                name = check_savepoint_name(str(entry["savepoint"]))
                if name in seen:
                    raise ValueError(f"savepoint {name} appears twice")
                seen.add(name)
            elif "unreplayable" in entry:
                return [], str(entry["unreplayable"])
            elif "failed" in entry:
                if not isinstance(entry["failed"], str) or entry["after"] != len(seen) - 1:
                    raise ValueError("unexpected fields")
            else:
                params = entry["params"]
                if (
                    not isinstance(entry["sql"], str)
                    or entry["after"] != len(seen) - 1
                    or not (
                        params is None
                        or isinstance(params, dict)
                        or (isinstance(params, list) and all(isinstance(p, dict) for p in params))
                    )
                    or not isinstance(entry.get("rowcount", 0), int)
                ):
                    raise ValueError("unexpected fields")
                _logged_bytes(entry)
            entries.append(entry)
        except (ValueError, KeyError, TypeError, UserError) as exc:
            return [], f"line {number} of the statement log {path} is damaged ({exc})"
    return entries, None


def _logged_bytes(entry: Mapping[str, Any]) -> list[str]:
    """The names a statement entry logs as base64 bytes (checked: text values it has)."""
    names = entry.get("bytes", [])
    params = entry["params"]
    if not isinstance(names, list) or (names and not isinstance(params, dict)):
        raise ValueError("unexpected bytes field")
    for name in names:
        if not isinstance(name, str) or not isinstance(params.get(name), str):
            raise ValueError(f"bytes parameter {name!r} is not logged as text")
    return names


def _logged_params(entry: Mapping[str, Any]) -> Any:
    """A logged statement's parameters as they were run: base64-logged bytes decoded."""
    names = _logged_bytes(entry)
    if not names:
        return entry["params"]
    params = dict(entry["params"])
    for name in names:
        params[name] = base64.b64decode(params[name], validate=True)
    return params


def _target_url(resource: Resource) -> URL:
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


def _display(url: URL) -> str:
    return url.render_as_string(hide_password=True)


def _first_line(exc: BaseException) -> str:
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


def _make_engine(url: URL, plan_id: str) -> Engine:
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


def _json_default(value: object) -> object:
    if isinstance(value, bytes | bytearray | memoryview):
        return "\\x" + bytes(value).hex()
    return str(value)


def _render_row(columns: Sequence[str], row: Sequence[Any]) -> bytes:
    rendered = json.dumps(
        dict(zip(columns, row, strict=True)),
        default=_json_default,
        ensure_ascii=False,
        separators=(",", ":"),
    )
    return rendered.encode("utf-8")


_PLAIN_PART = re.compile(r"^[A-Za-z0-9 _.:@+=~-]*$")


def _path_part(value: object) -> str:
    """A key or name as a path part: ``/``, ``,``, ``%`` and other specials percent-encoded."""
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).hex()
    raw = str(value)
    return raw if _PLAIN_PART.match(raw) else quote(raw, safe=" _.:@+=~-")


def _compare(old: Snapshot, new: Snapshot) -> list[Change]:
    """Row changes ``table/key``, plus a bare ``table`` entry for a table created or dropped.

    When a table's columns changed, every row it kept counts as modified.
    """
    changes: list[Change] = []
    empty = _Table((), {})
    for path in old.keys() | new.keys():
        if path not in old:
            changes.append(Change(path, ChangeKind.ADDED))
        elif path not in new:
            changes.append(Change(path, ChangeKind.DELETED))
        before, after = old.get(path, empty), new.get(path, empty)
        if before is after:
            continue
        reshaped = bool(before.rows and after.rows) and before.columns != after.columns
        for key in before.rows.keys() | after.rows.keys():
            old_row, new_row = before.rows.get(key), after.rows.get(key)
            if old_row is None:
                changes.append(Change(f"{path}/{key}", ChangeKind.ADDED))
            elif new_row is None:
                changes.append(Change(f"{path}/{key}", ChangeKind.DELETED))
            elif reshaped or old_row != new_row:
                changes.append(Change(f"{path}/{key}", ChangeKind.MODIFIED))
    return sorted(changes, key=lambda change: change.path)


@dataclass
class _Live:
    engine: Engine
    connection: Connection
    transaction: RootTransaction


class TransactionRollbackSandbox:
    """One open transaction on the target database, checkpointed with savepoints.

    Tools use :meth:`execute`. Every method holds a lock, so the sandbox may be used from
    several threads, one call at a time. ``workdir`` is None: a database is not a directory.
    """

    def __init__(
        self,
        resource: Resource,
        plan_id: str,
        root: Path,
        state: _State,
        *,
        max_snapshot_rows: int,
        savepoint_warning_at: int,
    ) -> None:
        """Made by :class:`TransactionRollbackStrategy`; not meant to be built directly."""
        self._resource = resource
        self._plan_id = plan_id
        self._root = root
        self._state = state
        self._max_snapshot_rows = max_snapshot_rows
        self._savepoint_warning_at = savepoint_warning_at
        self._lock = threading.RLock()
        self._live: _Live | None = None
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
    def resource(self) -> Resource:
        return self._resource

    @property
    def workdir(self) -> Path | None:
        return None

    @property
    def plan_id(self) -> str:
        return self._plan_id

    @property
    def root(self) -> Path:
        return self._root

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

    # -- lifecycle (called by the strategy) ------------------------------------------------

    def _connect(self, url: URL) -> _Live:
        """A new engine, connection and open transaction on the target."""
        engine = _make_engine(url, self._plan_id)
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
        return _Live(engine, connection, transaction)

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

    def _start(self, url: URL) -> None:
        """Connect, begin, take the baseline snapshot, write an empty log and the state file,
        register. The strategy has taken the lock already."""
        try:
            self._live = self._connect(url)
        except SQLAlchemyError as exc:
            raise SandboxError(
                f"cannot open a transaction on {_display(url)} for resource "
                f"{self._resource.resource_id}: {_first_line(exc)}",
                "check the resource location, and that the database is reachable and not "
                "locked by another writer",
            ) from exc
        try:
            self._init_snapshots()
            _write_private(self._log_path, b"")
            self._state.save(self._root / STATE_FILE_NAME)
        except BaseException as exc:
            self._close()
            if isinstance(exc, SQLAlchemyError):
                raise SandboxError(
                    f"cannot read the rows of {_display(url)} for resource "
                    f"{self._resource.resource_id}: {_first_line(exc)}",
                    "check that the database is reachable and readable",
                ) from exc
            if isinstance(exc, OSError):
                raise SandboxError(
                    f"cannot write the sandbox state under {self._root}: {exc}",
                    "check that the folder is writable",
                ) from exc
            raise
        transaction_handover.register(self)

    def _reopen(self, state: _State) -> None:
        """Open a sandbox this process has no object for, and take it (:meth:`_acquire`)
        unless it was applied, or this process held it and lost its connection."""
        with self._lock:
            self._reopen_locked(state)

    def _reopen_locked(self, state: _State) -> None:
        self._state = state
        self._stack = list(state.savepoints)
        self._log_broken = state.unreplayable
        if state.status == "applied":
            self._mark("applied", self._applied_reason(), _APPLIED_FIX)
            return
        if state.pid == os.getpid() and not state.released:
            held = "was lost: this process no longer holds its connection"
            self._mark("lost", self._lost_reason(held), _LOST_FIX)
            return
        self._status = "released"
        self._acquire()

    def _acquire(self) -> None:
        """Take a released sandbox: its lock, then a replay of its statement log as it is on
        disk now (another process may have rolled it back and gone on since). Leaves it
        ``open``; or ``released`` with the reason when another process holds it (the next
        use tries again); or ``lost``, ``applied`` or ``discarded``."""
        try:
            fd = _try_lock(self._root / LOCK_FILE_NAME)
        except OSError as exc:
            raise SandboxError(
                f"cannot lock the sandbox under {self._root}: {exc}",
                "check that the folder is writable",
            ) from exc
        if fd is None:
            holder = "another process"
            with contextlib.suppress(SandboxError):
                current = _State.load(self._root / STATE_FILE_NAME)
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
            fresh = _State.load(self._root / STATE_FILE_NAME)
        except SandboxError:
            self._release_lock()
            raise
        if fresh is None:
            self._release_lock()
            self._mark(
                "discarded",
                f"the sandbox of {self._resource.resource_id} under {self._root} was discarded",
                "re-run Execute",
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
            self._mark("applied", self._applied_reason(), _APPLIED_FIX)
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
                "check the database; then discard this sandbox, and re-run Execute or "
                "correct the plan with --mode=append if the changes are missing",
            )
            return
        entries, problem = _read_log(self._log_path)
        try:
            if problem is not None or fresh.unreplayable is not None:
                raise _ReplayFailed(
                    f"its statement log cannot be replayed: {fresh.unreplayable or problem}"
                )
            self._replay(entries)
        except _ReplayFailed as exc:
            self._close()
            self._stack = list(fresh.savepoints)
            self._mark("lost", self._lost_reason(f"{ended}, and {exc}"), _LOST_FIX)
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
            _FORKED.append(live)  # closing it here would end the parent's connection
        self._release_lock()
        if self._status == "open":
            self._status, self._unavailable = "released", None

    def _replay(self, entries: list[dict[str, Any]]) -> None:
        """Re-run ``entries`` in a new transaction; on failure roll it back and raise."""
        try:
            url = _target_url(self._resource)
            self._live = live = self._connect(url)
        except SandboxError as exc:
            raise _ReplayFailed(f"its target is unusable: {exc.problem}") from exc
        except SQLAlchemyError as exc:
            raise _ReplayFailed(
                f"a new transaction could not be opened on {_display(url)}: {_first_line(exc)}"
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
                            _snapshot_digest(snapshot),
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
                result = live.connection.execute(text(sql), _logged_params(entry))
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
            cause = exc.problem if isinstance(exc, UserError) else _first_line(exc)
            raise _ReplayFailed(f"{doing} failed: {cause}") from exc
        self._entries = entries

    def _commit_outcome(self, state: _State) -> pg_commit.Outcome | None:
        """How the COMMIT of an Apply whose process ended went, per the server (None: unknown)."""
        if state.dialect != "postgresql" or state.commit_txid is None:
            return None
        try:
            url = _target_url(self._resource)
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
        self._mark("applied", self._applied_reason(), _APPLIED_FIX)

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
        self._mark("lost", reason, _LOST_FIX)
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
        if not self._internal and _TRANSACTION_CONTROL.match(statement):
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
            first = " ".join(sql.split())[:80]
            raise SqlStatementError(
                f"statement {first!r} refused in the sandbox of {self._resource.resource_id}: "
                f"{why}",
                POSTGRES_DENIED_FIX,
            )

    def _pg_status(self, live: _Live) -> int:
        raw: Any = live.connection.connection.dbapi_connection
        return int(raw.info.transaction_status)

    def _transaction_ended(self, live: _Live) -> bool:
        """Whether the driver says no transaction is open (a statement or the server ended it)."""
        if live.connection.closed or live.connection.invalidated:
            return True
        if self.dialect == "sqlite":
            raw: Any = live.connection.connection.dbapi_connection
            return not raw.in_transaction
        return self._pg_status(live) in (_PG_IDLE, _PG_UNKNOWN)

    def _failed(self, live: _Live) -> bool:
        """PostgreSQL aborts the whole transaction on an error, until ROLLBACK TO SAVEPOINT."""
        return self.dialect == "postgresql" and self._pg_status(live) == _PG_INERROR

    def _require_live(self, error: type[SandboxError] = SandboxError) -> _Live:
        if self._status == "released":
            self._acquire()
        if self._live is not None and self._transaction_ended(self._live):
            self._lose("the connection or its transaction ended")
        if self._live is None:
            reason, fix = self._unavailable or ("the sandbox has no transaction", _LOST_FIX)
            raise error(reason, fix)
        return self._live

    def _db_error(self, exc: SQLAlchemyError, doing: str) -> SandboxError:
        """The error to raise for a failed statement of ours; a dropped connection loses all."""
        if isinstance(exc, DBAPIError) and exc.connection_invalidated:
            # The server rolls back a transaction whose connection ended: still replayable.
            self._lose(
                f"the connection dropped during {doing}: {_first_line(exc)}", replayable=True
            )
            reason, fix = self._unavailable or (doing, _LOST_FIX)
            return CheckpointMissingError(reason, fix)
        return SandboxError(
            f"{doing} failed on resource {self._resource.resource_id}: {_first_line(exc)}"
        )

    def _run_internal(self, live: _Live, sql: str, doing: str) -> None:
        try:
            with self._internal_sql():
                live.connection.exec_driver_sql(sql)
        except SQLAlchemyError as exc:
            raise self._db_error(exc, doing) from exc

    @staticmethod
    def _quoted(live: _Live, name: str) -> str:
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

    def _require_checkpoint(self, ref: str) -> _Live:
        check_savepoint_name(ref)
        try:
            live = self._require_live(CheckpointMissingError)
        except CheckpointMissingError:
            raise self._missing(ref) from None
        if ref in self._stack and ref not in self._dropped:
            return live
        raise self._missing(ref)

    # -- the statement log ----------------------------------------------------------------

    @property
    def _log_path(self) -> Path:
        return self._root / LOG_FILE_NAME

    @property
    def unreplayable_reason(self) -> str | None:
        """None while a later process can replay the statement log, else why it cannot."""
        if self._log_broken is not None:
            return self._log_broken
        for entry in self._entries:
            if "unreplayable" in entry:
                return str(entry["unreplayable"])
        return None

    def _break_log(self, why: str) -> None:
        """The log no longer describes the transaction, for good: record it in the state."""
        if self._log_broken is not None:
            return
        self._log_broken = self._state.unreplayable = why
        log.warning("the sandbox of %s cannot be replayed: %s", self._resource.resource_id, why)
        self._save_state()

    def _append(self, entry: dict[str, Any]) -> None:
        if self._log_broken is not None:
            return
        self._entries.append(entry)
        try:
            _append_private(self._log_path, _log_line(entry))
        except OSError as exc:
            self._break_log(f"writing the statement log {self._log_path} failed: {exc}")

    def _log_statement(
        self,
        sql: str | Executable,
        params: Mapping[str, Any] | Sequence[Mapping[str, Any]] | None,
        result: CursorResult[Any],
    ) -> None:
        """Append a statement that succeeded, or say where the log stops being replayable."""
        after = len(self._stack) - 1
        if not isinstance(sql, str):
            if self.dialect == "sqlite" and isinstance(sql, Select):
                return
            self._append(
                {
                    "unreplayable": f"a {type(sql).__name__} object was run instead of SQL "
                    "text, and only SQL text is logged",
                    "after": after,
                }
            )
            return
        if self.dialect == "sqlite" and _SQLITE_READ.match(sql):
            return
        plain: object
        if params is None:
            plain = None
        elif isinstance(params, Mapping):
            plain = dict(params)
        else:
            plain = [dict(each) for each in params]
        entry: dict[str, Any] = {"sql": sql, "params": plain, "after": after}
        if isinstance(plain, dict):
            binary = sorted(k for k, v in plain.items() if isinstance(v, bytes | bytearray))
            if binary:  # BLOB values (local/run-sql's blobs): base64 text, decoded on replay
                for key in binary:
                    plain[key] = base64.b64encode(bytes(plain[key])).decode("ascii")
                entry["bytes"] = binary
        if not result.returns_rows and result.rowcount >= 0:
            entry["rowcount"] = result.rowcount
        try:
            exact = json.loads(_log_line(entry)) == entry
        except (TypeError, ValueError):
            exact = False
        if not exact:
            first = sql.strip()[:80]
            entry = {
                "unreplayable": f"statement {first!r} had parameter values that JSON cannot "
                "carry exactly (only strings, numbers, booleans, None, lists and mappings "
                "are logged)",
                "after": after,
            }
        self._append(entry)

    def _truncate_log(self, ref: str) -> None:
        """Cut the log back to savepoint ``ref`` (kept): a new file, then rename."""
        if self._log_broken is not None:
            return
        marks = [i for i, entry in enumerate(self._entries) if entry.get("savepoint") == ref]
        if not marks:
            self._break_log(f"savepoint {ref} is missing from the statement log")
            return
        del self._entries[marks[0] + 1 :]
        try:
            if not self._log_path.is_file():
                raise FileNotFoundError(f"{self._log_path} was removed")
            _write_private(self._log_path, b"".join(_log_line(e) for e in self._entries))
        except OSError as exc:
            self._break_log(f"rewriting the statement log {self._log_path} failed: {exc}")

    def _save_state(self) -> None:
        """Best effort once the database step is done: the file only serves diagnosis."""
        self._state.savepoints = list(self.checkpoints)
        try:
            self._state.save(self._root / STATE_FILE_NAME)
        except OSError as exc:
            log.warning("cannot update the sandbox state under %s: %s", self._root, exc)

    # -- the tool-facing API ---------------------------------------------------------------

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
                    self._append({"failed": _first_line(exc), "after": len(self._stack) - 1})
                raise SqlStatementError(
                    f"SQL failed in the sandbox of {self._resource.resource_id}: "
                    f"{_first_line(exc)}",
                    fix,
                ) from exc
            if self._transaction_ended(live):
                self._lose(
                    "an SQL statement ended it, so what ran before that statement may have "
                    "been committed to the real database"
                )
                reason, fix = self._unavailable or ("transaction ended", _LOST_FIX)
                raise SandboxError(reason, fix)
            self._log_statement(sql, params, result)
            return result

    # -- snapshots -------------------------------------------------------------------------

    def _tables(self, connection: Connection) -> list[tuple[str, str | None, str, list[str]]]:
        """(path, schema, table, primary-key columns) of every user table, sorted by path.

        On PostgreSQL only tables this login may read: one refused SELECT would abort the
        whole transaction. Partitions are read through their parent, temporary tables skipped.
        """
        if self.dialect == "sqlite":
            inspector = inspect(connection)
            return [
                (_path_part(table), None, table, list(pk["constrained_columns"]))
                for (_, table), pk in sorted(inspector.get_multi_pk_constraint().items())
            ]
        rows = connection.execute(_PG_TABLES).all()
        tables = [
            (
                _path_part(table) if is_default else f"{_path_part(schema)}.{_path_part(table)}",
                schema,
                table,
                list(pk),
            )
            for schema, table, is_default, pk in rows
        ]
        return sorted(tables, key=lambda entry: entry[0])

    def _take_snapshot(self) -> Snapshot | None:
        """Every user table's rows as the transaction sees them; None above the row limit."""
        live = self._live
        if live is None:
            raise SandboxError("the sandbox has no transaction")
        connection = live.connection
        preparer = connection.dialect.identifier_preparer
        snapshot: Snapshot = {}
        remaining = self._max_snapshot_rows
        for path, schema, table, pk_columns in self._tables(connection):
            qualified = preparer.quote_identifier(table)
            if schema is not None:
                qualified = f"{preparer.quote_identifier(schema)}.{qualified}"
            # Identifiers from the catalog, always quoted: no user text reaches this SQL.
            result = connection.exec_driver_sql(f"SELECT * FROM {qualified}")  # noqa: S608
            columns = tuple(result.keys())
            positions = [columns.index(column) for column in pk_columns]
            rows: dict[str, tuple[Any, ...]] = {}
            for row in result:
                remaining -= 1
                if remaining < 0:
                    result.close()
                    return None
                values = tuple(row)
                if positions:
                    rows[",".join(_path_part(values[i]) for i in positions)] = values
                    continue
                digest = hashlib.blake2b(repr(values).encode(), digest_size=8).hexdigest()
                key, duplicate = f"~{digest}", 1
                while key in rows:
                    duplicate += 1
                    key = f"~{digest}#{duplicate}"
                rows[key] = values
            table_now = _Table(columns, rows)
            previous = None if self._last_snapshot is None else self._last_snapshot.get(path)
            # Share unchanged tables between snapshots, so memory grows with changes only.
            snapshot[path] = (
                previous if previous is not None and previous == table_now else table_now
            )
        self._last_snapshot = snapshot
        return snapshot

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

    # -- the Sandbox protocol --------------------------------------------------------------

    def checkpoint(self) -> str:
        """``SAVEPOINT sp_<hex>`` plus a row snapshot; returns the savepoint name."""
        with self._lock:
            live = self._require_live()
            if self._failed(live):
                raise SandboxError(
                    f"cannot checkpoint {self._resource.resource_id}: its PostgreSQL "
                    "transaction failed after an SQL error",
                    "roll back to a checkpoint first",
                )
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
                entry["rows"] = _snapshot_digest(snapshot)
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
        return _compare(old, new)

    def read(self, ref: str, path: str) -> bytes | None:
        """Row ``table/key`` at checkpoint ``ref`` as UTF-8 JSON (``{"column": value}``);
        None when the row is absent there or ``path`` names no row (a bare table name)."""
        snapshot = self._snapshot_at(ref)
        table_path, separator, key = path.partition("/")
        table = snapshot.get(table_path)
        if table is None or not separator:
            return None
        row = table.rows.get(key)
        return None if row is None else _render_row(table.columns, row)

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
            return _compare(self._baseline, current)

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
            live = self._require_live()
            if self._failed(live):
                raise SandboxError(
                    f"cannot apply {self._resource.resource_id}: its PostgreSQL transaction "
                    "failed after an SQL error and would only roll back",
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
                    raise SandboxError(
                        f"COMMIT failed on {self._resource.resource_id}: {_first_line(exc)}",
                        "the sandbox is unchanged: retry apply when the database is free",
                    ) from exc
                self._lose(f"COMMIT failed and the database rolled back: {_first_line(exc)}")
                raise SandboxError(
                    f"nothing was applied to {self._resource.resource_id}: {_first_line(exc)}",
                    _LOST_FIX,
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
            self._mark("applied", self._applied_reason(), _APPLIED_FIX)
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


class TransactionRollbackStrategy:
    """Makes :class:`TransactionRollbackSandbox` objects.

    ``max_snapshot_rows`` bounds the row snapshots (0 turns them off: checkpoints and
    rollback still work, while diff, read and changes_since_baseline raise SandboxError).
    ``savepoint_warning_at`` is the PostgreSQL savepoint count above which a warning is given.
    """

    name: SandboxStrategyName = SandboxStrategyName.TRANSACTION_ROLLBACK

    def __init__(
        self,
        *,
        max_snapshot_rows: int = DEFAULT_MAX_SNAPSHOT_ROWS,
        savepoint_warning_at: int = POSTGRES_SAVEPOINT_LIMIT,
    ) -> None:
        if max_snapshot_rows < 0 or savepoint_warning_at < 1:
            raise ValueError("max_snapshot_rows must be >= 0 and savepoint_warning_at >= 1")
        self.max_snapshot_rows = max_snapshot_rows
        self.savepoint_warning_at = savepoint_warning_at

    def _sandbox(
        self, resource: Resource, plan_id: str, root: Path, state: _State
    ) -> TransactionRollbackSandbox:
        return TransactionRollbackSandbox(
            resource,
            plan_id,
            root,
            state,
            max_snapshot_rows=self.max_snapshot_rows,
            savepoint_warning_at=self.savepoint_warning_at,
        )

    def create(self, resource: Resource, plan_id: str, root: Path) -> TransactionRollbackSandbox:
        """Open the transaction on the target. Refused while a live sandbox exists at ``root``
        (this process or another holds its lock); a lost, applied or unreadable one there is
        replaced, statement log included."""
        url = _target_url(resource)
        state_path = root / STATE_FILE_NAME
        try:
            existing = _State.load(state_path)
        except SandboxError as exc:
            log.warning("replacing a damaged sandbox state: %s", exc)
            existing = None

        def refuse(where: str) -> SandboxError:
            plan = "" if existing is None else f" for plan {existing.plan_id}"
            return SandboxError(
                f"resource {resource.resource_id} already has an open sandbox under {root}"
                f"{plan}, held by {where}",
                "apply or discard it first",
            )

        current = transaction_handover.registered(root)
        if isinstance(current, TransactionRollbackSandbox) and current.held:
            raise refuse("this process")
        try:
            root.mkdir(parents=True, exist_ok=True)
            lock_fd = _try_lock(root / LOCK_FILE_NAME)
        except OSError as exc:
            raise SandboxError(f"cannot create the sandbox folder {root}: {exc}") from exc
        if lock_fd is None:
            raise refuse("another process" if existing is None else f"process {existing.pid}")
        state = _State(
            resource_id=resource.resource_id,
            plan_id=plan_id,
            pid=os.getpid(),
            token=secrets.token_hex(16),
            dialect=url.get_backend_name(),
            created_at=utc_now().isoformat(),
        )
        sandbox = self._sandbox(resource, plan_id, root, state)
        sandbox._lock_fd = lock_fd
        try:
            sandbox._start(url)
        except BaseException:
            sandbox._close()  # releases the lock
            if existing is None:
                with contextlib.suppress(OSError):
                    (root / LOCK_FILE_NAME).unlink(missing_ok=True)
                    root.rmdir()  # only when empty
            raise
        return sandbox

    def open(self, resource: Resource, plan_id: str, root: Path) -> TransactionRollbackSandbox:
        """The live sandbox when this process holds it; one replayed from its statement log
        when the process that held it has ended; else one that reports it lost and why."""
        state_path = root / STATE_FILE_NAME
        try:
            state = _State.load(state_path)
        except SandboxError as exc:
            raise SandboxError(exc.problem, f"delete {state_path} and re-run Execute") from exc
        if state is None:
            raise SandboxError(
                f"no transaction_rollback sandbox of {resource.resource_id} for plan "
                f"{plan_id} under {root}",
                "it was discarded or never created: re-run Execute",
            )
        if state.resource_id != resource.resource_id or state.plan_id != plan_id:
            raise SandboxError(
                f"the sandbox under {root} belongs to {state.resource_id} of plan "
                f"{state.plan_id}, not to {resource.resource_id} of plan {plan_id}",
                "open the sandbox folder of this resource and plan",
            )
        current = transaction_handover.registered(root)
        if (
            isinstance(current, TransactionRollbackSandbox)
            and current.status in ("open", "released")
            and current.plan_id == plan_id
        ):
            return current  # one object per sandbox in a process: see transaction_handover
        sandbox = self._sandbox(resource, plan_id, root, state)
        transaction_handover.register(sandbox)
        sandbox._reopen(state)
        return sandbox
