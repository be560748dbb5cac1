"""Roll every resource of a plan back to the state it had when a decision was recorded.

All or nothing (DESIGN.md section 5): check every target first, take a safety checkpoint of
each resource's current state, roll back one by one; on any failure restore the others from
their safety checkpoints. The report says per resource what happened. Safety checkpoints are
kept: they hold the attempt being replaced, for diffs.

Targets: each rollbackable checkpoint of the decision's group; and for every other sandboxed
resource of the plan (not yet written when the decision was recorded), its baseline. Undoing
all Execute work (the phase-level tier: a Strategize decision corrected later) also takes
the sandboxes that have no checkpoints (checkpointing off): they are made anew from the real
resources (``unchecked_from``).

Order matters: ``ROLLBACK TO SAVEPOINT`` destroys every later savepoint, the safety one
included, so a database rolled back cannot be put back. Database (``transaction_rollback``)
resources therefore go last: when anything else fails they have not been touched. A sandbox
made anew cannot be put back either: those go after every other resource and before the
databases.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from cleveragents_tui import failpoints
from cleveragents_tui.domain.checkpoint import CheckpointMetadata
from cleveragents_tui.domain.decision import Decision
from cleveragents_tui.domain.enums import CheckpointType, Phase, SandboxStrategyName
from cleveragents_tui.domain.errors import UserError, WrongPlanError
from cleveragents_tui.domain.resource import Resource
from cleveragents_tui.domain.rollback import ResourceOutcome, ResourceRollback, RollbackReport
from cleveragents_tui.engine.core.replay_snapshots import RecreatedState, recreate_keeping_old_files
from cleveragents_tui.engine.core.restore_point import restore_point
from cleveragents_tui.engine.core.sandboxes import PlanSandboxes
from cleveragents_tui.sandbox.base import CheckpointMissingError, Sandbox
from cleveragents_tui.store.unit_of_work import UnitOfWork


class RollbackRefusedError(UserError):
    """The rollback cannot start; nothing was changed."""


def rollback_targets(
    sandboxes: PlanSandboxes, decision_id: str
) -> tuple[dict[str, CheckpointMetadata], list[str]]:
    """(resource -> checkpoint to restore, resources that cannot be rolled back)."""
    with sandboxes.store.unit_of_work() as uow:
        return targets_of(uow, sandboxes.plan_id, uow.decisions.get(decision_id))


def targets_of(
    uow: UnitOfWork, plan_id: str, decision: Decision
) -> tuple[dict[str, CheckpointMetadata], list[str]]:
    """:func:`rollback_targets` for a decision already read, in the caller's transaction."""
    if decision.plan_id != plan_id:
        raise WrongPlanError(
            f"decision {decision.decision_id} belongs to plan {decision.plan_id}, not {plan_id}",
            "roll back within the decision's own plan",
        )
    if decision.phase is not Phase.EXECUTE:
        raise RollbackRefusedError(
            f"decision {decision.decision_id} was made during {decision.phase}: it has no "
            "checkpoint group",
            "Strategize decisions need reasoning rollback only",
        )
    # A correction's guidance decision, or a decision a later correction rolled back
    # past and kept, stands on the state that correction restored (engine/restore_point).
    owner = restore_point(uow, decision)
    everything = uow.checkpoints.basis(plan_id, owner.decision_id)
    # the restore point's group, as checkpoints.for_decision orders it: no second read
    group = sorted(
        (c for c in everything if c.decision_id == owner.decision_id), key=lambda c: c.resource_id
    )
    return targets_from(decision.decision_id, owner.phase, group, everything)


def targets_from(
    decision_id: str,
    owner_phase: Phase,
    group: Sequence[CheckpointMetadata],
    everything: Sequence[CheckpointMetadata],
) -> tuple[dict[str, CheckpointMetadata], list[str]]:
    """:func:`rollback_targets` from what it reads: the checkpoint group of the decision's
    restore point (made in ``owner_phase``) and the plan's checkpoints, oldest first."""
    if owner_phase is not Phase.EXECUTE:
        return baselines_from(everything)
    targets: dict[str, CheckpointMetadata] = {}
    not_rollbackable: list[str] = []
    for checkpoint in group:
        if checkpoint.checkpoint_type is CheckpointType.NON_ROLLBACKABLE:
            not_rollbackable.append(checkpoint.resource_id)
        elif checkpoint.pruned_at is not None:
            raise RollbackRefusedError(
                f"the checkpoint of {checkpoint.resource_id} at decision {decision_id} was pruned "
                "by the checkpoint budget",
                "roll back to a later decision; for later plans raise the budget: agents config "
                f"set sandbox.checkpoint.max-per-plan 200 --resource {checkpoint.resource_id}",
            )
        else:
            targets[checkpoint.resource_id] = checkpoint
    baselines: dict[str, CheckpointMetadata] = {}
    for checkpoint in everything:  # oldest first: the first row of a resource is its baseline
        if checkpoint.strategy is not SandboxStrategyName.NONE:
            baselines.setdefault(checkpoint.resource_id, checkpoint)
        elif checkpoint.resource_id not in not_rollbackable:
            # written at some point of the plan (maybe after this decision): its changes stay
            not_rollbackable.append(checkpoint.resource_id)
    for resource_id, baseline in baselines.items():
        if resource_id not in targets and resource_id not in not_rollbackable:
            targets[resource_id] = baseline
    return targets, sorted(not_rollbackable)


