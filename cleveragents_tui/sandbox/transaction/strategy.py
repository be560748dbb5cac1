"""Makes savepoint sandboxes: a new transaction, or the one this or another process held."""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
from pathlib import Path
from typing import Final

from cleveragents_tui.domain.enums import SandboxStrategyName
from cleveragents_tui.domain.resource import Resource
from cleveragents_tui.domain.timeutil import utc_now
from cleveragents_tui.sandbox import transaction_handover
from cleveragents_tui.sandbox.base import SandboxError, start_again_fix
from cleveragents_tui.sandbox.database_common import owned_state
from cleveragents_tui.sandbox.transaction.connection import target_url
from cleveragents_tui.sandbox.transaction.sandbox import TransactionRollbackSandbox
from cleveragents_tui.sandbox.transaction.snapshots import DEFAULT_MAX_SNAPSHOT_ROWS
from cleveragents_tui.sandbox.transaction.state import (
    LOCK_FILE_NAME,
    STATE_FILE_NAME,
    State,
    try_lock,
)

log = logging.getLogger(__name__)

POSTGRES_SAVEPOINT_LIMIT: Final = 64


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
        self, resource: Resource, plan_id: str, root: Path, state: State
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
        url = target_url(resource)
        state_path = root / STATE_FILE_NAME
        try:
            existing = State.load(state_path, plan_id)
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
            lock_fd = try_lock(root / LOCK_FILE_NAME)
        except OSError as exc:
            raise SandboxError(f"cannot create the sandbox folder {root}: {exc}") from exc
        if lock_fd is None:
            raise refuse("another process" if existing is None else f"process {existing.pid}")
        state = State(
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
            state = State.load(state_path, plan_id)
        except SandboxError as exc:
            raise SandboxError(exc.problem, start_again_fix(plan_id)) from exc
        state = owned_state(state, resource, plan_id, root, "database")
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
