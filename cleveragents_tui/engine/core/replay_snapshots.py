"""Recording a revert's diff while its replay runs: the old attempt's points chosen before the
rollback (its basis), the new attempt's taken each time the replay stops, the differing
files read then and kept with the correction; and the replay a later run goes on with
(:func:`current_replay`). docs/corrections.md, "Diffs", says what is compared and why."""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cleveragents_tui.domain.approval import ApprovalKind
from cleveragents_tui.domain.checkpoint import CheckpointMetadata
from cleveragents_tui.domain.correction import CorrectionAttempt
from cleveragents_tui.domain.decision import Decision
from cleveragents_tui.domain.enums import (
    CheckpointType,
    CorrectionMode,
    CorrectionStatus,
    DecisionType,
    Phase,
    PlanState,
)
from cleveragents_tui.domain.errors import UserError
from cleveragents_tui.domain.plan import Plan
from cleveragents_tui.domain.rollback import ResourceOutcome, ResourceRollback, RollbackReport
from cleveragents_tui.domain.timeutil import utc_now
from cleveragents_tui.engine.core import file_diff
from cleveragents_tui.engine.core.file_diff import (
    TEXT_LIMIT,
    Budget,
    FileDiff,
    ResourceDiff,
    compare,
    decoded,
    is_binary,
    path_bytes,
    path_of,
    readable_path,
    stored,
)
from cleveragents_tui.engine.core.sandboxes import PlanSandboxes
from cleveragents_tui.sandbox.base import Change, ChangeKind, Sandbox, ScratchCheckpoints
from cleveragents_tui.store.correction_queries import superseded_by_any
from cleveragents_tui.store.snapshot_reads import correcting, next_execute_decision, plans
from cleveragents_tui.store.store import Store
from cleveragents_tui.store.unit_of_work import UnitOfWork

# The two comparisons, as the CLI and the app title them.
AT_DECISION = (
    "at the corrected decision: the old attempt right after it vs the new attempt right "
    "after its replacement"
)


FINAL = (
    "final states: the old attempt when the correction started vs the new attempt when "
    "the replay stopped"
)


UNFINISHED = (
    "the replay has not ended: it stopped at a gate, a pause or an error, and this diff is "
    "where it stopped; it is recorded again when the plan goes on (agents plan run {plan}) "
    "and is final once Execute is done"
)


NO_AT_DECISION = (
    "the corrected decision is not an Execute decision: it did no work of its own, so only "
    "the final states are compared"
)


_RECREATED = (
    "its sandbox has no checkpoints and was made anew from the real resource: the old "
    "attempt's state was not kept"
)


# A recreated sandbox compares at most this many files (the old attempt's changes are kept
# in the correction's report).
RECREATED_FILES = 2_000


def old_attempt_points(
    uow: UnitOfWork, decision: Decision, targets: Mapping[str, CheckpointMetadata]
) -> dict[str, str] | None:
    """Before a revert rolls back: per resource, the checkpoint holding the old attempt's
    state right after the corrected decision's own work — the state the next decision was
    made in. Empty when no decision followed (the point is then the old attempt's final
    state); None for a decision that is not an Execute decision (there is no such point).
    Read in the caller's transaction (the revert's reads before its rollback)."""
    if decision.phase is not Phase.EXECUTE:
        return None
    # the one _state_after looks for, read alone: not the whole plan (issue 22)
    decisions = uow.run(next_execute_decision, decision.plan_id, decision.sequence_number)
    rows = uow.checkpoints.basis(decision.plan_id, *(d.decision_id for d in decisions))
    found = _state_after(decisions, rows, decision.sequence_number)
    if found is None:
        return {}
    return {r: found.get(r, target.ref) for r, target in targets.items()}


# What the ``snapshots`` of a revert's report say of its replay (docs/corrections.md, "Diffs").
STARTED, STOPPED, ENDED = "started", "stopped", "ended"


def remember_basis(
    uow: UnitOfWork,
    correction_id: str,
    rollback: RollbackReport | None,
    old_points: Mapping[str, str] | None,
) -> None:
    """Right after a revert's rollback, before its replay: keep with the correction what any
    process needs to record its diff when the replay stops — the rollback's report (the
    safety checkpoints: the old attempt's final states) and the old attempt's points at the
    corrected decision. It also marks the correction as the one the plan replays. In the
    caller's transaction (which commits it with the rest of what the rollback leaves)."""
    basis = {
        "rollback": rollback.model_dump(mode="json") if rollback is not None else None,
        "old_points": dict(old_points) if old_points is not None else None,
    }
    uow.corrections.record_snapshots(correction_id, {"replay": STARTED, "basis": basis})


