"""A revert: roll the resources back (all or nothing), fork the actor from the decision's
LangGraph state with the guidance, supersede the affected subtree, replay, and carry the
replay's result forward (ADR-035; docs/corrections.md)."""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path

from cleveragents_tui import failpoints
from cleveragents_tui.domain.checkpoint import CheckpointMetadata
from cleveragents_tui.domain.correction import CorrectionAttempt
from cleveragents_tui.domain.decision import Decision
from cleveragents_tui.domain.enums import (
    CorrectionMode,
    CorrectionStatus,
    DecisionType,
    Phase,
    PlanState,
    SandboxStrategyName,
)
from cleveragents_tui.domain.rollback import RollbackReport
from cleveragents_tui.domain.timeutil import utc_now
from cleveragents_tui.engine.core.influence import OPEN_GRAPHS
from cleveragents_tui.engine.core.reconcile import (
    Held,
    OutsideChoice,
    Reconciler,
)
from cleveragents_tui.engine.core.recorder import Correction
from cleveragents_tui.engine.core.replay_snapshots import (
    latest_replay,
    old_attempt_points,
    record_earlier_replay,
    record_snapshots,
    remember_basis,
)
from cleveragents_tui.engine.core.rollback import baselines_from, rollback_to, targets_of
from cleveragents_tui.engine.core.sandboxes import PlanSandboxes
from cleveragents_tui.engine.correct.attempt import (
    finish_attempt,
    load_plan,
    record_progress,
    reload_attempt,
)
from cleveragents_tui.engine.correct.model import (
    CorrectionIncompleteError,
    CorrectionResult,
    Impact,
)
from cleveragents_tui.engine.run.errors import ReasonerFailedError, SandboxUnavailableError
from cleveragents_tui.engine.run.runner import PlanRunner, RunOptions
from cleveragents_tui.store import correction_queries
from cleveragents_tui.store import snapshot_reads as reads
from cleveragents_tui.store.store import Store
from cleveragents_tui.store.unit_of_work import UnitOfWork

Planned = tuple[dict[str, CheckpointMetadata], list[str]]


def revert_targets(
    store: Store, impact: Impact, sandbox_base: Path | None
) -> tuple[PlanSandboxes, Decision, Planned | None]:
    """In one read transaction: the plan's sandboxes (their host and the resources read
    with the rest, as the preview read them: opening one then reads nothing), the corrected
    decision, and what a revert rolls back (resource -> checkpoint, and the resources it
    cannot), or None when it rolls back no resource (an append, a plan still in
    Strategize)."""
    with store.unit_of_work() as uow:  # the decision's phase is the preview's: rows never change
        read = uow.run(reads.basics, impact.decision_id)
        resources = {r.resource_id: r for r in read.resources}
        sandboxes = PlanSandboxes(
            store, impact.plan_id, sandbox_base, host_plan_id=read.host_plan_id, resources=resources
        )
        return sandboxes, read.decision, _planned(uow, impact, read.plan.phase, read.decision)


def _planned(uow: UnitOfWork, impact: Impact, phase: Phase, target: Decision) -> Planned | None:
    if impact.mode is not CorrectionMode.REVERT:
        return None
    if not (impact.rollbackable or impact.non_rollbackable):
        return None
    if phase is Phase.STRATEGIZE:
        return None
    if impact.decision_phase is Phase.EXECUTE:
        return targets_of(uow, impact.plan_id, target)
    return baselines_from(uow.checkpoints.basis(impact.plan_id))


