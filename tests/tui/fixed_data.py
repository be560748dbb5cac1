"""A small plan with fixed ids and timestamps, for deterministic SVG snapshots."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from cleveragents_tui.domain.decision import Decision
from cleveragents_tui.domain.enums import DecisionType, Phase, PlanState
from cleveragents_tui.domain.plan import Plan
from cleveragents_tui.store.store import Store

T0 = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def uid(n: int, kind: str = "D") -> str:
    """A valid fixed ULID: 26 Crockford characters."""
    return f"01JAAAAAAA{kind}{n:015d}"


PLAN = uid(1, "P")
CHILD = uid(2, "P")


def build_fixed(store: Store) -> dict[str, str]:
    plan = Plan(
        plan_id=PLAN,
        action="demo/add-greeting",
        phase=Phase.EXECUTE,
        state=PlanState.AWAITING_APPROVAL,
        attempt=2,
        automation_profile="auto",
        created_at=T0,
        updated_at=T0 + timedelta(minutes=5),
    )
    child = Plan(
        plan_id=CHILD,
        action="demo/write-docs",
        phase=Phase.EXECUTE,
        state=PlanState.COMPLETED,
        automation_profile="auto",
        parent_plan_id=PLAN,
        spawning_decision_id=uid(4),
        created_at=T0,
        updated_at=T0 + timedelta(minutes=3),
    )
    other = Plan(
        plan_id=uid(3, "P"),
        action="ops/fix-ci [urgent]",
        automation_profile="manual",
        created_at=T0 + timedelta(hours=1),
        updated_at=T0 + timedelta(hours=1),
    )
    spec: list[tuple[int, int | None, DecisionType, str, float | None, dict[str, object]]] = [
        (1, None, DecisionType.PROMPT_DEFINITION, "Add a `hello NAME` command", None, {}),
        (2, 1, DecisionType.INVARIANT_ENFORCED, "Keep the public API unchanged", 0.95, {}),
        (3, 1, DecisionType.STRATEGY_CHOICE, "A plain function registered in COMMANDS", 0.7, {}),
        (4, 3, DecisionType.SUBPLAN_SPAWN, "Spawn a child plan for the user guide", 0.85, {}),
        (5, 3, DecisionType.IMPLEMENTATION_CHOICE, "hello_cli/greet.py with hello()", 0.8, {}),
        (
            6,
            5,
            DecisionType.TOOL_INVOCATION,
            "A row in the releases table [v1.1]",
            0.85,
            {},
        ),
        (7, 5, DecisionType.TOOL_INVOCATION, "Notify #hello-cli", 0.7, {}),
        (
            8,
            5,
            DecisionType.USER_INTERVENTION,
            "record rc1",
            None,
            {
                "is_correction": True,
                "corrects_decision_id": uid(6),
                "correction_reason": "record rc1",
            },
        ),
        (9, 8, DecisionType.TOOL_INVOCATION, "A row in the releases table: 1.1.0rc1", 0.9, {}),
    ]
    decisions = [
        Decision(
            decision_id=uid(n),
            plan_id=PLAN,
            parent_decision_id=uid(p) if p else None,
            sequence_number=n,
            decision_type=kind,
            phase=Phase.STRATEGIZE if n <= 4 else Phase.EXECUTE,
            question=f"Question {n}?",
            chosen_option=chosen,
            confidence_score=conf,
            alternatives_considered=("another way",) if n > 1 else (),
            rationale=f"because {n}",
            created_at=T0 + timedelta(seconds=n),
            **extra,
        )
        for n, p, kind, chosen, conf, extra in spec
    ]
    with store.unit_of_work(write=True) as uow:
        uow.plans.add(plan)
        uow.plans.add(other)
        uow.flush()
        uow.decisions.add_many(decisions)
        uow.flush()
        uow.decisions.supersede([uid(6), uid(7)], by=uid(8))
        uow.plans.add(child)
        uow.commit()
    return {"plan": PLAN, "record": uid(6), "correction": uid(8), "strategy": uid(3)}