def baseline_targets(sandboxes: PlanSandboxes) -> tuple[dict[str, CheckpointMetadata], list[str]]:
    """Every sandboxed resource's baseline: the state before Execute wrote anything."""
    with sandboxes.store.unit_of_work() as uow:
        everything = uow.checkpoints.basis(sandboxes.plan_id)
    return baselines_from(everything)


def baselines_from(
    everything: Sequence[CheckpointMetadata],
) -> tuple[dict[str, CheckpointMetadata], list[str]]:
    """:func:`baseline_targets` from the plan's checkpoints, oldest first."""
    targets: dict[str, CheckpointMetadata] = {}
    not_rollbackable: set[str] = set()
    for checkpoint in everything:
        if checkpoint.strategy is SandboxStrategyName.NONE:
            not_rollbackable.add(checkpoint.resource_id)
        else:
            targets.setdefault(checkpoint.resource_id, checkpoint)
    return targets, sorted(not_rollbackable)


def unchecked_from(
    resources: Mapping[str, Resource], named: object, hosted: bool
) -> tuple[list[str], list[str]]:
    """The plan's sandboxed resources whose checkpointing is off: no checkpoint holds their
    state before Execute, so undoing all Execute work makes their sandboxes anew from the real
    resources. From the resources, those the plan's action names, and whether the plan works
    in its host's sandboxes (``hosted``). Returns (to make anew, cannot be undone): a plan
    working in its host's sandboxes (an appended plan) must not discard them, so there they
    cannot be undone."""
    if not isinstance(named, list):
        named = []
    unchecked = sorted(
        {
            resource.resource_id
            for resource in (resources.get(str(r)) for r in named)
            if resource is not None
            and resource.sandbox_strategy.rollbackable
            and not resource.checkpoint_enabled
        }
    )
    if hosted:
        return [], unchecked
    return unchecked, []


def rollback_to_decision(sandboxes: PlanSandboxes, decision_id: str) -> RollbackReport:
    targets, not_rollbackable = rollback_targets(sandboxes, decision_id)
    return rollback_to(sandboxes, decision_id, targets, not_rollbackable)


def rollback_to(
    sandboxes: PlanSandboxes,
    label: str,
    targets: dict[str, CheckpointMetadata],
    not_rollbackable: list[str],
    recreate: Sequence[str] = (),
) -> RollbackReport:
    """Roll each resource back to its target checkpoint, and make each sandbox of
    ``recreate`` anew from its real resource; all or nothing, except that a sandbox made anew
    cannot be put back (so those go after every other one that can, before the databases)."""
    decision_id = label
    opened = check_targets(sandboxes, label, targets, recreate)
    safety = {resource_id: sandbox.checkpoint() for resource_id, sandbox in opened.items()}
    failpoints.hit("rollback.safety")
    databases = [r for r in opened if _is_database(targets[r])]
    steps = [
        *((r, False) for r in opened if r not in databases),
        *((r, True) for r in recreate),
        *((r, False) for r in databases),
    ]
    done: list[str] = []
    remade: dict[str, RecreatedState] = {}
    for resource_id, anew in steps:
        try:
            if anew:
                failpoints.hit("rollback.recreate", resource_id)
                remade[resource_id] = recreate_keeping_old_files(sandboxes, resource_id)
                continue
            failpoints.hit("rollback.resource", resource_id)
            # Nothing was written since the safety checkpoint: the strategy may roll back
            # from it, touching only what differs (git_worktree does).
            opened[resource_id].rollback(targets[resource_id].ref, current=safety[resource_id])
        except Exception as exc:
            part_way = None if anew else resource_id
            restored = _restore(opened, safety, {r: targets[r].ref for r in done}, part_way)
            return RollbackReport(
                decision_id=decision_id,
                resources=(
                    *_failure_outcomes(opened, targets, safety, done, part_way, exc, restored),
                    *_recreate_outcomes(recreate, remade, resource_id if anew else None, exc),
                    *_markers(not_rollbackable),
                ),
            )
        done.append(resource_id)
    outcomes = [
        ResourceRollback(
            resource_id=r,
            outcome=ResourceOutcome.ROLLED_BACK,
            target_ref=targets[r].ref,
            safety_ref=safety[r],
        )
        for r in done
    ]
    return RollbackReport(
        decision_id=decision_id,
        resources=(
            *outcomes,
            *_recreate_outcomes(recreate, remade, None, None),
            *_markers(not_rollbackable),
        ),
    )