def revert(
    store: Store,
    impact: Impact,
    correction: CorrectionAttempt,
    options: RunOptions,
    sandboxes: PlanSandboxes,
    found: tuple[Decision, Planned | None],
    outside: tuple[OutsideChoice | None, Held | None] = (None, None),
) -> CorrectionResult:
    """``found``: the corrected decision and what ``revert_targets`` found to roll back,
    before the plan was taken (the preview's plan version, checked when it was taken,
    vouches that it still holds); ``outside``: what to do with the files changed outside the
    plan, and those copied aside to keep."""
    report: RollbackReport | None = None
    targets: dict[str, CheckpointMetadata] = {}
    target, planned = found
    points: dict[str, str] | None = None  # the old attempt's, for the diff (replay_snapshots)
    with store.unit_of_work() as uow:  # what the steps before the rollback read, at once
        earlier = latest_replay(uow, impact.plan_id)
        if planned is not None:
            points = old_attempt_points(uow, target, planned[0])
    # an earlier revert's replay that has not ended ends here, where it stopped (its diff
    # changes no decision or checkpoint row: the points read above still hold)
    record_earlier_replay(store, earlier, options.sandbox_base)
    if planned is not None:
        targets, marked = planned
        report = rollback_to(sandboxes, target.decision_id, targets, marked, impact.recreated)
        if not report.succeeded:  # every resource was put back, outside changes too
            if outside[1] is not None:
                outside[1].drop()
            finish_attempt(
                store,
                correction,
                CorrectionStatus.FAILED,
                report=report.model_dump(mode="json"),
                plan_state=PlanState.ERRORED,
            )
            return CorrectionResult(
                reload_attempt(store, correction), load_plan(store, impact.plan_id), report
            )
        _outside_answered(store, impact, correction, *outside)
    guidance, superseded = _carry_forward(
        store, impact, correction, target, report, (targets, points)
    )
    recorded = _Replaying(
        correction.correction_id,
        guidance.decision_id,
        report.model_dump(mode="json") if report else {},
    )

    def snapshot() -> None:  # the state the replay stopped in: the new attempt's side
        record_snapshots(
            store, correction.correction_id, options.sandbox_base, sandboxes, superseded
        )

    replay = Correction(impact.decision_id, impact.guidance, before_apply=snapshot)
    token = REPLAYING.set(recorded)
    try:
        replayed = PlanRunner(store, impact.plan_id, options, correction=replay).run()
    except Exception as exc:  # the correction is made, its replay is not: say so
        if reload_attempt(store, correction).status is not CorrectionStatus.RUNNING:
            raise  # a correction the replay started took over, and failed
        finish_attempt(
            store,
            correction,
            CorrectionStatus.FAILED,
            report={**recorded.report, "error": f"its replay failed: {exc}", "replay": "failed"},
            replacement=guidance.decision_id,
            plan_state=PlanState.ERRORED,
            errored=f"the replay of correction {correction.correction_id} failed: {why_run_failed(exc)}",
        )
        replayed = load_plan(store, impact.plan_id)
    else:
        _finish_replayed(store, correction, recorded)
    finally:  # after the outcome is recorded: what fails here does not change it
        REPLAYING.reset(token)
        snapshot()  # nothing more if an automatic Apply took it already (final)
    return CorrectionResult(reload_attempt(store, correction), replayed, report)


def why_run_failed(exc: Exception) -> str:
    """A failed run's reason without its "plan P errored: ... run it again" framing."""
    if isinstance(exc, ReasonerFailedError | SandboxUnavailableError):
        return exc.reason
    return str(exc)


def outside_found(
    store: Store, impact: Impact, reconciler: Reconciler, outside: OutsideChoice | None
) -> Held | None:
    """A revert's reconciliation starts as the runner's does (docs/reconciliation.md): the
    event ``sandbox_changed_outside``; files to keep are copied aside before the rollback."""
    if not impact.outside_changes:
        return None
    record_progress(
        store,
        impact.plan_id,
        "sandbox_changed_outside",
        {
            "changes": [c.summary() for c in impact.outside_changes],
            "count": sum(len(c.paths) for c in impact.outside_changes),
        },
    )
    return reconciler.hold(impact.outside_changes) if outside is OutsideChoice.KEEP else None


def _outside_answered(
    store: Store,
    impact: Impact,
    correction: CorrectionAttempt,
    outside: OutsideChoice | None,
    held: Held | None,
) -> None:
    """After the rollback, before the replay: kept files are put back on top of the
    rolled-back state (the replay starts from them, and its checkpoints record them);
    discarded ones went with the rollback (its safety checkpoint still holds them)."""
    if not impact.outside_changes:
        return
    if held is not None:
        try:
            held.reapply()
        except OSError as exc:
            raise CorrectionIncompleteError(
                f"the resources were rolled back, but the files changed outside the plan could "
                f"not be put back on top ({exc}); they are kept in {held.copies}"
            ) from exc
        held.drop()
    kept = outside is OutsideChoice.KEEP
    record_progress(
        store,
        impact.plan_id,
        "outside_changes_kept" if kept else "outside_changes_discarded",
        {"changes": [c.summary() for c in impact.outside_changes], "by": correction.requested_by},
    )


@dataclass(frozen=True)
class _Replaying:
    """A revert whose replay is running in this thread: what its success records."""

    correction_id: str
    replacement: str
    report: dict[str, object]


