"""Deny is not cancel (behavior.md, "Human-in-the-Loop": the plan pauses for the user's input).

Denying an approval the plan waits on — a decision escalation, a phase or Apply gate, a
guard, a failed call's escalation (engine/run/failures.py) — records the reason and leaves the
plan **paused at that point**. The person then picks what happens next:

- **another alternative** or **guidance** for a decision not made yet (a denied
  escalation): ``agents plan resume PLAN --choose N`` / ``--guidance TEXT``; the actor
  decides that point again with it, and the profile's gate asks about the new choice;
- **a correction** of a decision already made (at the Apply gate: the one whose result was
  wrong; after a failed call: the decision that made it): ``agents plan correct``;
- **ask again**: ``agents plan resume PLAN`` asks the same question anew (``agents plan
  apply PLAN`` approves a denied Apply gate directly);
- **cancel**: ``agents plan cancel PLAN``, the only way a plan is cancelled.

A ``reconcile`` approval is not paused on: denying it discards the outside edits
(docs/reconciliation.md).
"""

from __future__ import annotations

from dataclasses import dataclass

from cleveragents_tui.domain.action import Action
from cleveragents_tui.domain.approval import Approval, ApprovalAnswer, ApprovalKind
from cleveragents_tui.domain.enums import PlanState
from cleveragents_tui.domain.plan import Plan
from cleveragents_tui.domain.timeutil import utc_now
from cleveragents_tui.store.store import Store
from cleveragents_tui.store.unit_of_work import UnitOfWork

PAUSED_EVENT = "plan_paused_on_denial"


@dataclass(frozen=True)
class Choice:
    """One thing the person can do next: ``what`` in words, ``command`` to do it."""

    what: str
    command: str


@dataclass(frozen=True)
class Denial:
    """A denied approval, the plan as it stands, and what can be done next; ``alternatives``
    are the options ``--choose N`` picks from (1-based), when the point has any."""

    approval: Approval
    plan: Plan
    choices: tuple[Choice, ...]
    alternatives: tuple[str, ...] = ()


def pause_on_denial(uow: UnitOfWork, approval: Approval) -> None:
    """Inside the unit of work that records a denial: a plan waiting on it is paused there,
    with the reason in a ``plan_paused_on_denial`` event. A plan in any other state (a
    constrained Apply's question, say) keeps its state."""
    if approval.answer is not ApprovalAnswer.DENIED or approval.kind is ApprovalKind.RECONCILE:
        return
    plan = uow.plans.get(approval.plan_id)
    if plan.state is not PlanState.AWAITING_APPROVAL:
        return
    saved = uow.plans.save(
        plan.model_copy(update={"state": PlanState.PAUSED, "updated_at": utc_now()})
    )
    uow.events.append(
        "plan_state", {"phase": saved.phase.value, "state": saved.state.value}, plan_id=plan.plan_id
    )
    uow.events.append(
        PAUSED_EVENT,
        {
            "approval_id": approval.approval_id,
            "question": approval.question,
            "reason": approval.reason,
            "by": approval.answered_by,
        },
        plan_id=plan.plan_id,
    )


def denial_of(store: Store, approval: Approval) -> Denial:
    """What a person can do after ``approval`` was denied (nothing to choose unless the
    denial paused the plan)."""
    with store.unit_of_work() as uow:
        plan = uow.plans.get(approval.plan_id)
        if approval.kind is ApprovalKind.RECONCILE or plan.state is not PlanState.PAUSED:
            return Denial(approval, plan, ())
        action = Action.model_validate(uow.plan_actions.get(plan.plan_id))
        decision = uow.decisions.get(approval.decision_id) if approval.decision_id else None
    p = plan.plan_id
    cancel = Choice("cancel the plan", f"agents plan cancel {p}")
    again = Choice("ask again", f"agents plan resume {p}")
    point = pending_point(approval)
    if point is not None:
        alternatives = alternatives_of(action, point)
        choices = [
            Choice("give guidance for this decision", f'agents plan resume {p} --guidance "..."')
        ]
        if len(alternatives) > 1:
            choices.insert(
                0, Choice("pick another alternative", f"agents plan resume {p} --choose N")
            )
        return Denial(approval, plan, (*choices, again, cancel), alternatives)
    alternatives = ()
    if decision is not None:  # a failed call's or a guard's: the decision that made the call
        target, what = decision.decision_id, "correct the decision that made the call"
        if decision.step_key is not None:
            alternatives = alternatives_of(action, decision.step_key)
    else:
        target, what = "DECISION", "correct the decision whose result was wrong (agents plan tree)"
    choices = [Choice(what, f'agents plan correct {target} --mode=revert --guidance "..."')]
    if len(alternatives) > 1:
        choices.append(
            Choice(
                "pick another alternative",
                f'agents plan correct {target} --mode=revert --choose N --guidance "..."',
            )
        )
    if approval.kind is ApprovalKind.APPLY_GATE:
        again = Choice("approve the Apply after all", f"agents plan apply {p}")
    return Denial(approval, plan, (*choices, again, cancel), alternatives)


def latest_denial(store: Store, plan_id: str) -> Approval | None:
    """The denial a paused plan stopped at, if that is why it is paused: its last pause was
    the denial's, not a person's (`agents plan pause`) after it."""
    with store.unit_of_work() as uow:
        plan = uow.plans.get(plan_id)
        if plan.state is not PlanState.PAUSED:
            return None
        kind, paused = uow.events.latest_of(plan_id, ("plan_paused", PAUSED_EVENT))
        if kind != PAUSED_EVENT:
            return None
        return uow.approvals.get(str(paused["approval_id"]))


def paused_denial(store: Store, plan_id: str) -> Denial | None:
    """What a plan paused on a denial offers next (`plan show`, the app's `R`); None when it
    is not paused on one, or ran on meanwhile."""
    denied = latest_denial(store, plan_id)
    denial = None if denied is None else denial_of(store, denied)
    return denial if denial is not None and denial.choices else None


def approve_denied_apply_gate(store: Store, plan_id: str, by: str) -> None:
    """``agents plan apply`` on a plan paused at a denied Apply gate: ``by`` approves it after
    all (a new answer; the denial stays on record) and the plan waits at the gate again."""
    denied = latest_denial(store, plan_id)
    if denied is None or denied.kind is not ApprovalKind.APPLY_GATE:
        return
    approval = Approval(
        plan_id=plan_id,
        kind=denied.kind,
        question=denied.question,
        details=denied.details,
        answer=ApprovalAnswer.APPROVED,
        answered_by=by,
        reason="agents plan apply, after the gate was denied",
        answered_at=utc_now(),
    )
    with store.unit_of_work(write=True) as uow:
        uow.approvals.add(approval)
        plan = uow.plans.get(plan_id)
        uow.plans.save(
            plan.model_copy(update={"state": PlanState.AWAITING_APPROVAL, "updated_at": utc_now()})
        )
        uow.events.append("plan_resumed", {"from": plan.state.value}, plan_id=plan_id, actor=by)
        uow.commit()


def pending_point(approval: Approval) -> str | None:
    """The decision point a denied escalation asked about before it was made, if any."""
    if approval.kind is ApprovalKind.ESCALATION and approval.gate.startswith("decision:"):
        return approval.gate.removeprefix("decision:")
    return None


def alternatives_of(action: Action, key: str) -> tuple[str, ...]:
    for point in action.decisions:
        if point.key == key:
            return tuple(a.option for a in point.alternatives)
    return ()
