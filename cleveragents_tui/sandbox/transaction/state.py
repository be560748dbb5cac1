"""The files under a savepoint sandbox's folder: its state file and its lock.

The state file records the process holding the transaction, a random token and the
checkpoints (never the URL, so no credentials); the lock file's ``flock`` is held by the
process that holds the transaction. See docs/sandboxes.md.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal

from cleveragents_tui.domain.enums import SandboxStrategyName
from cleveragents_tui.sandbox.database_common import load_state_file
from cleveragents_tui.sandbox.safety import check_savepoint_name

STATE_FILE_NAME: Final = "transaction_rollback.json"
LOCK_FILE_NAME: Final = "transaction_rollback.lock"
_STATE_VERSION: Final = 1


@dataclass
class State:
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
    def load(cls, path: Path, plan_id: str) -> State | None:
        return load_state_file(path, cls._parse, plan_id)

    @classmethod
    def _parse(cls, data: dict[str, Any]) -> State:
        status = data["status"]
        if data["version"] != _STATE_VERSION or status not in ("open", "applying", "applied"):
            raise ValueError("unsupported version or status")
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

    def save(self, path: Path, *, durable: bool = False) -> None:
        """Write atomically (temporary file + rename). Without ``durable`` no fsync: the file
        says which process holds the transaction and which checkpoints are valid, and the
        statement log (fsynced) holds what replay needs."""
        if durable:
            write_private(path, self.dump().encode("utf-8"))
            return
        temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        temporary.write_text(self.dump(), "utf-8")
        os.replace(temporary, path)


def write_all(fd: int, data: bytes) -> None:
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


def write_private(path: Path, data: bytes) -> None:
    """Replace ``path`` atomically by ``data``: a new mode-0600 file, fsync, rename."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    temporary.unlink(missing_ok=True)
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        try:
            write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)


def try_lock(path: Path) -> int | None:
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
