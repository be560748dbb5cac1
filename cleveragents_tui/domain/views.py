"""Read models: what the read services return and the interfaces render. Plain data, no I/O."""

from __future__ import annotations

from dataclasses import dataclass, field

from cleveragents_tui.domain.checkpoint import CheckpointMetadata
from cleveragents_tui.domain.correction import CorrectionAttempt
from cleveragents_tui.domain.decision import Decision
from cleveragents_tui.domain.plan import Plan
from cleveragents_tui.domain.tool import ToolInvocation


@dataclass(frozen=True, slots=True)
class TreeRow:
    """The few columns a tree line needs; cheap enough to load 100,000 of."""

    decision_id: str
    parent_decision_id: str | None
    sequence_number: int
    decision_type: str
    phase: str
    chosen_option: str
    confidence_score: float | None
    is_correction: bool
    corrects_decision_id: str | None
    superseded_by: str | None


@dataclass(frozen=True, slots=True)
class TreeLine:
    """One decision in display order, with its depth and whether it is the last sibling."""

    row: TreeRow
    depth: int
    is_last: bool


@dataclass(frozen=True)
class PlanTree:
    plan: Plan
    show_superseded: bool
    lines: list[TreeLine]
    hidden_superseded: int
    has_checkpoints: frozenset[str] = frozenset()


@dataclass(frozen=True)
class PlanSummary:
    plan: Plan
    decision_count: int
    current_decision_count: int
    pending_approvals: int
    depth: int = 0


@dataclass(frozen=True)
class UsageFigures:
    """What a plan used (engine/run/policing.py checks the same figures against its limits)."""

    model_calls: int = 0
    tokens: int = 0
    cost_usd: float = 0.0
    unpriced_calls: int = 0  # calls of a model with no price: counted as $0
    tool_calls: int = 0


@dataclass(frozen=True)
class PlanDetails:
    summary: PlanSummary
    decisions_by_type: dict[str, int]
    children: list[Plan]
    corrections: list[CorrectionAttempt]
    checkpoint_count: int
    root_decision_id: str | None
    error: str | None = None  # why it is errored, when a run failed (browse.run_failure)
    model: str | None = None  # the chat model it runs with (PROVIDER:MODEL); None: scripted
    model_base_url: str | None = None  # the server it asks that model at; None: the default
    children_pending: int = 0  # approvals its child plans (and theirs) wait on
    goes_on_with_a_run: bool = False  # nothing left to answer, and an action to run on
    usage: UsageFigures = UsageFigures()


@dataclass(frozen=True)
class DecisionExplanation:
    decision: Decision
    plan: Plan
    parent: Decision | None
    children: list[TreeRow]
    dependents: list[str]
    depends_on: list[str]
    tool_invocations: list[ToolInvocation] = field(default_factory=list)
    checkpoints: list[CheckpointMetadata] = field(default_factory=list)
    superseded_by: Decision | None = None
