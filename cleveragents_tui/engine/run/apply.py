"""Apply: land every sandbox (the plan's and its completed children's) on the real resources,
resource by resource through the apply journal, so a rerun after a crash lands the rest
(docs/reliability.md). Every sandbox is asked first whether it would refuse, so a refusal
that can be foreseen lands nothing. A refusal leaves the plan ``constrained``
(run/constrained_apply.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from cleveragents_tui import failpoints
from cleveragents_tui.domain.apply_journal import ApplyStepState
from cleveragents_tui.domain.approval import ApprovalKind
from cleveragents_tui.domain.enums import Phase, PlanState
from cleveragents_tui.domain.errors import ConcurrentChangeError, UserError
from cleveragents_tui.domain.plan import Plan
from cleveragents_tui.domain.timeutil import utc_now
from cleveragents_tui.engine.run import children, constrained_apply
from cleveragents_tui.engine.run.apply_journal import ApplyJournal, landed_record, landing_began
from cleveragents_tui.engine.run.errors import PlanStateError, WaitForApproval
from cleveragents_tui.sandbox.base import ChecksApply, NothingLandedError

if TYPE_CHECKING:
    from cleveragents_tui.engine.run.runner import PlanRunner


def apply(runner: PlanRunner) -> Plan:
    """Land the plan, once Execute completed (or retry an Apply that was refused, failed or
    interrupted); a constrained plan whose revert a person approved goes back instead."""
    plan = runner.plan()
    gate = runner.gates.answers(ApprovalKind.APPLY_GATE, "apply")
    gate_reached = bool(gate)
    ready = plan.phase is Phase.EXECUTE and (
        plan.state is PlanState.COMPLETED
        or (plan.state in (PlanState.AWAITING_APPROVAL, PlanState.RUNNING) and gate_reached)
    )
    # A retry: an Apply that was refused, failed, or interrupted by a crash (every
    # sandbox's apply can be repeated).
    ready = ready or (
        plan.phase is Phase.APPLY
        and plan.state in (PlanState.CONSTRAINED, PlanState.ERRORED, PlanState.RUNNING)
    )
    if not ready:
        raise PlanStateError(
            f"plan {runner.plan_id} is {plan.phase.value} · {plan.state.value}: Execute has not completed",
            f"run it until it waits at the Apply gate: agents plan run {runner.plan_id}",
        )
    if plan.state is PlanState.CONSTRAINED and (reverted := constrained_apply.answered(runner)):
        return reverted  # a person approved going back to Strategize
    try:
        runner.reconcile()
    except WaitForApproval:
        return runner.update_plan(state=PlanState.AWAITING_APPROVAL)
    _take_for_apply(runner, plan.attempt)
    results: list[str] = []
    try:
        order = [*children.landing_order(runner), (runner, True)]
        _refuse_before_landing(order)
        for landing, own_sandboxes in order:
            results.extend(landing.apply_own(land=own_sandboxes))
    except UserError as exc:
        _apply_failed(runner, PlanState.CONSTRAINED, exc.problem, exc.fix)
        return constrained_apply.after_refusal(runner, str(exc))  # access_network
    except Exception as exc:
        _apply_failed(runner, PlanState.ERRORED, str(exc), None)
        raise
    with runner.store.unit_of_work(write=True) as uow:
        # the Apply is whoever approved its gate (a person, or the profile), not the runner
        landed_by = (gate[-1].answered_by if gate else None) or runner.options.user
        uow.events.append(
            "plan_applied", {"results": results}, plan_id=runner.plan_id, actor=landed_by
        )
        uow.commit()
    return runner.plan()


def _refuse_before_landing(order: list[tuple[PlanRunner, bool]]) -> None:
    """Raise the first refusal a sandbox Apply lands would give now (read only: each opens,
    and says whether the real resource changed where the plan changed it). Landing resource
    by resource, a refusal met at the third would leave the first two landed, which no
    revert can replay over; found here, nothing has landed. The first to land is not asked:
    its own landing checks the same before it writes, with nothing landed yet. A resource
    can still change between this check and its landing: then Apply stops there."""
    first = True
    for runner, own_sandboxes in order:
        if not own_sandboxes:
            continue
        began = landing_began(runner.store, runner.plan_id)
        for resource_id in runner.action.resources:
            if resource_id in began:  # an Apply a crash stopped: what began lands on
                continue
            sandbox = runner.sandboxes.get(resource_id)
            if first:
                first = False
                continue
            refused = sandbox.apply_refusal() if isinstance(sandbox, ChecksApply) else None
            if refused is not None:
                raise refused


def _take_for_apply(runner: PlanRunner, attempt: int) -> None:
    """Mark the plan as being applied (Apply · running), under the plan-row lock: a
    correction that is running, or that made a new attempt since this Apply was
    approved, makes it refuse; a correction that starts now is refused as busy. The
    correction this runner replays is running until its replay stops: an automatic Apply
    at the end of the replay is part of it."""
    with runner.store.unit_of_work(write=True) as uow:
        plan = uow.plans.lock(runner.plan_id)
        running = uow.corrections.running(runner.plan_id)
        replaying = (
            runner.correction is not None
            and running is not None
            and running.target_decision_id == runner.correction.corrects_decision_id
        )
        if running is not None and not replaying:
            raise ConcurrentChangeError(
                f"plan {runner.plan_id} is busy: correction {running.correction_id} is running",
                "wait for it to finish; its new attempt asks for the Apply gate again",
            )
        if plan.attempt != attempt:
            raise ConcurrentChangeError(
                f"plan {runner.plan_id} changed: a correction made attempt {plan.attempt} "
                "since this Apply was approved",
                f"answer the new attempt's Apply gate: agents plan run {runner.plan_id}",
            )
        uow.plans.save(
            plan.model_copy(
                update={
                    "phase": Phase.APPLY,
                    "state": PlanState.RUNNING,
                    "updated_at": utc_now(),
                }
            )
        )
        uow.events.append("apply_started", {"attempt": attempt}, plan_id=runner.plan_id)
        uow.commit()


def _apply_failed(runner: PlanRunner, state: PlanState, reason: str, fix: str | None) -> Plan:
    """Record why Apply stopped — the problem (``reason``) and, for a refusal, the fix the
    resource named (None: the CLI says what fixes any refusal, cli/outcome.py)."""
    with runner.store.unit_of_work(write=True) as uow:
        uow.events.append(
            "apply_failed",
            {"state": state.value, "reason": reason, "fix": fix},
            plan_id=runner.plan_id,
        )
        uow.commit()
    return runner.update_plan(phase=Phase.APPLY, state=state)


def apply_own(runner: PlanRunner, *, land: bool = True) -> list[str]:
    """Land this plan's sandboxes (unless ``land`` is False: they are its host's, which
    lands them) and mark the plan applied. Each resource goes planned → landing → landed
    in the apply journal before the step, so a rerun after a crash skips what landed and
    lands the rest (engine/run/apply_journal.py)."""
    if not land:
        runner.update_plan(phase=Phase.APPLY, state=PlanState.APPLIED)
        return [f"{runner.plan_id}: landed with the sandboxes of {runner.sandboxes.host_plan_id}"]
    sandboxes = {rid: runner.sandboxes.get(rid) for rid in runner.action.resources}
    journal = ApplyJournal(runner.store, runner.plan_id, runner.plan().attempt)
    steps = journal.plan([(rid, sb.resource.sandbox_strategy) for rid, sb in sandboxes.items()])
    results = []
    for step in steps:
        resource_id = step.resource_id
        if step.state is ApplyStepState.LANDED:  # a crashed run landed it: not again
            results.append(f"{resource_id}: {step.landed.get('summary', 'landed')}")
            continue
        journal.landing(resource_id)
        failpoints.hit("apply.resource", resource_id)
        sandbox = sandboxes[resource_id]
        try:
            result = sandbox.apply()
        except NothingLandedError:
            journal.refused(resource_id)  # the real resource is as it was
            raise
        failpoints.hit("apply.landed", resource_id)
        journal.landed(resource_id, landed_record(sandbox, runner.sandboxes.host_plan_id, result))
        results.append(f"{resource_id}: {result.summary}")
    runner.update_plan(phase=Phase.APPLY, state=PlanState.APPLIED)
    return results