def current_replay(store: Store, plan_id: str) -> CorrectionAttempt | None:
    """The revert whose replay a run of the plan goes on with, from the store alone: the
    plan's latest revert that rolled back (it kept a basis), finished — a running one is
    replayed by its own process, or was left by a crash that `agents doctor --repair`
    settles —, whose decision is superseded and whose replay has not ended. None when
    there is none: the run makes decisions of its own."""
    with store.unit_of_work() as uow:
        latest = latest_replay(uow, plan_id)
        if latest is None or latest.status is CorrectionStatus.RUNNING:
            return None
        if _replay_state(latest) not in (STARTED, STOPPED):
            return None
        if uow.decisions.get(latest.target_decision_id).superseded_by is None:
            return None
    return latest


def record_earlier_replay(
    store: Store, earlier: CorrectionAttempt | None, sandbox_base: Path | None = None
) -> None:
    """Before a revert rolls the plan back: the replay of the revert before it (``earlier``:
    :func:`latest_replay`, read by the revert with its other reads), if it has not ended,
    ends here — its snapshots are recorded where it stopped, and no later run goes on with
    it (the new revert takes over)."""
    if earlier is not None and _replay_state(earlier) in (STARTED, STOPPED):
        record_snapshots(store, earlier.correction_id, sandbox_base)


def record_snapshots(
    store: Store,
    correction_id: str,
    sandbox_base: Path | None = None,
    opened: PlanSandboxes | None = None,
    superseded: list[str] | None = None,
) -> None:
    """When a revert's replay stops, in whichever process ran it: take the new attempt's
    state of every resource the rollback rolled back, read what differs from the old
    attempt (final states, and at the corrected decision for an Execute decision), and keep
    it with the correction — final once the replay has ended, recorded again at its next
    stop until then. Nothing for a correction whose replay is over or was taken over.
    ``opened``: the plan's sandboxes as the revert had them (their host and resources read:
    reopened here without reading them again, two transactions fewer). ``superseded``: the
    decisions the revert's supersede marked, in sequence order, when it ran in this process
    (only the guidance supersedes: the same ids the read here finds, not read again — ~4 ms
    at ~40% of 10,000)."""
    with store.unit_of_work() as uow:
        correction = uow.corrections.get(correction_id)
        latest = latest_replay(uow, correction.plan_id)
        if latest is None or latest.correction_id != correction_id:
            return  # a later revert took over: this replay ended where it last stopped
        if _replay_state(correction) not in (STARTED, STOPPED):
            return
        ended = _replay_ended(uow, uow.run(plans, {correction.plan_id})[correction.plan_id])
        # what follows needs of the plan's decisions only these (issue 22: not all of them)
        plan_id, target = correction.plan_id, correction.target_decision_id
        made = uow.run(correcting, plan_id, target)
        if superseded is None:
            superseded = uow.run(superseded_by_any, plan_id, {d.decision_id for d in made})
        remade = next(
            (
                d
                for d in made
                if d.decision_type is not DecisionType.USER_INTERVENTION and d.superseded_by is None
            ),
            None,
        )
        following = (
            uow.run(next_execute_decision, plan_id, remade.sequence_number) if remade else []
        )
        rows = uow.checkpoints.basis(correction.plan_id, *(d.decision_id for d in following))
    basis = correction.report["snapshots"]["basis"]
    rollback = RollbackReport.model_validate(basis["rollback"]) if basis["rollback"] else None
    old_points: Mapping[str, str] | None = basis["old_points"]
    new_state = (
        _state_after(following, rows, remade.sequence_number) if remade is not None else None
    )
    if opened is not None and opened.plan_id == correction.plan_id:
        sandboxes = opened.reopened()
    else:
        sandboxes = PlanSandboxes(store, correction.plan_id, sandbox_base)
    budget = Budget(file_diff.TOTAL_LIMIT)
    final: list[dict[str, Any]] = []
    at_decision: list[dict[str, Any]] = []
    for entry in rollback.resources if rollback is not None else ():
        if entry.outcome is ResourceOutcome.RECREATED:  # phase-level tier: made anew
            final.append(stored(_compare_recreated(sandboxes, entry, budget, ended)))
            continue
        if entry.outcome is not ResourceOutcome.ROLLED_BACK or entry.safety_ref is None:
            continue
        resource_id, safety = entry.resource_id, entry.safety_ref
        old_point = (old_points or {}).get(resource_id, safety)
        with contextlib.ExitStack() as scope:
            try:
                sandbox = sandboxes.get(resource_id)
                now = scope.enter_context(_state_now(sandbox))
            except UserError as exc:
                note = f"the new attempt's state could not be recorded: {exc}"
                final.append(stored(ResourceDiff(resource_id, safety, "", note=note)))
                at_decision.append(stored(ResourceDiff(resource_id, old_point, "", note=note)))
                continue
            final.append(stored(compare(sandbox, resource_id, safety, now, budget)))
            # a resource the next decision has no checkpoint of was not written since the
            # rollback: it is still at the rollback's target
            new_point = (
                now if new_state is None else new_state.get(resource_id, entry.target_ref or now)
            )
            at_decision.append(stored(compare(sandbox, resource_id, old_point, new_point, budget)))
    snapshots: dict[str, object] = {
        "replay": ENDED if ended else STOPPED,
        "recorded_at": utc_now().isoformat(),
        # superseded by the guidance decision, or by a decision re-made in its place
        "superseded": superseded,
        "replacements": [d.decision_id for d in made],
        "final": final,
        "at_decision": at_decision if old_points is not None else None,
    }
    with store.unit_of_work(write=True) as uow:
        uow.corrections.record_snapshots(correction_id, snapshots)
        uow.commit()


