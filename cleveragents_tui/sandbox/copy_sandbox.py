"""What the SQLite and PostgreSQL copy sandboxes share: their state file, one operation at a
time across threads and processes, the checkpoint list, diff and read over checkpoint
snapshots, a statement's result read whole, and Apply's steps.

Each copy says how it loads its state, takes the rows at a checkpoint and lands its rows;
the rest is here. See docs/sandboxes.md.
"""

from __future__ import annotations

import contextlib
import json
import threading
from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Final, Generic, Literal, Self, TypeVar

from sqlalchemy import Engine

from cleveragents_tui.domain.enums import SandboxStrategyName
from cleveragents_tui.domain.resource import Resource
from cleveragents_tui.domain.wording import counted
from cleveragents_tui.sandbox.base import (
    ApplyResult,
    Change,
    NothingLandedError,
    SandboxError,
    start_again_fix,
)
from cleveragents_tui.sandbox.database_common import (
    DatabaseSandboxIdentity,
    applied_error,
    load_state_file,
    locked_state,
)
from cleveragents_tui.sandbox.landing import LandConflictError, Landed
from cleveragents_tui.sandbox.read_result import Params, ReadResult
from cleveragents_tui.sandbox.safety import check_savepoint_name
from cleveragents_tui.sandbox.transaction.core import SqlStatementError
from cleveragents_tui.sandbox.transaction.snapshots import (
    DEFAULT_MAX_SNAPSHOT_ROWS,
    Snapshot,
    compare,
    read_row,
)
from cleveragents_tui.sandbox.transaction.state import write_private

_STATE_VERSION: Final = 1


@dataclass(kw_only=True)
class CopyState:
    """A copy sandbox's state file: whose it is, whether it was applied, the valid
    checkpoints. Each copy adds the fields of its own (``_parse_more`` reads them)."""

    STRATEGY: ClassVar[str]

    resource_id: str
    plan_id: str
    created_at: str
    status: Literal["open", "applied"] = "open"
    checkpoints: list[str] = field(default_factory=list)

    def dump(self) -> bytes:
        document = {"version": _STATE_VERSION, "strategy": self.STRATEGY, **asdict(self)}
        return json.dumps(document, indent=2).encode("utf-8")

    @classmethod
    def load(cls, path: Path, plan_id: str) -> Self | None:
        return load_state_file(path, cls._parse, plan_id)

    @classmethod
    def _parse(cls, data: dict[str, Any]) -> Self:
        if data["version"] != _STATE_VERSION or data["status"] not in ("open", "applied"):
            raise ValueError("unsupported version or status")
        return cls(
            resource_id=str(data["resource_id"]),
            plan_id=str(data["plan_id"]),
            created_at=str(data["created_at"]),
            status=data["status"],
            checkpoints=[check_savepoint_name(str(ref)) for ref in data["checkpoints"]],
            **cls._parse_more(data),
        )

    @classmethod
    def _parse_more(cls, data: dict[str, Any]) -> dict[str, Any]:
        """The fields a copy adds, read from the file's ``data`` (none here)."""
        del data
        return {}

    def save(self, path: Path) -> None:
        """Atomically (mode 0600, fsync, rename): the state names the valid checkpoints."""
        write_private(path, self.dump())

    def forget(self, ref: str) -> None:
        """Checkpoint ``ref`` is no longer valid (a copy forgets what it kept of it too)."""
        self.checkpoints.remove(ref)

    @classmethod
    def refuse_open(cls, resource: Resource, plan_id: str, root: Path, file_name: str) -> None:
        """Refuse to make a sandbox for ``plan_id`` over one still open under ``root`` (its
        changes would be lost); an applied one may be replaced. ``file_name``: the copy's
        state file."""
        path = root / file_name
        existing = cls.load(path, plan_id) if path.is_file() else None
        if existing is not None and existing.status == "open":
            raise SandboxError(
                f"resource {resource.resource_id} already has an open sandbox under {root} "
                f"for plan {existing.plan_id}",
                "apply or discard it first",
            )


