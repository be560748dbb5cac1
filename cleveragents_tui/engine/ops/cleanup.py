"""Removing what plans leave on disk: ``agents plan discard`` (one plan and its child plans,
whole) and ``agents gc`` (checkpoints of superseded attempts past the retention period).

Both work in two steps, so the CLI can show what goes before anything does: an inventory
(read only), then the removal. The tree stays browsable afterwards: decisions, corrections
and their diffs live in the store; only checkpoints (marked pruned) and sandboxes go.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from cleveragents_tui.domain.action import Action
from cleveragents_tui.domain.checkpoint import CheckpointMetadata
from cleveragents_tui.domain.enums import PlanState, SandboxStrategyName
from cleveragents_tui.domain.errors import UserError
from cleveragents_tui.domain.resource import Resource
from cleveragents_tui.domain.timeutil import utc_now
from cleveragents_tui.engine.core.restore_point import restore_points
from cleveragents_tui.engine.core.sandboxes import PlanSandboxes, sandbox_base_dir, sandbox_root
from cleveragents_tui.engine.run import run_lease
from cleveragents_tui.sandbox.git_branches import (
    ApplyBranch,
    delete_apply_branch,
    find_apply_branch,
)
from cleveragents_tui.store.correction_queries import lapse_pending_approvals
from cleveragents_tui.store.store import Store
from cleveragents_tui.store.unit_of_work import UnitOfWork


@dataclass(frozen=True)
class SandboxFolder:
    plan_id: str
    resource_id: str
    path: Path
    size: int


@dataclass(frozen=True)
class DiscardInventory:
    """What discarding a plan removes."""

    plan_id: str
    plan_ids: tuple[str, ...]  # the plan and its child plans
    cancels: tuple[str, ...]  # those not finished yet: discarding cancels them
    sandboxes: tuple[SandboxFolder, ...]
    branches: tuple[ApplyBranch, ...]
    checkpoints: int  # live checkpoint rows that will be marked pruned

    @property
    def size(self) -> int:
        return sum(folder.size for folder in self.sandboxes)


def folder_size(path: Path) -> int:
    """Bytes of the regular files under ``path`` (symlinks not followed)."""
    total = 0
    for folder, _dirs, files in os.walk(path):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(folder, name)).st_size
    return total


def discard_inventory(
    store: Store, plan_ref: str, base_dir: Path | None = None
) -> DiscardInventory:
    base = base_dir or sandbox_base_dir()
    with store.unit_of_work() as uow:
        plan = uow.plans.get(uow.plans.resolve(plan_ref))
        if plan.parent_plan_id is not None:
            raise UserError(
                f"plan {plan.plan_id} is a child plan of {plan.parent_plan_id}",
                f"discard its parent, with its children: agents plan discard {plan.parent_plan_id}",
            )
        plans = [plan, *uow.plans.descendants(plan.plan_id)]
        resources = {p.plan_id: _resources_of(uow, p.plan_id, base) for p in plans}
        checkpoints = sum(
            1
            for p in plans
            for checkpoint in uow.checkpoints.for_plan(p.plan_id)
            if checkpoint.pruned_at is None
        )
    folders: list[SandboxFolder] = []
    branches: list[ApplyBranch] = []
    for p in plans:
        for resource in resources[p.plan_id]:
            root = sandbox_root(base, p.plan_id, resource.resource_id)
            if root.exists():
                folders.append(
                    SandboxFolder(p.plan_id, resource.resource_id, root, folder_size(root))
                )
            if resource.sandbox_strategy is SandboxStrategyName.GIT_WORKTREE:
                with contextlib.suppress(UserError):  # the repository is gone: nothing to remove
                    branch = find_apply_branch(resource, p.plan_id)
                    if branch is not None:
                        branches.append(branch)
    return DiscardInventory(
        plan_id=plan.plan_id,
        plan_ids=tuple(p.plan_id for p in plans),
        cancels=tuple(p.plan_id for p in plans if not p.state.is_terminal),
        sandboxes=tuple(folders),
        branches=tuple(branches),
        checkpoints=checkpoints,
    )


def discard_plan(store: Store, inventory: DiscardInventory, base_dir: Path | None = None) -> int:
    """Cancel what is unfinished, mark every checkpoint pruned, remove the sandboxes (and
    their refs) and the apply branches. Refused while a runner holds any of the plans.
    Returns the bytes the sandbox folders held."""
    base = base_dir or sandbox_base_dir()
    with contextlib.ExitStack() as held:
        for plan_id in inventory.plan_ids:
            held.enter_context(run_lease.holding(base, plan_id, "discarding", store))
        _cancel_and_prune(store, inventory)
        with store.unit_of_work() as uow:
            resources = {
                r: uow.resources.get(r)
                for r in {f.resource_id for f in inventory.sandboxes}
                | {b.resource_id for b in inventory.branches}
            }
        for folder in inventory.sandboxes:  # the folders the inventory listed, no others
            PlanSandboxes(store, folder.plan_id, base).clear_interrupted(
                resources[folder.resource_id]
            )
        for branch in inventory.branches:
            delete_apply_branch(resources[branch.resource_id], branch.plan_id)
    for plan_id in inventory.plan_ids:  # the runner locks were the last files left
        shutil.rmtree(base / plan_id, ignore_errors=True)
    with store.unit_of_work(write=True) as uow:
        uow.events.append(
            "plan_discarded",
            {
                "plans": list(inventory.plan_ids),
                "sandboxes": len(inventory.sandboxes),
                "branches": [b.branch for b in inventory.branches],
                "bytes": inventory.size,
            },
            plan_id=inventory.plan_id,
        )
        uow.commit()
    return inventory.size


def _cancel_and_prune(store: Store, inventory: DiscardInventory) -> None:
    with store.unit_of_work(write=True) as uow:
        for plan_id in inventory.plan_ids:
            plan = uow.plans.get(plan_id)
            if not plan.state.is_terminal:
                uow.plans.save(
                    plan.model_copy(update={"state": PlanState.CANCELLED, "updated_at": utc_now()})
                )
                uow.events.append(
                    "plan_cancelled", {"from": plan.state.value, "by": "discard"}, plan_id=plan_id
                )
                uow.run(lapse_pending_approvals, plan_id, "discard", "the plan was discarded")
            live = [
                c.checkpoint_id for c in uow.checkpoints.for_plan(plan_id) if c.pruned_at is None
            ]
            uow.checkpoints.mark_pruned(live)
        uow.commit()


def _resources_of(uow: UnitOfWork, plan_id: str, base: Path) -> list[Resource]:
    """The resources the plan's action names, and any other whose sandbox folder exists."""
    ids = set(Action.model_validate(uow.plan_actions.get(plan_id)).resources)
    folder = base / plan_id
    if folder.is_dir():
        for entry in folder.iterdir():
            if entry.is_dir() and "__" in entry.name:
                ids.add(entry.name.replace("__", "/", 1))
    resources = []
    for resource_id in sorted(ids):
        with contextlib.suppress(UserError):  # a folder of no known resource: left alone
            resources.append(uow.resources.get(resource_id))
    return resources