@contextlib.contextmanager
def _state_now(sandbox: Sandbox) -> Iterator[str]:
    """The new attempt's state of ``sandbox``, to compare and forget: a scratch checkpoint
    where the sandbox takes one (nothing written, nothing flushed), else a checkpoint
    dropped afterwards (only read here: the diff keeps the contents)."""
    if isinstance(sandbox, ScratchCheckpoints):
        with sandbox.scratch_checkpoint() as now:
            yield now
        return
    now = sandbox.checkpoint()
    try:
        yield now
    finally:
        with contextlib.suppress(UserError):
            sandbox.drop_checkpoint(now)


@dataclass(frozen=True)
class RecreatedState:
    """A sandbox the phase-level tier made anew: a checkpoint of the new sandbox as it was
    made (the real resource then), and the files the discarded one had changed (each as
    :func:`_kept_side` keeps it). Both None when they could not be read: the diff says so."""

    fresh_ref: str | None
    old_files: tuple[dict[str, Any], ...] | None


def recreate_keeping_old_files(sandboxes: PlanSandboxes, resource_id: str) -> RecreatedState:
    """Make the sandbox of ``resource_id`` anew (PlanSandboxes.recreate), reading first what
    its old attempt changed: with no checkpoint of the old attempt, the correction's diff
    has nothing else to compare the replay with. Reading never stops the rollback."""
    old_files: tuple[dict[str, Any], ...] | None = None
    try:
        old = sandboxes.get(resource_id)
        ref = old.checkpoint()  # discarded with the sandbox below
        budget = Budget(file_diff.TOTAL_LIMIT)
        changes = old.changes_since_baseline()[:RECREATED_FILES]
        old_files = tuple(_kept_side(c.path, old.read(ref, c.path), budget) for c in changes)
    except Exception:  # the diff says the old state was not kept
        old_files = None
    new = sandboxes.recreate(resource_id)
    try:
        fresh: str | None = new.checkpoint()
    except Exception:  # as above
        fresh = None
    return RecreatedState(fresh, old_files if fresh is not None else None)


def _kept_side(path: str, data: bytes | None, budget: Budget) -> dict[str, Any]:
    """One side of a file, as the report keeps it: its hash (to compare), and its text or
    a summary (a binary or very large file, or past the correction's text budget)."""
    side: dict[str, Any] = {
        "path": readable_path(path),
        "path_bytes": path_bytes(path),
        "sha": None if data is None else hashlib.sha256(data).hexdigest(),
        "size": None if data is None else len(data),
        "text": None,
        "kind": None,
    }
    if data is None:
        return side
    if is_binary(data):
        side["kind"] = "binary"
    elif len(data) > TEXT_LIMIT:
        side["kind"] = "large"
    elif budget.left < len(data):
        side["kind"] = "unkept"
    else:
        budget.left -= len(data)
        side["text"] = decoded(data)
    return side


