"""Semantic escalation: how confident the system is that it may act alone.

Confidence is a weighted mean of four factors, each in [0, 1] where higher means "safer to
proceed" (docs/automation-profiles.md, "Semantic escalation"):

``past_success_rate``
    Of the decisions of this type ever recorded, the share never superseded by a
    correction, with Laplace smoothing: (kept + 1) / (all + 2). No history gives 0.5.
``codebase_familiarity``
    applied / (applied + 3) over this project's plans: 0 for a project never worked on,
    0.5 after three applied plans, approaching 1 with experience.
``risk_assessment``
    1 - risk, where risk = a base by decision type (0.1 Strategize, 0.15 spawns, 0.2
    Execute) + 0.4 if any tool involved is irreversible + 0.2 if any is unsafe + 0.1 if
    any writes; capped at 1.
``invariant_complexity``
    1 / (1 + invariants / 3), over the plan's current ``invariant_enforced`` decisions.

confidence = 0.35 · past_success_rate + 0.15 · codebase_familiarity
           + 0.35 · risk_assessment + 0.15 · invariant_complexity

Below the profile's threshold for the flag, the controller stores a pending approval with
the factors, the confidence and the threshold, for an interface to answer.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from cleveragents_tui.domain.approval import Approval, ApprovalKind
from cleveragents_tui.domain.enums import DecisionType, Phase
from cleveragents_tui.domain.profile import AutomationFlag, AutomationProfile
from cleveragents_tui.domain.tool import ToolSpec
from cleveragents_tui.store.store import Store

WEIGHTS = {
    "past_success_rate": 0.35,
    "codebase_familiarity": 0.15,
    "risk_assessment": 0.35,
    "invariant_complexity": 0.15,
}


@dataclass(frozen=True)
class EscalationContext:
    """What is about to happen, as far as escalation needs to know."""

    plan_id: str
    question: str
    decision_type: DecisionType | None = None
    decision_id: str | None = None
    project: str | None = None
    tools: tuple[ToolSpec, ...] = ()
    invariant_count: int = 0


@dataclass(frozen=True)
class Factors:
    past_success_rate: float
    codebase_familiarity: float
    risk_assessment: float
    invariant_complexity: float

    @property
    def confidence(self) -> float:
        total = (
            WEIGHTS["past_success_rate"] * self.past_success_rate
            + WEIGHTS["codebase_familiarity"] * self.codebase_familiarity
            + WEIGHTS["risk_assessment"] * self.risk_assessment
            + WEIGHTS["invariant_complexity"] * self.invariant_complexity
        )
        return min(1.0, max(0.0, total))


@dataclass(frozen=True)
class Verdict:
    proceed: bool
    flag: AutomationFlag
    confidence: float
    threshold: float
    factors: Factors
    approval: Approval | None = None


def risk_of(decision_type: DecisionType | None, tools: tuple[ToolSpec, ...]) -> float:
    if decision_type in (DecisionType.SUBPLAN_SPAWN, DecisionType.SUBPLAN_PARALLEL_SPAWN):
        risk = 0.15
    elif decision_type is not None and decision_type.phase is Phase.EXECUTE:
        risk = 0.2
    else:
        risk = 0.1
    risk += 0.4 if any(t.irreversible for t in tools) else 0.0
    risk += 0.2 if any(t.unsafe for t in tools) else 0.0
    risk += 0.1 if any(t.writes for t in tools) else 0.0
    return min(1.0, risk)


class AutonomyController:
    def __init__(self, store: Store) -> None:
        self._store = store

    def factors(self, context: EscalationContext) -> Factors:
        with self._store.unit_of_work() as uow:
            if context.decision_type is None:
                past = 0.5
            else:
                total, superseded = uow.decisions.type_history(context.decision_type.value)
                past = (total - superseded + 1) / (total + 2)
            applied = (
                uow.plans.states_for_project(context.project).get("applied", 0)
                if context.project
                else 0
            )
        return Factors(
            past_success_rate=past,
            codebase_familiarity=applied / (applied + 3),
            risk_assessment=1.0 - risk_of(context.decision_type, context.tools),
            invariant_complexity=1.0 / (1.0 + context.invariant_count / 3),
        )

    def evaluate(
        self,
        flag: AutomationFlag,
        profile: AutomationProfile,
        context: EscalationContext,
        *,
        kind: ApprovalKind = ApprovalKind.ESCALATION,
        key: str | None = None,
    ) -> Verdict:
        """Proceed, or store a pending approval (of ``kind``, tagged ``key``) and say so."""
        factors = self.factors(context)
        confidence = factors.confidence
        threshold = profile.threshold(flag)
        if profile.proceeds(flag, confidence):
            return Verdict(True, flag, confidence, threshold, factors)
        approval = Approval(
            plan_id=context.plan_id,
            decision_id=context.decision_id,
            kind=kind,
            question=context.question,
            details={
                "key": key,
                "flag": flag.value,
                "gates": flag.gates,
                "behaviour": flag.description,
                "profile": profile.name,
                "confidence": round(confidence, 4),
                "threshold": threshold,
                "factors": asdict(factors),
            },
        )
        with self._store.unit_of_work(write=True) as uow:
            uow.approvals.add(approval)
            uow.commit()
        return Verdict(False, flag, confidence, threshold, factors, approval)