# ------------------------------------------------------------------------------------ gc


@dataclass(frozen=True)
class Collectable:
    """A checkpoint ``agents gc`` may drop: of a superseded attempt, older than retention,
    and no current decision's restore point."""

    checkpoint: CheckpointMetadata
    plan_id: str


def collectable(store: Store, retention_days: int) -> list[Collectable]:
    """Checkpoints of superseded decisions recorded more than ``retention_days`` ago, in
    plans not yet finished, that no correction can still roll back to: the restore point
    (engine/core/restore_point.py) of every current decision is kept, and so is each resource's
    baseline."""
    cutoff = utc_now() - timedelta(days=retention_days)
    found: list[Collectable] = []
    with store.unit_of_work() as uow:
        for plan in uow.plans.all():
            if plan.state.is_terminal:
                continue  # `agents plan discard` removes a finished plan's sandboxes whole
            candidates = uow.checkpoints.superseded_live(plan.plan_id, cutoff)
            if not candidates:  # most plans: read no decision
                continue
            current = uow.decisions.tree_rows(plan.plan_id, include_superseded=False)
            keep = {d.decision_id for d in restore_points(uow, plan.plan_id, current).values()}
            found.extend(
                Collectable(checkpoint, plan.plan_id)
                for checkpoint in candidates
                if checkpoint.decision_id not in keep
            )
    return found


def collect(store: Store, doomed: list[Collectable], base_dir: Path | None = None) -> int:
    """Mark ``doomed`` pruned, then drop them from their sandboxes (the order
    ``enforce_budget`` uses: a crash between leaves an unreferenced object, never a live row
    without its checkpoint). Returns the bytes the sandbox folders shrank by."""
    base = base_dir or sandbox_base_dir()
    by_plan: dict[str, list[CheckpointMetadata]] = {}
    for item in doomed:
        by_plan.setdefault(item.plan_id, []).append(item.checkpoint)
    freed = 0
    for plan_id, checkpoints in by_plan.items():
        with run_lease.holding(base, plan_id, "collecting", store):
            before = folder_size(base / plan_id)
            with store.unit_of_work(write=True) as uow:
                uow.checkpoints.mark_pruned([c.checkpoint_id for c in checkpoints])
                uow.events.append(
                    "checkpoints_collected", {"count": len(checkpoints)}, plan_id=plan_id
                )
                uow.commit()
            sandboxes = PlanSandboxes(store, plan_id, base)
            for checkpoint in checkpoints:
                sandboxes.get(checkpoint.resource_id).drop_checkpoint(checkpoint.ref)
            freed += max(0, before - folder_size(base / plan_id))
    return freed


def finished_with_sandboxes(store: Store, base_dir: Path | None = None) -> list[tuple[str, int]]:
    """Applied or cancelled top-level plans whose sandboxes are still on disk, with their
    size: what ``agents gc`` points at ``agents plan discard`` for."""
    base = base_dir or sandbox_base_dir()
    with store.unit_of_work() as uow:
        plans = [p for p in uow.plans.all() if p.state.is_terminal and p.parent_plan_id is None]
    found = []
    for plan in plans:
        folder = base / plan.plan_id
        if folder.is_dir() and any(entry.is_dir() for entry in folder.iterdir()):
            found.append((plan.plan_id, folder_size(folder)))
    return found
