"""What the invariant checker reads (one snapshot of the store) and what it reports."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from cleveragents_tui.domain.checkpoint import CheckpointGroup, CheckpointMetadata
from cleveragents_tui.domain.correction import CorrectionAttempt
from cleveragents_tui.domain.decision import Decision
from cleveragents_tui.domain.enums import SandboxStrategyName
from cleveragents_tui.domain.plan import Plan


@dataclass(frozen=True)
class Violation:
    invariant: str
    subject: str
    message: str


@dataclass(frozen=True)
class InvariantReport:
    violations: list[Violation]
    checked: dict[str, int]

    @property
    def ok(self) -> bool:
        return not self.violations


@dataclass
class Stored:
    """Everything the checks read, loaded in one read transaction (one consistent view)."""

    plans: dict[str, Plan]
    decisions: list[Decision]
    invalid: list[tuple[str, str]]  # (decision id, why): rows that are no valid decision
    groups: list[CheckpointGroup]
    checkpoints: list[CheckpointMetadata]
    corrections: list[CorrectionAttempt]
    run_here: set[str]
    contexts: dict[str, str]
    triggers: tuple[set[str], set[str]]  # (expected, present); none expected: cannot ask
    applied_at: dict[str, datetime]
    last_event: dict[str, datetime]
    resources: dict[str, SandboxStrategyName]
    locations: dict[str, str]


@dataclass
class Findings:
    violations: list[Violation] = field(default_factory=list)
    checked: dict[str, int] = field(default_factory=dict)

    def examined(self, invariant: str, things: int = 1) -> None:
        self.checked[invariant] = self.checked.get(invariant, 0) + things

    def add(self, invariant: str, subject: str, message: str) -> None:
        self.violations.append(Violation(invariant, subject, message))
