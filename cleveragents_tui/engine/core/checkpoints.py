"""Decision-aligned checkpoint groups (ADR-035; DESIGN.md section 5, record_decision).

Recording an Execute decision checkpoints every modified resource and stores the decision
only if every checkpoint exists: each checkpoint is made and noted on the group — the first
one's commit inserts the group ``pending`` with it, each later one's adds its ref — all are
verified, and one transaction inserts the decision and its checkpoint rows and flips the
group to ``committed`` (a decision that modified nothing: one transaction inserts both, the
group committed). On any failure the checkpoints made are dropped again and the pending
group is deleted: no group, no decision. A crash leaves a pending group naming every
checkpoint made and noted for it, which start-up recovery (``engine/ops/recovery.py``)
drops; a crash between a checkpoint being made and its note leaves an unreferenced object
in the sandbox, as it did when the pending group was committed empty first (issue 22: one
commit fewer per recording).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from cleveragents_tui import failpoints
from cleveragents_tui.domain.checkpoint import CheckpointMetadata
from cleveragents_tui.domain.decision import Decision
from cleveragents_tui.domain.enums import CheckpointType, Phase, SandboxStrategyName
from cleveragents_tui.domain.errors import UserError
from cleveragents_tui.domain.ids import new_ulid
from cleveragents_tui.domain.timeutil import utc_now
from cleveragents_tui.engine.core.sandboxes import PlanSandboxes
from cleveragents_tui.sandbox.base import Sandbox
from cleveragents_tui.sandbox.groups import select_for_pruning
from cleveragents_tui.store.mapping import decision_values
from cleveragents_tui.store.recording import UNREAD, LiveCheckpoint, NewGroup, Recording, Unread


class CheckpointGroupError(UserError):
    """The checkpoint group of a decision could not be created; the decision was not stored."""


def store_execute_decision(
    sandboxes: PlanSandboxes,
    decision: Decision,
    also: Callable[[Recording], None] | None = None,
    modified: set[str] | None = None,
    transaction: Callable[[bool], Recording] | None = None,
    parent_plan: str | Unread | None = UNREAD,
) -> NewGroup:
    """Store an Execute decision together with its committed checkpoint group; what the
    group was made with is returned (``record_decision`` needs no model of it).

    ``also`` runs inside the final transaction (influence edges, tool invocations, ...), so
    everything about the decision lands at once or not at all. ``modified``: the plan's
    modified resources when the caller has just read them (``sandboxes.modified()``);
    ``transaction``: how to open each transaction (the caller's one connection,
    ``Store.recordings``), by default each on a connection of its own; ``parent_plan``: the
    parent's plan when the caller read it (``Recording.next_sequence_number``).
    """
    if decision.phase is not Phase.EXECUTE or decision.plan_id != sandboxes.plan_id:
        raise ValueError("only an Execute decision of this plan gets a checkpoint group")
    store = sandboxes.store
    begin = transaction or (lambda write: store.recording(write=write))
    group = NewGroup(new_ulid(), decision.plan_id, utc_now())
    values = decision_values(decision)  # before the checkpoints: their I/O leaves caches cold
    made: list[tuple[Sandbox, str]] = []
    noted: list[tuple[str, str]] = []  # (resource, ref) committed on the pending group
    try:
        rows: list[dict[str, Any]] = []
        for resource_id in sorted(sandboxes.modified() if modified is None else modified):
            sandbox = sandboxes.get(resource_id)
            if not sandbox.resource.checkpoint_enabled:
                continue
            ref = sandbox.checkpoint()
            made.append((sandbox, ref))
            refs = [*noted, (resource_id, ref)]
            with begin(True) as rec:
                if noted:
                    rec.note_refs(group.group_id, refs)
                else:
                    rec.open_group(group, refs)
                rec.commit()
            noted = refs
            if len(noted) == 1:
                failpoints.hit("checkpoint.group_pending")
            failpoints.hit("checkpoint.after_resource", resource_id)
            rows.append(_row(decision, group, sandbox, ref))
        for sandbox, ref in made:
            sandbox.verify(ref)
        failpoints.hit("checkpoint.before_commit")
        with begin(True) as rec:
            rec.store_decision(
                decision, group, rows, pending=bool(noted), parent_plan=parent_plan, values=values
            )
            if also is not None:
                also(rec)
            # the budget in the same transaction: one commit fewer per resource written
            doomed = _mark_over_budget(
                rec,
                sandboxes,
                dict.fromkeys(r["resource_id"] for r in rows),
                decision.sequence_number,
            )
            rec.commit()
    except BaseException as exc:
        _undo(sandboxes, group.group_id if noted else None, made)
        if isinstance(exc, Exception):
            raise CheckpointGroupError(
                f"decision {decision.decision_id} was not recorded: its checkpoint group failed ({exc})",
                "fix the resource named above and record the decision again",
            ) from exc
        raise
    _drop(sandboxes, doomed)
    return group


def _row(decision: Decision, group: NewGroup, sandbox: Sandbox, ref: str) -> dict[str, Any]:
    """A checkpoint row's values, as ``CheckpointMetadata(...).model_dump()`` gives them
    (its rules hold by construction: a decision's group, the type the strategy implies).
    Not validated again: every value comes from the engine's own validated objects and a
    sandbox's ref, and the model cost ~7 µs alone, several times that between a recording's
    checkpoints (issue 22); a row read back is validated (store/mapping.py)."""
    strategy = sandbox.resource.sandbox_strategy
    return {
        "checkpoint_id": new_ulid(),
        "plan_id": decision.plan_id,
        "group_id": group.group_id,
        "decision_id": decision.decision_id,
        "resource_id": sandbox.resource.resource_id,
        "checkpoint_type": (
            CheckpointType.NON_ROLLBACKABLE
            if strategy is SandboxStrategyName.NONE
            else CheckpointType.DECISION_POINT
        ),
        "strategy": strategy,
        "ref": ref,
        "created_at": utc_now(),
        "pruned_at": None,
    }


def _undo(sandboxes: PlanSandboxes, group_id: str | None, made: list[tuple[Sandbox, str]]) -> None:
    """Drop what a failed group made and delete the pending group, if one was committed
    (best effort per step: whatever is left, recovery and ``agents doctor`` find)."""
    for sandbox, ref in reversed(made):
        try:
            sandbox.drop_checkpoint(ref)
        except Exception:  # noqa: S112 - keep undoing the others; doctor reports leftovers
            continue
    if group_id is None:
        return
    with sandboxes.store.unit_of_work(write=True) as uow:
        uow.checkpoints.delete_pending_group(group_id)
        uow.commit()


def pre_write_checkpoint(sandboxes: PlanSandboxes, resource_id: str) -> CheckpointMetadata | None:
    """A regular checkpoint before a write (when the safety profile requires checkpoints).

    Resources that cannot be rolled back get none.
    """
    sandbox = sandboxes.get(resource_id)
    if not sandbox.resource.rollbackable:
        return None
    row = sandboxes.checkpoint_now(sandbox)
    enforce_budget(sandboxes, resource_id)
    return row


def enforce_budget(sandboxes: PlanSandboxes, resource_id: str) -> list[LiveCheckpoint]:
    """Prune this resource's checkpoints down to its ``checkpoint_max_per_plan``.

    Rows are marked pruned before the sandbox drops them: a crash in between leaves an
    unreferenced object (harmless), never a live row without its checkpoint.
    """
    with sandboxes.store.recording(write=True) as rec:
        doomed = _mark_over_budget(rec, sandboxes, [resource_id])
        rec.commit()
    _drop(sandboxes, doomed)
    return doomed


def _mark_over_budget(
    rec: Recording,
    sandboxes: PlanSandboxes,
    resource_ids: Iterable[str],
    sequence: int | None = None,
) -> list[LiveCheckpoint]:
    """Mark pruned what exceeds each resource's budget (read: its live checkpoints only, and
    only when their count is over it; a ``none`` resource's markers are never pruned, so
    they are not read).

    ``sequence``: the number of the decision whose checkpoints are being added (one per
    resource). Its count is not read when this instance counted at the plan's decision just
    before (``sandboxes.budget_room``; another recorder's decision since changes the number)
    and left room for one more: the budget cannot be exceeded, and the count cost a
    statement per recording (issue 22). A checkpoint outside a decision (a baseline, one
    before a write: ``PlanSandboxes.checkpoint_now``) and a count without ``sequence``
    forget the room; a failed recording leaves it smaller than it is (the next one counts
    sooner)."""
    doomed: list[LiveCheckpoint] = []
    room = sandboxes.budget_room
    for resource_id in resource_ids:
        resource = sandboxes.get(resource_id).resource
        if resource.sandbox_strategy is SandboxStrategyName.NONE:
            continue
        known = room.pop(resource_id, None)
        if sequence is not None and known is not None and known[1] == sequence and known[0] > 0:
            room[resource_id] = (known[0] - 1, sequence + 1)
            continue  # room for this one: nothing to prune
        budget = max(resource.checkpoint_max_per_plan, 2)
        count = rec.count_live(sandboxes.plan_id, resource_id)
        if count <= budget:
            if sequence is not None:
                room[resource_id] = (budget - count, sequence + 1)
            continue  # select_for_pruning would keep them all
        live = rec.live_rows(sandboxes.plan_id, resource_id)
        doomed += select_for_pruning(live, resource.checkpoint_max_per_plan)
    rec.mark_pruned(c.checkpoint_id for c in doomed)
    return doomed


def _drop(sandboxes: PlanSandboxes, doomed: list[LiveCheckpoint]) -> None:
    """After the rows are marked pruned (committed): drop what their sandboxes hold."""
    for checkpoint in doomed:
        sandboxes.get(checkpoint.resource_id).drop_checkpoint(checkpoint.ref)