# Set while a revert's replay runs in this context. A phase reversion during the replay
# starts a correction of its own (PlanRunner._revert_to_strategize): the replay got as far
# as a gate the execution actor raised, so execute.py's take_plan finishes this one then.
REPLAYING: ContextVar[_Replaying | None] = ContextVar("replaying_correction", default=None)


def _finish_replayed(store: Store, correction: CorrectionAttempt, done: _Replaying) -> None:
    """Record the success once the replay stopped where a run stops (a gate, a pause, the
    end): a commit that fails is tried again, like every step past the rollback."""
    problem: Exception | None = None
    for _ in range(FORWARD_ATTEMPTS):
        try:  # nothing when a correction its replay started took the plan (and finished it)
            finish_attempt(
                store,
                correction,
                CorrectionStatus.SUCCEEDED,
                replacement=done.replacement,
                report=done.report,  # on top of the report's: snapshots kept
                if_running=True,
            )
            return
        except Exception as exc:
            problem = exc
    raise CorrectionIncompleteError(
        f"the correction was replayed, but recording it failed {FORWARD_ATTEMPTS} times: "
        f"{problem}; run `agents doctor`"
    ) from problem


FORWARD_ATTEMPTS = 3


def _carry_forward(
    store: Store,
    impact: Impact,
    correction: CorrectionAttempt,
    target: Decision,
    report: RollbackReport | None,
    rolled: tuple[dict[str, CheckpointMetadata], dict[str, str] | None],
) -> tuple[Decision, list[str] | None]:
    """Everything after the resources are rolled back, up to the replay: keep the basis of
    the correction's diff (``rolled``: the rollback's targets and the old attempt's points),
    forget the savepoints the rollback destroyed, restore the reasoning, supersede, and set
    the plan running again (the correction stays running until its replay has stopped: a
    replay that fails must not leave it recorded as succeeded). Returns the guidance decision
    and what :func:`_supersede` superseded.

    There is no way back from here: ``ROLLBACK TO SAVEPOINT`` cannot be undone, so a
    database rolled back cannot be put back as it was. The correction is carried forward
    instead: every step is idempotent, and one that fails (a database commit, the LangGraph
    saver) is tried again, up to :data:`FORWARD_ATTEMPTS` times in all.
    """
    problem: Exception | None = None
    for _ in range(FORWARD_ATTEMPTS):
        try:
            _keep_rollback(store, impact, correction, report, rolled)
            _reasoning_rollback(store, target, impact)
            return _supersede(store, target, impact)
        except Exception as exc:
            problem = exc
    raise CorrectionIncompleteError(
        f"the resources were rolled back to decision {target.decision_id}, but completing the "
        f"correction failed {FORWARD_ATTEMPTS} times: {problem}; correct the decision again, "
        "or run `agents doctor`"
    ) from problem


def _keep_rollback(
    store: Store,
    impact: Impact,
    correction: CorrectionAttempt,
    report: RollbackReport | None,
    rolled: tuple[dict[str, CheckpointMetadata], dict[str, str] | None],
) -> None:
    """What the rollback leaves, in one transaction (each part idempotent, so a retry
    commits it whole): the basis of the correction's diff — what any process that goes on
    with the replay needs —, the savepoints it destroyed marked pruned, and the event naming
    the resources rolled back."""
    targets, points = rolled
    with store.unit_of_work(write=True) as uow:
        remember_basis(uow, correction.correction_id, report, points)
        if report is not None:
            _forget_destroyed_savepoints(uow, impact.plan_id, targets)
            uow.events.append(
                "resources_rolled_back",
                {"resources": [f"{r.resource_id}: {r.outcome.value}" for r in report.resources]},
                plan_id=impact.plan_id,
            )
        uow.commit()


def _forget_destroyed_savepoints(
    uow: UnitOfWork, plan_id: str, targets: dict[str, CheckpointMetadata]
) -> None:
    """``ROLLBACK TO SAVEPOINT`` destroys every later savepoint: mark their rows pruned, so
    nothing (doctor, a later correction) takes them for live checkpoints. Git and directory
    checkpoints stay: they hold the old attempt for diffs."""
    for target in targets.values():
        if target.strategy is SandboxStrategyName.TRANSACTION_ROLLBACK:
            uow.run(correction_queries.prune_later, plan_id, target)


