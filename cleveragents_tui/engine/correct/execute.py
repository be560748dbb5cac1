"""Carrying out a previewed correction: re-check the plan has not changed since the preview,
take the plan (one correction or run at a time), cascade to child plans, then revert
(correct/replay.py) or append (correct/append.py) (ADR-035; DESIGN.md section 5)."""

from __future__ import annotations

from cleveragents_tui.domain.correction import CorrectionAttempt
from cleveragents_tui.domain.decision import Decision
from cleveragents_tui.domain.enums import (
    CorrectionMode,
    CorrectionStatus,
    Phase,
    PlanState,
)
from cleveragents_tui.domain.errors import ConcurrentChangeError
from cleveragents_tui.domain.plan import Plan
from cleveragents_tui.domain.timeutil import utc_now
from cleveragents_tui.domain.wording import counted
from cleveragents_tui.engine.core.reasoner_choice import check_plan_model
from cleveragents_tui.engine.core.reconcile import (
    OutsideChoice,
    Reconciler,
    fingerprint,
)
from cleveragents_tui.engine.core.rollback import (
    baseline_targets,
    check_targets,
    rollback_to,
)
from cleveragents_tui.engine.core.sandboxes import PlanSandboxes
from cleveragents_tui.engine.correct.append import create_appended, run_appended
from cleveragents_tui.engine.correct.attempt import finish_attempt, load_plan, reload_attempt
from cleveragents_tui.engine.correct.model import (
    ChildAction,
    ChildImpact,
    CorrectionRefusedError,
    CorrectionResult,
    Impact,
    StalePreviewError,
)
from cleveragents_tui.engine.correct.preview import outside_refusal, preview
from cleveragents_tui.engine.correct.replay import (
    REPLAYING,
    outside_found,
    revert,
    revert_targets,
    why_run_failed,
)
from cleveragents_tui.engine.run import run_lease
from cleveragents_tui.engine.run.reversion import Reversion
from cleveragents_tui.engine.run.runner import PlanRunner, RunOptions
from cleveragents_tui.store import correction_queries
from cleveragents_tui.store.store import Store


def execute(
    store: Store,
    impact: Impact,
    *,
    acknowledged: bool,
    requested_by: str,
    options: RunOptions | None = None,
    outside: OutsideChoice | None = None,
) -> CorrectionResult:
    """Carry out a previewed correction. Warnings must have been acknowledged, and files
    changed outside the plan that the revert rolls back must be kept or discarded
    (``outside``)."""
    if impact.warnings and not acknowledged:
        raise CorrectionRefusedError(
            f"this correction has {counted(len(impact.warnings), 'warning')} to confirm",
            "confirm them, or pass --yes",
        )
    if impact.outside_changes and outside is None:
        raise outside_refusal(impact)
    options = options or RunOptions()
    if options.reasoner_factory is None:  # the replay asks the plan's model: ready?
        check_plan_model(store, impact.plan_id, replay=True)
    # Held from before the plan is taken to the end of the replay, so a runner in another
    # process never advances the plan under the correction (nor the correction under it).
    with run_lease.holding(options.sandbox_base, impact.plan_id, "correcting", store):
        return _execute(store, impact, requested_by, options, outside)


def _execute(
    store: Store,
    impact: Impact,
    requested_by: str,
    options: RunOptions,
    outside: OutsideChoice | None,
) -> CorrectionResult:
    sandboxes, target, planned = revert_targets(store, impact, options.sandbox_base)
    if planned is not None:  # refused here, before the plan is taken, if one cannot be reached
        check_targets(sandboxes, impact.decision_id, planned[0], impact.recreated)
    reconciler = Reconciler(sandboxes, impact.rollbackable, impact.attempt)
    if planned is not None and fingerprint(reconciler.outside_changes()) != fingerprint(
        impact.outside_changes
    ):
        raise StalePreviewError(
            f"files in the sandboxes of plan {impact.plan_id} changed outside the plan since "
            "the preview",
            "preview the correction again",
        )
    correction = take_plan(store, impact, requested_by)
    try:
        for child in impact.children:
            if child.outcome is not ChildAction.REJECT:  # an applied child stays applied
                _cancel_child(store, child, correction, options)
        if impact.mode is CorrectionMode.APPEND:
            return _append(store, impact, target, correction, options)
        held = outside_found(store, impact, reconciler, outside)
        found = (target, planned)
        return revert(store, impact, correction, options, sandboxes, found, (outside, held))
    except BaseException as exc:
        if reload_attempt(store, correction).status is CorrectionStatus.RUNNING:  # ended unrecorded
            finish_attempt(
                store,
                correction,
                CorrectionStatus.FAILED,
                report={"error": str(exc)},
                plan_state=PlanState.ERRORED,
            )
        raise


