"""Start-up recovery: undo checkpoint groups a crash left ``pending``.

A pending group never has a decision; the checkpoints noted on it are dropped from their
sandboxes (where the sandbox still exists) and the group row is deleted.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from cleveragents_tui.domain.checkpoint import CheckpointGroup
from cleveragents_tui.domain.errors import UserError
from cleveragents_tui.engine.core.sandboxes import PlanSandboxes
from cleveragents_tui.engine.run import run_lease
from cleveragents_tui.engine.run.run_lease import PlanBusyError
from cleveragents_tui.store.store import Store


@dataclass(frozen=True)
class RecoveredGroup:
    group_id: str
    plan_id: str
    dropped: tuple[str, ...]
    left: tuple[str, ...]


def recover_pending_groups(store: Store, base_dir: Path | None = None) -> list[RecoveredGroup]:
    """Undo every pending group whose plan no live runner holds: a group a running process
    is recording right now is pending too, and is left to it."""
    recovered: list[RecoveredGroup] = []
    with store.unit_of_work() as uow:
        pending = uow.checkpoints.pending_groups()
    for group, refs in pending:
        sandboxes = PlanSandboxes(store, group.plan_id, base_dir)
        try:
            with run_lease.holding(sandboxes.base_dir, group.plan_id, "repairing", store):
                recovered.append(_undo(store, sandboxes, group, refs))
        except PlanBusyError:
            continue
    return recovered


def _undo(
    store: Store, sandboxes: PlanSandboxes, group: CheckpointGroup, refs: list[tuple[str, str]]
) -> RecoveredGroup:
    dropped: list[str] = []
    left: list[str] = []
    for resource_id, ref in refs:
        try:
            sandboxes.get(resource_id).drop_checkpoint(ref)
            dropped.append(f"{resource_id}:{ref}")
        except (UserError, OSError):
            left.append(f"{resource_id}:{ref}")
    with store.unit_of_work(write=True) as uow:
        uow.checkpoints.delete_pending_group(group.group_id)
        uow.commit()
    return RecoveredGroup(group.group_id, group.plan_id, tuple(dropped), tuple(left))
