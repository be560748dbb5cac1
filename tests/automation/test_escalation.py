"""Semantic escalation: the four factors from the store, the documented formula, approvals."""

from __future__ import annotations

import pytest

from cleveragents_tui.automation.escalation import (
    AutonomyController,
    EscalationContext,
    Factors,
    risk_of,
)
from cleveragents_tui.automation.profiles import load_builtin_profiles
from cleveragents_tui.domain.decision import Decision
from cleveragents_tui.domain.enums import DecisionType
from cleveragents_tui.domain.plan import Plan
from cleveragents_tui.domain.profile import AutomationFlag
from cleveragents_tui.domain.tool import ToolSpec
from cleveragents_tui.store.store import Store

NOTIFY = ToolSpec(name="local/notify", category="network", irreversible=True)
WRITE = ToolSpec(name="local/write", category="write", writes=True)


def _plan(
    store: Store, project: str = "local/app", state: str = "created", phase: str = "strategize"
) -> Plan:
    plan = Plan(action="local/x", project=project, state=state, phase=phase)
    with store.unit_of_work(write=True) as uow:
        uow.plans.add(plan)
        uow.commit()
    return plan


def _history(store: Store, plan: Plan, kind: str, kept: int, superseded: int) -> None:
    root = Decision(
        plan_id=plan.plan_id,
        sequence_number=0,
        decision_type="prompt_definition",
        phase="strategize",
        question="q",
        chosen_option="c",
    )
    items = [root]
    for i in range(kept + superseded):
        items.append(
            Decision(
                plan_id=plan.plan_id,
                parent_decision_id=root.decision_id,
                sequence_number=i + 1,
                decision_type=kind,
                phase=DecisionType(kind).phase,
                question="q",
                chosen_option=f"c{i}",
            )
        )
    fix = Decision(
        plan_id=plan.plan_id,
        parent_decision_id=root.decision_id,
        sequence_number=len(items),
        decision_type="user_intervention",
        phase="strategize",
        question="fix",
        chosen_option="fix",
        is_correction=True,
        corrects_decision_id=items[1].decision_id,
    )
    with store.unit_of_work(write=True) as uow:
        uow.decisions.add_many([*items, fix])
        uow.decisions.supersede(
            [d.decision_id for d in items[1 : 1 + superseded]], by=fix.decision_id
        )
        uow.commit()


def test_factors_come_from_the_store(store: Store) -> None:
    plan = _plan(store)
    _history(store, plan, "strategy_choice", kept=6, superseded=2)
    for _ in range(3):
        _plan(store, state="applied", phase="apply")
    context = EscalationContext(
        plan_id=plan.plan_id,
        question="q",
        decision_type=DecisionType.STRATEGY_CHOICE,
        project="local/app",
        invariant_count=3,
    )
    factors = AutonomyController(store).factors(context)
    assert factors.past_success_rate == pytest.approx((6 + 1) / (8 + 2))
    assert factors.codebase_familiarity == pytest.approx(3 / 6)
    assert factors.risk_assessment == pytest.approx(0.9)
    assert factors.invariant_complexity == pytest.approx(0.5)
    assert factors.confidence == pytest.approx(0.35 * 0.7 + 0.15 * 0.5 + 0.35 * 0.9 + 0.15 * 0.5)


def test_no_history_is_neutral_and_an_unknown_project_unfamiliar(store: Store) -> None:
    plan = _plan(store, project="local/new")
    factors = AutonomyController(store).factors(
        EscalationContext(
            plan_id=plan.plan_id,
            question="q",
            decision_type=DecisionType.TOOL_INVOCATION,
            project="local/new",
        )
    )
    assert (factors.past_success_rate, factors.codebase_familiarity) == (0.5, 0.0)


def test_risk_rises_with_irreversible_unsafe_and_writing_tools() -> None:
    assert risk_of(DecisionType.STRATEGY_CHOICE, ()) == pytest.approx(0.1)
    assert risk_of(DecisionType.TOOL_INVOCATION, (WRITE,)) == pytest.approx(0.3)
    assert risk_of(DecisionType.TOOL_INVOCATION, (NOTIFY, WRITE)) == pytest.approx(0.7)
    unsafe = ToolSpec(
        name="local/rm", category="command", unsafe=True, writes=True, irreversible=True
    )
    assert risk_of(DecisionType.ERROR_RECOVERY, (unsafe,)) == 0.9


def test_confidence_stays_in_range() -> None:
    assert Factors(1, 1, 1, 1).confidence == pytest.approx(1.0)
    assert Factors(0, 0, 0, 0).confidence == 0.0


def test_below_the_threshold_a_pending_approval_is_stored(store: Store) -> None:
    plan = _plan(store)
    profiles = load_builtin_profiles()
    controller = AutonomyController(store)
    context = EscalationContext(
        plan_id=plan.plan_id,
        question="Send the release notification?",
        decision_type=DecisionType.TOOL_INVOCATION,
        tools=(NOTIFY,),
    )
    verdict = controller.evaluate(AutomationFlag.EXECUTE_COMMAND, profiles["cautious"], context)
    assert not verdict.proceed and verdict.threshold == 0.8 and verdict.confidence < 0.8
    assert verdict.approval is not None
    with store.unit_of_work() as uow:
        [stored] = uow.approvals.pending(plan.plan_id)
    assert stored == verdict.approval
    assert stored.details["flag"] == "execute_command"
    assert stored.details["threshold"] == 0.8
    assert set(stored.details["factors"]) == {
        "past_success_rate",
        "codebase_familiarity",
        "risk_assessment",
        "invariant_complexity",
    }


def test_threshold_zero_proceeds_and_one_escalates_whatever_the_factors(store: Store) -> None:
    plan = _plan(store)
    profiles = load_builtin_profiles()
    controller = AutonomyController(store)
    context = EscalationContext(
        plan_id=plan.plan_id,
        question="q",
        decision_type=DecisionType.TOOL_INVOCATION,
        tools=(NOTIFY,),
    )
    assert controller.evaluate(AutomationFlag.EXECUTE_COMMAND, profiles["auto"], context).proceed
    assert not controller.evaluate(
        AutomationFlag.EXECUTE_COMMAND, profiles["manual"], context
    ).proceed
    with store.unit_of_work() as uow:
        assert len(uow.approvals.pending(plan.plan_id)) == 1