def take_plan(store: Store, impact: Impact, requested_by: str) -> CorrectionAttempt:
    """The database decides who corrects: the plan row is locked (PostgreSQL: FOR UPDATE
    NOWAIT; SQLite: the write lock of BEGIN IMMEDIATE), its version must be the preview's,
    and no other correction may be running."""
    with store.unit_of_work(write=True) as uow:
        plan = uow.plans.lock(impact.plan_id)
        running = uow.corrections.running(plan.plan_id)
        replaying = REPLAYING.get()
        if running is not None and replaying and running.correction_id == replaying.correction_id:
            uow.corrections.finish(  # its replay reached this correction: it is done
                running.correction_id,
                CorrectionStatus.SUCCEEDED,
                report=replaying.report,
                replacement=replaying.replacement,
            )
            uow.events.append(
                "correction_finished",
                {"correction_id": running.correction_id, "status": "succeeded"},
                plan_id=plan.plan_id,
                actor=running.requested_by,
            )
        elif running is not None:
            raise ConcurrentChangeError(
                f"plan {plan.plan_id} is busy: correction {running.correction_id} is running",
                "wait for it to finish, then preview again",
            )
        if plan.phase is Phase.APPLY and plan.state is PlanState.RUNNING:
            raise ConcurrentChangeError(
                f"plan {plan.plan_id} is busy: it is being applied",
                "wait for the Apply to finish; an applied plan takes --mode=append corrections",
            )
        if plan.version != impact.plan_version:
            raise StalePreviewError(
                f"plan {plan.plan_id} changed since the preview (version {impact.plan_version} → {plan.version})",
                "preview the correction again",
            )
        attempt = plan.attempt + 1
        correction = CorrectionAttempt(
            plan_id=plan.plan_id,
            target_decision_id=impact.decision_id,
            mode=impact.mode,
            guidance=impact.guidance,
            attempt=attempt,
            requested_by=requested_by,
        )
        uow.corrections.add(correction)
        uow.plans.save(plan.model_copy(update={"attempt": attempt, "updated_at": utc_now()}))
        uow.run(  # gates of the old attempt lapse
            correction_queries.lapse_pending_approvals,
            plan.plan_id,
            "correction",
            f"superseded by correction {correction.correction_id}",
        )
        uow.events.append(
            "correction_started",
            {"correction_id": correction.correction_id, "mode": impact.mode.value},
            plan_id=plan.plan_id,
            actor=requested_by,
        )
        uow.commit()
    return correction


def _cancel_child(
    store: Store, child: ChildImpact, correction: CorrectionAttempt, options: RunOptions
) -> None:
    """The child's unanswered questions lapse with it, as ``plan cancel`` lapses them: a
    cancelled plan asks nothing."""
    if child.outcome is ChildAction.CANCEL_AND_ROLL_BACK:
        sandboxes = PlanSandboxes(store, child.plan_id, options.sandbox_base)
        targets, marked = baseline_targets(sandboxes)
        report = rollback_to(sandboxes, f"baseline of {child.plan_id}", targets, marked)
        if not report.succeeded:
            raise CorrectionRefusedError(
                f"child plan {child.plan_id} could not be rolled back", "run `agents doctor`"
            )
    with store.unit_of_work(write=True) as uow:
        plan = uow.plans.get(child.plan_id)
        uow.plans.save(
            plan.model_copy(update={"state": PlanState.CANCELLED, "updated_at": utc_now()})
        )
        uow.events.append("plan_cancelled", {"reason": "parent corrected"}, plan_id=child.plan_id)
        uow.run(
            correction_queries.lapse_pending_approvals,
            child.plan_id,
            "correction",
            f"the plan was cancelled by its parent's correction {correction.correction_id}",
        )
        uow.commit()


def _append(
    store: Store,
    impact: Impact,
    target: Decision,
    correction: CorrectionAttempt,
    options: RunOptions,
) -> CorrectionResult:
    """History untouched: a corrective child plan runs only the corrective work, on top of
    the plan's current state (engine/correct/append.py). Then a plan that was waiting in Execute
    goes on, as after a revert, to its new attempt's gates (the old attempt's lapsed); any
    other plan stays as it is (an applied one: the appended plan lands on its own)."""
    chosen = impact.alternatives.option if impact.alternatives else None
    child = create_appended(store, impact.plan_id, target, impact.guidance, chosen, options)
    try:
        run_appended(store, child, target, impact.guidance, options)
    except Exception as exc:  # the appended plan is made, its run stopped: say so
        applied = load_plan(store, impact.plan_id).state is PlanState.APPLIED
        why = why_run_failed(exc)
        finish_attempt(
            store,
            correction,
            CorrectionStatus.FAILED,
            report={"error": f"its appended plan's run failed: {why}", "replay": "failed"},
            appended=child.plan_id,
            # what landed stays landed: an applied plan is not errored by its appended one
            plan_state=None if applied else PlanState.ERRORED,
            errored=None if applied else f"its appended plan {child.plan_id} failed: {why}",
        )
        return CorrectionResult(
            reload_attempt(store, correction), load_plan(store, impact.plan_id), None
        )
    finish_attempt(store, correction, CorrectionStatus.SUCCEEDED, appended=child.plan_id, report={})
    plan = load_plan(store, impact.plan_id)
    waiting = (PlanState.AWAITING_APPROVAL, PlanState.COMPLETED)
    if plan.phase is Phase.EXECUTE and plan.state in waiting:
        plan = PlanRunner(store, impact.plan_id, options).run()
    return CorrectionResult(reload_attempt(store, correction), plan, None)


def revert_running_plan(store: Store, reversion: Reversion) -> Plan:
    """The runner's way back to Strategize (run/reversion.py), acknowledged. A file edited
    outside the plan while it runs is taken in, as the next seal would take it
    (``_reconcile`` asked about edits made while it waited; docs/reconciliation.md)."""
    impact = preview(
        store,
        reversion.decision_id,
        CorrectionMode.REVERT,
        reversion.guidance,
        sandbox_base=reversion.sandbox_base,
    )
    if reversion.previewed is not None:
        reversion.previewed()
    return execute(
        store,
        impact,
        acknowledged=True,
        requested_by=reversion.requested_by,
        options=reversion.options,
        outside=OutsideChoice.KEEP,
    ).plan
