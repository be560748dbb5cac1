"""Pending human decisions: list them, answer them (who, when, why)."""

from __future__ import annotations

from cleveragents_tui.domain.approval import Approval, ApprovalAnswer
from cleveragents_tui.domain.enums import PlanState
from cleveragents_tui.domain.plan import Plan
from cleveragents_tui.store.store import Store
from cleveragents_tui.store.unit_of_work import UnitOfWork


def pending_approvals(
    store: Store, plan_ref: str | None = None, *, answered_too: bool = False, family: bool = False
) -> list[Approval]:
    """The plan's questions (every plan's without one); ``family``: while the plan is open,
    its child plans' too, which its run waits on (engine/run/children.py), each naming its
    plan (an applied plan's appended plan goes on alone)."""
    with store.unit_of_work() as uow:
        plan_id = uow.plans.resolve(plan_ref) if plan_ref else None
        read = uow.approvals.every if answered_too else uow.approvals.pending
        if plan_id is None or not family or uow.plans.get(plan_id).state.is_terminal:
            return read(plan_id)
        plans = [plan_id, *(c.plan_id for c in uow.plans.descendants(plan_id))]
        return [approval for each in plans for approval in read(each)]


def ready_to_go_on(store: Store) -> list[Plan]:
    """The plans that wait with nothing left to answer — their questions answered, or a
    child's run finished — so `agents plan run` takes each on. A plan whose family (it or a
    child plan) still has a question is left out, and so are a child plan its parent's run
    goes on with and a recorded sample."""
    with store.unit_of_work() as uow:
        waiting = uow.plans.in_state(PlanState.AWAITING_APPROVAL)
        if not waiting:
            return []
        asking = _with_a_question_in_the_family(uow)
        runnable = uow.plan_actions.having([p.plan_id for p in waiting])  # not a sample
        return [
            p
            for p in waiting
            if p.plan_id not in asking and p.plan_id in runnable and not _runs_with_parent(uow, p)
        ]


def goes_on_with_a_run(store: Store, plan: Plan, questions_pending: int) -> bool:
    """The plan waits with nothing left to answer (:meth:`Plan.waits_for_a_run`) and has an
    action a run goes on with: `agents demo-data`'s recorded sample has none."""
    if not plan.waits_for_a_run(questions_pending):
        return False
    with store.unit_of_work() as uow:
        return uow.plan_actions.has(plan.plan_id)


def _with_a_question_in_the_family(uow: UnitOfWork) -> set[str]:
    """Every plan with a pending question, and each of their ancestors (a parent's run waits
    on its child plans' questions)."""
    asking: set[str] = set()
    for plan_id in {a.plan_id for a in uow.approvals.pending()}:
        current: str | None = plan_id
        while current is not None and current not in asking:
            asking.add(current)
            current = uow.plans.get(current).parent_plan_id
    return asking


def _runs_with_parent(uow: UnitOfWork, plan: Plan) -> bool:
    if plan.parent_plan_id is None:
        return False
    parent = uow.plans.get(plan.parent_plan_id)
    return not (parent.state.is_terminal or parent.state is PlanState.COMPLETED)


def answer_approval(
    store: Store, approval_ref: str, *, approve: bool, by: str, reason: str | None = None
) -> Approval:
    """Record the answer once; answering twice is refused. A denial leaves the plan that
    waited on it paused there, never cancelled (engine/run/denial.py)."""
    from cleveragents_tui.engine.run.denial import pause_on_denial
    from cleveragents_tui.engine.run.with_children import run_on_when_approved

    answer = ApprovalAnswer.APPROVED if approve else ApprovalAnswer.DENIED
    with store.unit_of_work(write=True) as uow:
        answered = record_answer(uow, uow.approvals.resolve(approval_ref), answer, by, reason)
        pause_on_denial(uow, answered)
        run_on_when_approved(uow, answered)
        uow.commit()
    return answered


def record_answer(
    uow: UnitOfWork, approval_id: str, answer: ApprovalAnswer, by: str, reason: str | None
) -> Approval:
    """Answer the approval and log who did (``approval_answered``: the event log, the app's
    status line, another tab and the CLI's progress lines say it), in ``uow``'s
    transaction: every answer, a person's or the runner's, goes through here."""
    uow.approvals.answer(approval_id, answer, by, reason)
    answered = uow.approvals.get(approval_id)
    uow.events.append(
        "approval_answered",
        {"approval_id": approval_id, "answer": answer.value, "reason": reason},
        plan_id=answered.plan_id,
        actor=by,
    )
    return answered
