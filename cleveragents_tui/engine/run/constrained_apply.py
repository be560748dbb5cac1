"""A constrained Apply goes back to Strategize (the ``access_network`` flag).

When a resource refuses to land (the real resource changed meanwhile, a conflict), the
specification's table says: at or above the profile's ``access_network`` threshold the plan
reverts to Strategize automatically; below it the system asks whether to revert or cancel.

Reverting is a revert correction of the plan's first current Strategize decision, made by
the system with the refusal as guidance: every Execute change is rolled back, the strategy
actor re-decides knowing why Apply was refused, and the plan runs on as its profile allows.
The question is an ``escalation`` approval of the attempt: approving it reverts (on the next
``agents plan run``); denying it keeps the plan constrained, to be retried, corrected or
cancelled (``agents plan cancel``). Running the plan while the question is open retries the
Apply instead, and the question is answered "not reverted" by whoever ran it.

An Apply that landed some resource before one refused is not reverted (nor asked about): a
replay from the sandboxes' baselines would meet those landed changes as changes made outside
the plan. It stays constrained, to be retried, corrected or cancelled.

The same conflict can come back after a revert (the scripted reasoner re-makes the same
choices). Automatic reversions are therefore counted per plan; once
``safety.max_retries_per_step`` of them were made, a person is asked whatever the confidence.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cleveragents_tui.automation.escalation import EscalationContext
from cleveragents_tui.domain.apply_journal import ApplyStepState
from cleveragents_tui.domain.approval import Approval, ApprovalAnswer, ApprovalKind
from cleveragents_tui.domain.correction import CorrectionAttempt
from cleveragents_tui.domain.enums import DecisionType, Phase, PlanState
from cleveragents_tui.domain.plan import Plan
from cleveragents_tui.domain.profile import AutomationFlag
from cleveragents_tui.engine.run import reversion
from cleveragents_tui.engine.run.approvals import record_answer
from cleveragents_tui.store.store import Store

if TYPE_CHECKING:
    from cleveragents_tui.engine.run.runner import PlanRunner

KEY = "revert-constrained-apply"
REVERTED_EVENT = "constrained_apply_reverted"
REQUESTED_BY = "system (constrained Apply)"


def after_refusal(runner: PlanRunner, reason: str) -> Plan:
    """The Apply was just refused with ``reason`` (the plan is Apply · constrained): revert
    to Strategize if the profile lets the system do it alone, otherwise ask."""
    target = _first_strategy_decision(runner)
    if target is None or _landed_some(runner):
        # Nothing to re-decide; or a resource already landed this attempt's changes, which a
        # replay from the baselines would meet as a change made outside: retry, correct or
        # cancel by hand.
        return runner.plan()
    question = (
        f"Apply was refused: {reason}. Approve to revert to Strategize and re-plan; deny to "
        f"keep the plan constrained (retry with agents plan run, or agents plan cancel)"
    )
    if runner.gates.answers(ApprovalKind.ESCALATION, KEY):
        return runner.plan()  # asked already in this attempt
    if _reversions(runner) >= runner.profile.safety.max_retries_per_step:
        _ask_anyway(runner, question, target)
        return runner.plan()
    context = EscalationContext(
        plan_id=runner.plan_id,
        question=question,
        decision_type=DecisionType.STRATEGY_CHOICE,
        decision_id=target,
        project=runner.plan().project,
    )
    verdict = runner.gates.escalate(AutomationFlag.ACCESS_NETWORK, context, KEY)
    if not verdict.proceed:
        return runner.plan()
    return _revert(runner, target, reason)


def answered(runner: PlanRunner) -> Plan | None:
    """Before a constrained Apply is retried: an approved question reverts to Strategize
    (returns where the plan stopped); a denied one retries the Apply (None); an open one is
    answered "not reverted" by the runner's user and the Apply is retried (None)."""
    answers = runner.gates.answers(ApprovalKind.ESCALATION, KEY)
    if not answers:
        return None
    latest = answers[-1]
    if latest.answer is ApprovalAnswer.APPROVED:
        target = _first_strategy_decision(runner)
        if target is not None:
            return _revert(runner, target, latest.question)
        return None
    if latest.answer is None:
        with runner.store.unit_of_work(write=True) as uow:
            record_answer(
                uow,
                latest.approval_id,
                ApprovalAnswer.DENIED,
                runner.options.user,
                "not reverted: the Apply was retried instead",
            )
            uow.commit()
    return None