def _compare_recreated(
    sandboxes: PlanSandboxes, entry: ResourceRollback, budget: Budget, ended: bool
) -> ResourceDiff:
    """The final states of a sandbox made anew: the files its old attempt had changed (kept
    by :func:`recreate_keeping_old_files`) and those the new attempt changed since it was
    made, each as the old attempt left it against the new sandbox now."""
    resource_id, fresh = entry.resource_id, entry.target_ref
    if fresh is None or entry.old_files is None:
        return ResourceDiff(resource_id, "", "", note=_RECREATED)
    try:
        sandbox = sandboxes.get(resource_id)
        now = sandbox.checkpoint()
    except UserError as exc:
        note = f"the new attempt's state could not be recorded: {exc}"
        return ResourceDiff(resource_id, fresh, "", note=note)
    try:
        old = {path_of(side): side for side in entry.old_files}
        paths = sorted(set(old) | {c.path for c in sandbox.diff(fresh, now)})
        files = []
        for path in paths:
            new_data = sandbox.read(now, path)
            was = old.get(path) or _kept_side(path, sandbox.read(fresh, path), budget)
            new_sha = None if new_data is None else hashlib.sha256(new_data).hexdigest()
            if was["sha"] == new_sha:
                continue
            files.append(_recreated_file(path, was, new_data, budget))
        return ResourceDiff(resource_id, fresh, now, files)
    except UserError as exc:
        return ResourceDiff(resource_id, fresh, now, note=str(exc))
    finally:
        with contextlib.suppress(UserError):  # only read here: the diff keeps the contents
            sandbox.drop_checkpoint(now)
            if ended:  # the replay is over: the new sandbox's first state is not needed
                sandbox.drop_checkpoint(fresh)


def _recreated_file(path: str, was: dict[str, Any], new: bytes | None, budget: Budget) -> FileDiff:
    if was["sha"] is None:
        kind = ChangeKind.ADDED
    else:
        kind = ChangeKind.DELETED if new is None else ChangeKind.MODIFIED
    change = Change(path, kind)
    old_size = was["size"]
    sizes = (
        f"{'absent' if old_size is None else f'{old_size:,} bytes'} → "
        f"{'absent' if new is None else f'{len(new):,} bytes'}"
    )
    if was["kind"] == "binary" or is_binary(new):
        return FileDiff(change, None, None, f"binary file: contents not shown ({sizes})")
    if was["kind"] == "large" or len(new or b"") > TEXT_LIMIT:
        return FileDiff(change, None, None, f"large file: contents not shown ({sizes})")
    if was["kind"] == "unkept" or budget.left < len(new or b""):
        kept = f"contents not kept: the diff already holds {file_diff.TOTAL_LIMIT:,} bytes of text"
        return FileDiff(change, None, None, kept)
    budget.left -= len(new or b"")
    return FileDiff(change, was["text"], decoded(new))


def latest_replay(uow: UnitOfWork, plan_id: str) -> CorrectionAttempt | None:
    """The plan's latest revert that kept a basis: the last one that got to its replay."""
    return next(
        (
            c
            for c in reversed(uow.corrections.for_plan(plan_id))
            if c.mode is CorrectionMode.REVERT and "basis" in snapshots_of(c)
        ),
        None,
    )


def snapshots_of(correction: CorrectionAttempt) -> dict[str, Any]:
    kept = correction.report.get("snapshots")
    return kept if isinstance(kept, dict) else {}


def _replay_state(correction: CorrectionAttempt) -> str | None:
    """started, stopped or ended; None without snapshots. Snapshots of an older version
    (no ``replay``) were recorded once, final."""
    kept = snapshots_of(correction)
    return str(kept.get("replay", ENDED)) if kept else None


def _replay_ended(uow: UnitOfWork, plan: Plan) -> bool:
    """Whether the replay has reached its end: Execute done in this attempt (waiting at the
    Apply gate, completed, applying or applied), or the plan ended."""
    if plan.state.is_terminal or plan.phase is Phase.APPLY:
        return True
    if plan.phase is not Phase.EXECUTE:
        return False
    if plan.state is PlanState.COMPLETED:
        return True
    gate = f"apply@{plan.attempt}"  # the runner's key for this attempt's Apply gate
    return any(
        a.kind is ApprovalKind.APPLY_GATE and a.details.get("key") == gate
        for a in uow.approvals.every(plan.plan_id)
    )


def _state_after(
    decisions: Iterable[Decision], rows: Iterable[CheckpointMetadata], after: int
) -> dict[str, str] | None:
    """The checkpoints of the first current Execute decision recorded after sequence number
    ``after``: the state it was made in, everything before it done (resource -> ref; a
    resource without one was not written since). None when no such decision was recorded."""
    following = [
        d
        for d in decisions
        if d.superseded_by is None
        and d.phase is Phase.EXECUTE
        and d.decision_type is not DecisionType.USER_INTERVENTION  # made in no state of its own
        and d.sequence_number > after
    ]
    if not following:
        return None
    first = min(following, key=lambda d: d.sequence_number)
    return {
        r.resource_id: r.ref
        for r in rows
        if r.decision_id == first.decision_id and r.checkpoint_type is CheckpointType.DECISION_POINT
    }