def _reasoning_rollback(store: Store, target: Decision, impact: Impact) -> None:
    """Fork the actor from the LangGraph state the decision was made from, with the guidance.
    A Strategize decision corrected during Execute also resets the execution actor. The
    guidance of earlier corrections that stand goes back in first (engine/correct/later_guidance.py),
    so the decisions the replay re-makes still follow it."""
    from cleveragents_tui.actors.checkpointer import open_checkpointer  # see runner._run_actor
    from cleveragents_tui.actors.graphs import Actor

    def carried(phase: Phase) -> list[dict[str, str]]:
        return [g.entry for g in impact.guidance_carried if g.phase is phase]

    ref = target.context_snapshot.actor_state_ref
    with open_checkpointer(store.engine.url) as saver:
        if ref is not None:
            actor = Actor(saver, impact.plan_id, target.phase, lambda state, r: {})
            state = actor.load(ref)
            entry = _guidance_entry(target.step_key or "*", impact)
            actor.fork(ref, {"guidance": [*state["guidance"], *carried(target.phase), entry]})
        if impact.phase_change and impact.phase_change[1] is Phase.STRATEGIZE:
            execution = Actor(saver, impact.plan_id, Phase.EXECUTE, lambda state, r: {})
            first = execution.first_checkpoint()
            if first is not None:
                entry = {"key": "*", "text": impact.guidance}
                execution.fork(first, {"guidance": [*carried(Phase.EXECUTE), entry]})


def _guidance_entry(key: str, impact: Impact) -> dict[str, str]:
    """The guidance for the actor, with the alternative the preview said the replay takes
    pinned (``choose``), so the scripted reasoner takes exactly that one."""
    entry = {"key": key, "text": impact.guidance}
    option = impact.alternatives.option if impact.alternatives else None
    return entry if option is None else {**entry, "choose": option}


def _supersede(store: Store, target: Decision, impact: Impact) -> tuple[Decision, list[str] | None]:
    """Record the guidance, mark the affected decisions and set the plan running again (unless
    it was paused while the resources were rolled back), in one transaction; when an earlier
    try already did (its commit went through), return what it recorded. With the guidance,
    the decisions it superseded, in sequence order: only the guidance supersedes, so they
    are the diff's ``superseded`` and its read of them is saved (None after an earlier
    try's commit: the diff reads them)."""
    with store.unit_of_work(write=True) as uow:
        superseded = uow.run(
            correction_queries.current_among, impact.plan_id, impact.affected_decisions
        )
        if target.decision_id not in superseded:  # an earlier try's commit went through?
            now = uow.decisions.get(target.decision_id)
            if now.superseded_by is not None:
                return uow.decisions.get(now.superseded_by), None
        sequence = uow.decisions.next_sequence_number(impact.plan_id)
        guidance = Decision(
            plan_id=impact.plan_id,
            parent_decision_id=target.parent_decision_id or target.decision_id,
            sequence_number=sequence,
            decision_type=DecisionType.USER_INTERVENTION,
            phase=target.phase,
            question=f"Correction of: {target.question}",
            chosen_option=impact.guidance,
            alternatives_considered=(target.chosen_option,),
            is_correction=True,
            corrects_decision_id=target.decision_id,
            correction_reason=impact.guidance,
            step_key=f"correction:{target.step_key or target.decision_id}",
        )
        uow.decisions.add(guidance)
        uow.flush()
        uow.run(correction_queries.supersede, sorted(superseded), by=guidance.decision_id)
        uow.events.append(
            "decisions_superseded",
            {"count": len(impact.affected_decisions), "replacement": guidance.decision_id},
            plan_id=impact.plan_id,
        )
        plan = uow.run(reads.plans, {impact.plan_id})[impact.plan_id]
        changes: dict[str, object] = {"updated_at": utc_now()}
        # paused since take_plan saved it (the preview's version, plus that save): the pause
        # holds, the replay stops at once and `plan run` goes on; a plan paused before the
        # correction (a denied gate) runs again
        taken = impact.plan_version + 1
        if plan.state is not PlanState.PAUSED or plan.version == taken:
            changes["state"] = PlanState.RUNNING
        if impact.phase_change:
            changes["phase"] = target.phase
        uow.plans.save(plan.model_copy(update=changes))
        failpoints.hit("correction.supersede")
        uow.commit()
    OPEN_GRAPHS.recorded(guidance)
    OPEN_GRAPHS.superseded(superseded)
    return guidance, superseded