CopyStateT = TypeVar("CopyStateT", bound=CopyState)
TargetT = TypeVar("TargetT")


class CopySandbox(DatabaseSandboxIdentity, ABC, Generic[CopyStateT, TargetT]):
    """A database sandbox kept as copies: no transaction between calls, so every process
    sees and changes the same copies, one operation at a time (``flock``). ``target``: the
    real database (its file, or its server's URL)."""

    STATE_FILE_NAME: ClassVar[str]
    LOCK_FILE_NAME: ClassVar[str]

    def __init__(
        self, resource: Resource, plan_id: str, root: Path, target: TargetT, max_rows: int
    ) -> None:
        super().__init__(resource, plan_id, root)
        self._target = target
        self._max_rows = max_rows
        self._lock = threading.RLock()
        self._engine: Engine | None = None  # the working copy's, while an operation uses it

    @abstractmethod
    def _load_state(self) -> CopyStateT | None:
        """The state file under ``root``; None when there is none."""

    @abstractmethod
    def _rows_at(self, state: CopyStateT, ref: str) -> Snapshot:
        """The rows at checkpoint ``ref`` (CheckpointMissingError when it was dropped)."""

    @abstractmethod
    def _execute(self, sql: str, params: Params, read_only_rows: int | None = None) -> ReadResult:
        """Run the statement ``sql`` (text) in the working copy; with ``read_only_rows``, on
        a read-only connection that reads at most that many rows (:meth:`query`)."""

    @abstractmethod
    def _changes(self, state: CopyStateT) -> list[Change]:
        """Row changes of the working copy against the target at creation."""

    @abstractmethod
    def _land(self, state: CopyStateT) -> Landed:
        """Land the working copy's changes in the target in one transaction: raises
        LandConflictError, or the error of :meth:`_refused`, leaving the target as it was."""

    @abstractmethod
    def _land_refusal(self, state: CopyStateT) -> str | None:
        """What :meth:`_land` would refuse now (its LandConflictError's words), read only:
        None when it would land, or when the target cannot be read to tell."""

    def _opened(self, state: CopyStateT) -> None:
        """Called with the state at the start of each operation (nothing by default)."""

    def _settle(self, state: CopyStateT) -> None:
        """Finish what a crash interrupted, before Apply reads the copies (nothing by default)."""

    def _drop_copies(self, state: CopyStateT) -> None:
        """What Apply no longer needs, once applied (nothing by default)."""

    def _save(self, state: CopyStateT) -> None:
        state.save(self._root / self.STATE_FILE_NAME)

    def _close(self) -> None:
        engine, self._engine = self._engine, None
        if engine is not None:
            engine.dispose()

    def execute(self, sql: str, params: Params = None) -> ReadResult:
        """Run one statement in the copy, committed there at once (``:name`` binds)."""
        return self._execute(self._text(sql), params)

    def query(self, sql: str, params: Params, limit: int) -> ReadResult:
        """Run one statement on a read-only connection to the copy, at most ``limit`` rows
        read: any write fails in the database itself (``local/query-sql``, which Strategize
        runs, must change nothing)."""
        return self._execute(self._text(sql), params, read_only_rows=limit)

    def _text(self, sql: object) -> str:
        if not isinstance(sql, str):
            raise SqlStatementError(
                f"only SQL text runs in the sandbox of {self._resource.resource_id}",
                "pass the statement as text",
            )
        return sql

    def apply(self) -> ApplyResult:
        """Land what the plan produced in the target, in one transaction, or raise leaving
        the target as it was. Applying again is a no-op."""
        with self._operation() as state:
            if state.status == "applied":
                return self._already_applied()
            self._settle(state)
            changes: tuple[Change, ...] = ()
            with contextlib.suppress(SandboxError):
                changes = tuple(self._changes(state))
            try:
                landed = self._land(state)
            except LandConflictError as exc:
                raise self._conflict(str(exc)) from exc
            state.status = "applied"
            self._save(state)
            self._drop_copies(state)
            return self._landed(changes, landed.already, landed.rows)

    def apply_refusal(self) -> NothingLandedError | None:
        """Apply's refusal over the target changed where the plan changed it, read only (a
        dry run); an applied sandbox lands nothing more, so it is never refused."""
        with self._operation() as state:
            if state.status == "applied":
                return None
            why = self._land_refusal(state)
        return None if why is None else self._conflict(why)

    def _conflict(self, why: str) -> NothingLandedError:
        """Apply's error when the target cannot take the plan's rows (``why``)."""
        return NothingLandedError(
            f"nothing was applied to {self._resource.resource_id}: {why}",
            "correct the plan against the database as it is now, or "
            + start_again_fix(self._plan_id),
        )

    @abstractmethod
    def _drop_copy(self, state: CopyStateT, ref: str) -> None:
        """Remove checkpoint ``ref``'s copy, if there is one."""

    def drop_checkpoint(self, ref: str) -> None:
        """Forget ``ref`` and drop its copy; idempotent."""
        check_savepoint_name(ref)
        with self._operation() as state:
            if ref in state.checkpoints:
                state.forget(ref)
                self._save(state)
            self._drop_copy(state, ref)

    def _refused(self, database: str, why: str) -> NothingLandedError:
        """Apply's error when ``database`` (SQLite, PostgreSQL) refused the landing."""
        return NothingLandedError(
            f"nothing was applied to {self._resource.resource_id}: {database} refused "
            f"the change: {why}",
            f"retry apply when the database is free, or fix what {database} names",
        )

    @property
    def checkpoints(self) -> tuple[str, ...]:
        """The valid checkpoint references, oldest first."""
        with self._operation() as state:
            return tuple(state.checkpoints)

    @contextlib.contextmanager
    def _operation(self) -> Iterator[CopyStateT]:
        """This process's lock, then the folder's ``flock``; yields the current state."""
        with (
            self._lock,
            locked_state(self._root, self.LOCK_FILE_NAME, self, self._load_state) as state,
        ):
            self._opened(state)
            yield state

    def _applied(self) -> SandboxError:
        return applied_error(self._resource.resource_id)

    def _already_applied(self) -> ApplyResult:
        """Apply's answer the second time: a no-op."""
        return ApplyResult(
            f"already applied: the changes of {self._resource.resource_id} are in the "
            "real database",
            (),
        )

    def _landed(self, changes: tuple[Change, ...], already: bool, rows: int) -> ApplyResult:
        """Apply's answer once the rows landed (``already``: a retry found them there)."""
        tables = {change.path.partition("/")[0] for change in changes}
        how = "were already there" if already else f"{counted(rows, 'row')} written"
        what = f"{counted(len(changes), 'change')} in {counted(len(tables), 'table')}"
        return ApplyResult(
            summary=f"landed the sandbox of {self._resource.resource_id} in one "
            f"transaction ({what}; {how})",
            changes=changes,
        )

    def diff(self, old_ref: str, new_ref: str) -> list[Change]:
        """Row changes between two checkpoints (also after Apply: the copies stay)."""
        with self._operation() as state:
            return compare(self._rows_at(state, old_ref), self._rows_at(state, new_ref))

    def read(self, ref: str, path: str) -> bytes | None:
        """Row ``table/key`` at checkpoint ``ref`` as UTF-8 JSON; None when absent."""
        with self._operation() as state:
            taken = self._rows_at(state, ref)
        return read_row(taken, path)


class CopyStrategy:
    """What the copy strategies share: they stand in for ``transaction_rollback`` (which
    ``database.py`` picks among them), and how many rows a snapshot may hold."""

    name: SandboxStrategyName = SandboxStrategyName.TRANSACTION_ROLLBACK

    def __init__(self, *, max_snapshot_rows: int = DEFAULT_MAX_SNAPSHOT_ROWS) -> None:
        self.max_snapshot_rows = max_snapshot_rows