def check_targets(
    sandboxes: PlanSandboxes,
    label: str,
    targets: dict[str, CheckpointMetadata],
    recreate: Sequence[str] = (),
) -> dict[str, Sandbox]:
    """Open every target's sandbox and check its checkpoint is there (in rollback order),
    and open every sandbox to make anew; RollbackRefusedError, with nothing changed, for the
    first that is not (a checkpoint gone, a database transaction another live process
    holds)."""
    opened: dict[str, Sandbox] = {}
    for resource_id, checkpoint in sorted(targets.items(), key=_rollback_order):
        try:
            sandbox = sandboxes.get(resource_id)
            sandbox.verify(checkpoint.ref)
        except (CheckpointMissingError, UserError) as exc:
            raise RollbackRefusedError(
                f"cannot roll {resource_id} back to {label}: {exc}",
                "run `agents doctor`; nothing was changed",
            ) from exc
        opened[resource_id] = sandbox
    for resource_id in recreate:
        try:
            lost = getattr(sandboxes.get(resource_id), "lost_reason", None)
        except UserError as exc:
            lost = str(exc)
        if lost:  # a database sandbox another live process holds is not ours to discard
            raise RollbackRefusedError(
                f"cannot make the sandbox of {resource_id} anew for {label}: {lost}",
                "run `agents doctor`; nothing was changed",
            )
    return opened


def _rollback_order(item: tuple[str, CheckpointMetadata]) -> tuple[bool, str]:
    resource_id, checkpoint = item
    return _is_database(checkpoint), resource_id


def _is_database(checkpoint: CheckpointMetadata) -> bool:
    """``ROLLBACK TO SAVEPOINT`` cannot be undone: these resources go last."""
    return checkpoint.strategy is SandboxStrategyName.TRANSACTION_ROLLBACK


def _restore(
    opened: dict[str, Sandbox],
    safety: dict[str, str],
    done: dict[str, str],
    failed: str | None,
) -> dict[str, str | None]:
    """Put back to its safety checkpoint each resource rolled back (``done``: resource ->
    the checkpoint it now holds) and the one that failed part way, if any (its state
    unknown): resource -> error or None."""
    errors: dict[str, str | None] = {}
    for resource_id in [*done, *([failed] if failed else [])]:
        try:
            failpoints.hit("rollback.restore", resource_id)
            opened[resource_id].rollback(safety[resource_id], current=done.get(resource_id))
            errors[resource_id] = None
        except Exception as exc:  # reported per resource; the plan goes to errored
            errors[resource_id] = str(exc)
    return errors


def _recreate_outcomes(
    recreate: Sequence[str],
    remade: dict[str, RecreatedState],
    failed: str | None,
    error: Exception | None,
) -> list[ResourceRollback]:
    """A sandbox made anew holds the real resource as it is now; one that failed is in an
    unknown state; one not reached is as it was."""

    def outcome(resource_id: str) -> ResourceRollback:
        kept = remade.get(resource_id)
        if kept is not None:
            return ResourceRollback(
                resource_id=resource_id,
                outcome=ResourceOutcome.RECREATED,
                detail="made anew from the real resource (it has no checkpoints)"
                + ("; the work it held cannot be put back" if error is not None else ""),
                target_ref=kept.fresh_ref,
                old_files=kept.old_files,
            )
        if resource_id == failed:
            return ResourceRollback(
                resource_id=resource_id,
                outcome=ResourceOutcome.FAILED,
                detail=f"making the sandbox anew failed: {error}",
            )
        return ResourceRollback(resource_id=resource_id, outcome=ResourceOutcome.UNTOUCHED)

    return [outcome(resource_id) for resource_id in recreate]


def _failure_outcomes(
    opened: dict[str, Sandbox],
    targets: dict[str, CheckpointMetadata],
    safety: dict[str, str],
    done: list[str],
    failed: str | None,
    error: Exception,
    restore_errors: dict[str, str | None],
) -> list[ResourceRollback]:
    outcomes = []
    for resource_id in opened:
        restore_error = restore_errors.get(resource_id)
        detail: str | None
        if resource_id == failed:
            outcome = ResourceOutcome.FAILED
            detail = f"rollback failed: {error}; " + (
                f"restore failed too: {restore_error}"
                if restore_error
                else "restored to its state before the rollback"
            )
        elif resource_id in done:
            outcome = ResourceOutcome.FAILED if restore_error else ResourceOutcome.RESTORED
            detail = f"restore failed: {restore_error}" if restore_error else None
        else:
            outcome, detail = ResourceOutcome.UNTOUCHED, None
        outcomes.append(
            ResourceRollback(
                resource_id=resource_id,
                outcome=outcome,
                target_ref=targets[resource_id].ref,
                safety_ref=safety[resource_id],
                detail=detail,
            )
        )
    return outcomes


def _markers(resource_ids: list[str]) -> list[ResourceRollback]:
    return [
        ResourceRollback(
            resource_id=r,
            outcome=ResourceOutcome.NOT_ROLLBACKABLE,
            detail="sandbox strategy none: changes since this decision persist",
        )
        for r in resource_ids
    ]
