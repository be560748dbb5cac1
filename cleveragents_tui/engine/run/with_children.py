"""A pause, resume or cancel of a plan reaches the child plans under it.

A parent's run runs its children (in its own process) before its own Execute, so pausing
only the parent let a running child go on to its gate — model calls and tool calls the
person asked to stop. Pausing a plan pauses its running children after their current step;
resuming it resumes the children that pause paused (not one a person paused on its own);
cancelling it cancels its open children, which only its Apply could have landed. Each
child's event names the plan the change came ``with``.
"""

from __future__ import annotations

from cleveragents_tui.domain.approval import Approval, ApprovalAnswer
from cleveragents_tui.domain.enums import Phase, PlanState
from cleveragents_tui.domain.plan import Plan
from cleveragents_tui.domain.timeutil import utc_now
from cleveragents_tui.engine.run.approvals import record_answer
from cleveragents_tui.engine.run.denial import PAUSED_EVENT as PAUSED_ON_DENIAL
from cleveragents_tui.store.correction_queries import lapse_pending_approvals
from cleveragents_tui.store.unit_of_work import UnitOfWork

WITH = "with"  # the event payload's field naming the plan whose change reached the child
CHILD_STOPPED = "child:"  # + the child's id: the gate key of its parent's "run it on" question
RUN_ON = "the child plan was run on"


def pause_children(uow: UnitOfWork, plan: Plan, by: str | None) -> list[Plan]:
    """Pause the plan's children that are running or about to run (not one in Apply: a
    child lands with its parent)."""
    return [
        _change(uow, child, PlanState.PAUSED, "paused", plan.plan_id, by)
        for child in uow.plans.descendants(plan.plan_id)
        if child.state in (PlanState.RUNNING, PlanState.CREATED) and child.phase is not Phase.APPLY
    ]


def resume_children(uow: UnitOfWork, plan: Plan, by: str | None) -> list[Plan]:
    """Resume the children the plan's pause paused, each to the state it was paused in (a
    child not yet started stays so until its parent's run starts it)."""
    resumed = []
    for child in uow.plans.descendants(plan.plan_id):
        if child.state is not PlanState.PAUSED:
            continue
        pause = _last_pause(uow, child.plan_id)
        if pause.get(WITH) == plan.plan_id:
            was = PlanState.CREATED if pause.get("from") == "created" else PlanState.RUNNING
            resumed.append(_change(uow, child, was, "resumed", plan.plan_id, by))
    return resumed


def answer_parents_wait(uow: UnitOfWork, plan: Plan, by: str | None) -> list[Approval]:
    """A child plan that stopped (paused, errored) made its parent's run ask "run it on";
    running it on is that answer: the parent's question is approved, by whoever ran it, so
    that the parent's run goes on once the child is through (no second step to approve)."""
    if plan.parent_plan_id is None:
        return []
    return [
        record_answer(uow, waited.approval_id, ApprovalAnswer.APPROVED, by or "agents", RUN_ON)
        for waited in uow.approvals.pending(plan.parent_plan_id)
        if waited.gate == f"{CHILD_STOPPED}{plan.plan_id}"
    ]


def run_on_when_approved(uow: UnitOfWork, answered: Approval) -> None:
    """Approving a parent's "run it on" question about a paused child is running it on: the
    child is made ready to go on (awaiting, with nothing to answer), and the parent's run
    runs it. (An errored child its parent's run retries as it is.)"""
    if answered.answer is not ApprovalAnswer.APPROVED or not answered.gate.startswith(
        CHILD_STOPPED
    ):
        return
    child = uow.plans.get(answered.gate.removeprefix(CHILD_STOPPED))
    if child.state is PlanState.PAUSED:  # resumed with the parent that asked
        _change(
            uow,
            child,
            PlanState.AWAITING_APPROVAL,
            "resumed",
            answered.plan_id,
            answered.answered_by,
        )


def cancel_children(uow: UnitOfWork, plan: Plan, by: str | None) -> list[Plan]:
    """Cancel the plan's open children; their unanswered questions lapse with them."""
    cancelled = []
    for child in uow.plans.descendants(plan.plan_id):
        if child.state.is_terminal:
            continue
        cancelled.append(_change(uow, child, PlanState.CANCELLED, "cancelled", plan.plan_id, by))
        reason = f"its parent plan {plan.plan_id} was cancelled"
        uow.run(lapse_pending_approvals, child.plan_id, "cancelled", reason)
    return cancelled


def _last_pause(uow: UnitOfWork, plan_id: str) -> dict[str, object]:
    """The payload of the plan's last pause: one that came with a parent's names it
    (``WITH``); its own (a person's, a denial's) does not."""
    _, payload = uow.events.latest_of(plan_id, ("plan_paused", PAUSED_ON_DENIAL))
    return payload


def _change(
    uow: UnitOfWork, child: Plan, state: PlanState, what: str, parent_id: str, by: str | None
) -> Plan:
    saved = uow.plans.save(child.model_copy(update={"state": state, "updated_at": utc_now()}))
    uow.events.append(
        f"plan_{what}",
        {"from": child.state.value, WITH: parent_id},
        plan_id=child.plan_id,
        actor=by,
    )
    return saved
