"""What the invariant checker reads (one snapshot of the store) and what it reports."""

from __future__ import annotations

from dataclasses import dataclass, field

from cleveragents_tui.domain.enums import SandboxStrategyName
from cleveragents_tui.domain.plan import Plan
from cleveragents_tui.store.invariant_queries import InvariantRecords


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


@dataclass(frozen=True)
class Stored(InvariantRecords):
    """Everything the checks read, loaded in one read transaction (one consistent view): the
    records, and the plans, triggers and resources read beside them."""

    plans: dict[str, Plan]
    triggers: tuple[set[str], set[str]]  # (expected, present); none expected: cannot ask
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
