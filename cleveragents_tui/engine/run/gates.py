"""The runner's gates: each step the profile does not automate goes through semantic
escalation, and below the threshold a pending approval is stored and the run waits
(docs/automation.md). Approvals belong to one attempt: after a correction every gate is asked
again."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from cleveragents_tui.automation.escalation import AutonomyController, EscalationContext, Verdict
from cleveragents_tui.domain.approval import Approval, ApprovalAnswer, ApprovalKind, scoped_key
from cleveragents_tui.domain.plan import Plan
from cleveragents_tui.domain.profile import AutomationFlag, AutomationProfile
from cleveragents_tui.engine.run.errors import WaitForApproval
from cleveragents_tui.engine.run.policing import safety_switches
from cleveragents_tui.store.store import Store


@dataclass(frozen=True)
class Gates:
    """Asks, and reads the answers of, the approvals of one plan's current attempt."""

    store: Store
    plan_id: str
    profile: AutomationProfile
    escalation: AutonomyController
    plan: Callable[[], Plan]  # the plan as stored now: its attempt scopes every key

    def scoped(self, key: str) -> str:
        """``key`` in this attempt: after a correction every gate is asked again."""
        return scoped_key(key, self.plan().attempt)

    def answers(self, kind: ApprovalKind, key: str) -> list[Approval]:
        with self.store.unit_of_work() as uow:
            everything = uow.approvals.every(self.plan_id)
        scoped = self.scoped(key)
        return [a for a in everything if a.kind is kind and a.details.get("key") == scoped]

    def pending(self) -> list[Approval]:
        with self.store.unit_of_work() as uow:
            return uow.approvals.pending(self.plan_id)

    def settled(self, kind: ApprovalKind, key: str) -> bool:
        """True if a person approved this; WaitForApproval if still pending; False if never
        asked, or denied: a denial paused the plan (engine/run/denial.py), and a plan resumed
        without another choice is asked again."""
        answers = self.answers(kind, key)
        if not answers or answers[-1].answer is ApprovalAnswer.DENIED:
            return False
        latest = answers[-1]
        if latest.answer is ApprovalAnswer.APPROVED:
            return True
        raise WaitForApproval(latest)

    def gate(
        self,
        flag: AutomationFlag,
        question: str,
        key: str,
        kind: ApprovalKind = ApprovalKind.PHASE_GATE,
        context: EscalationContext | None = None,
    ) -> None:
        """Go on if the profile automates ``flag`` here or a person approved; otherwise
        store the question and raise WaitForApproval."""
        if self.settled(kind, key):
            return
        context = context or EscalationContext(
            plan_id=self.plan_id, question=question, project=self.plan().project
        )
        profile, context = safety_switches(self.profile, flag, context)
        verdict = self.escalation.evaluate(flag, profile, context, kind=kind, key=self.scoped(key))
        if not verdict.proceed:
            assert verdict.approval is not None
            raise WaitForApproval(verdict.approval)

    def escalate(self, flag: AutomationFlag, context: EscalationContext, key: str) -> Verdict:
        """Semantic escalation of ``flag`` for a step that is no phase gate (a recovery, a
        refused Apply): an approval of this attempt is stored under ``key`` when it asks."""
        return self.escalation.evaluate(
            flag, self.profile, context, kind=ApprovalKind.ESCALATION, key=self.scoped(key)
        )

    def ask(
        self, kind: ApprovalKind, key: str, question: str, decision_id: str | None = None
    ) -> Approval:
        """Store a question for a person, whatever the profile says."""
        approval = Approval(
            plan_id=self.plan_id,
            decision_id=decision_id,
            kind=kind,
            question=question,
            details={"key": self.scoped(key)},
        )
        with self.store.unit_of_work(write=True) as uow:
            uow.approvals.add(approval)
            uow.commit()
        return approval