def _revert(runner: PlanRunner, target: str, reason: str) -> Plan:
    def previewed() -> None:  # a refusal (one line, exit 2 in the CLI) leaves it constrained
        with runner.store.unit_of_work(write=True) as uow:
            uow.events.append(
                REVERTED_EVENT, {"decision": target, "reason": reason}, plan_id=runner.plan_id
            )
            uow.commit()

    return reversion.reverter()(
        runner.store,
        reversion.Reversion(
            target,
            f"Apply was refused: {reason}",
            requested_by=REQUESTED_BY,
            options=runner.options,
            sandbox_base=runner.options.sandbox_base,
            previewed=previewed,
        ),
    )


def _ask_anyway(runner: PlanRunner, question: str, target: str) -> None:
    approval = Approval(
        plan_id=runner.plan_id,
        decision_id=target,
        kind=ApprovalKind.ESCALATION,
        question=question,
        details={
            "key": runner.gates.scoped(KEY),
            "flag": AutomationFlag.ACCESS_NETWORK.value,
            "gates": AutomationFlag.ACCESS_NETWORK.gates,
            "profile": runner.profile.name,
            "reversions": _reversions(runner),
            "max_retries_per_step": runner.profile.safety.max_retries_per_step,
        },
    )
    with runner.store.unit_of_work(write=True) as uow:
        uow.approvals.add(approval)
        uow.commit()


def _reversions(runner: PlanRunner) -> int:
    with runner.store.unit_of_work() as uow:
        return len(uow.events.payloads(runner.plan_id, REVERTED_EVENT))


def _landed_some(runner: PlanRunner) -> bool:
    """Whether this Apply landed any resource (the plan's own, or a child plan's) before one
    refused."""
    with runner.store.unit_of_work() as uow:
        plans = [uow.plans.get(runner.plan_id), *uow.plans.children(runner.plan_id)]
        return any(
            step.state is ApplyStepState.LANDED
            for plan in plans
            for step in uow.apply_journal.for_apply(plan.plan_id, plan.attempt)
        )


def revert_approved(store: Store, plan: Plan) -> bool:
    """Whether ``plan apply`` would revert ``plan`` to Strategize instead of landing it: its
    Apply was refused in this attempt and a person approved the question (:func:`answered`),
    read only (``plan apply --dry-run``)."""
    if plan.phase is not Phase.APPLY or plan.state is not PlanState.CONSTRAINED:
        return False
    with store.unit_of_work() as uow:
        everything = uow.approvals.every(plan.plan_id)
    scoped = f"{KEY}@{plan.attempt}"  # as PlanGates.scoped keys it
    answers = [
        a
        for a in everything
        if a.kind is ApprovalKind.ESCALATION and a.details.get("key") == scoped
    ]
    return (
        bool(answers)
        and answers[-1].answer is ApprovalAnswer.APPROVED
        and first_strategy_decision(store, plan.plan_id) is not None
    )


def _first_strategy_decision(runner: PlanRunner) -> str | None:
    return first_strategy_decision(runner.store, runner.plan_id)


def first_strategy_decision(store: Store, plan_id: str) -> str | None:
    """The plan's first current Strategize decision below its prompt: reverting it rolls
    back all Execute work and re-runs Strategize from there."""
    with store.unit_of_work() as uow:
        return uow.decisions.first_current(
            plan_id, Phase.STRATEGIZE.value, DecisionType.PROMPT_DEFINITION.value
        )


def reverted_into(store: Store, plan: Plan) -> CorrectionAttempt | None:
    """The correction that made the plan's current attempt by reverting a constrained Apply,
    if that is how the attempt began: `plan apply` and `plan run` say so, since the Apply
    they asked for did not land."""
    with store.unit_of_work() as uow:
        corrections = uow.corrections.for_plan(plan.plan_id)
    latest = corrections[-1] if corrections else None
    if latest is None or latest.requested_by != REQUESTED_BY or latest.attempt != plan.attempt:
        return None
    return latest
