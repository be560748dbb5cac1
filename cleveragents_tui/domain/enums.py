"""Enumerations shared across the domain: phases, decision types, plan states, strategies."""

from __future__ import annotations

from enum import StrEnum


class Phase(StrEnum):
    """The three phases of a plan: read-only reasoning, sandboxed work, landing it."""

    STRATEGIZE = "strategize"
    EXECUTE = "execute"
    APPLY = "apply"


class DecisionType(StrEnum):
    """The 11 kinds of choice point a plan records (decision-domain-model.md)."""

    PROMPT_DEFINITION = "prompt_definition"
    INVARIANT_ENFORCED = "invariant_enforced"
    STRATEGY_CHOICE = "strategy_choice"
    IMPLEMENTATION_CHOICE = "implementation_choice"
    RESOURCE_SELECTION = "resource_selection"
    SUBPLAN_SPAWN = "subplan_spawn"
    SUBPLAN_PARALLEL_SPAWN = "subplan_parallel_spawn"
    TOOL_INVOCATION = "tool_invocation"
    ERROR_RECOVERY = "error_recovery"
    VALIDATION_RESPONSE = "validation_response"
    USER_INTERVENTION = "user_intervention"

    @property
    def phase(self) -> Phase | None:
        """The phase a decision of this type is made in; ``None`` means any phase."""
        return DECISION_TYPE_PHASE[self]


DECISION_TYPE_PHASE: dict[DecisionType, Phase | None] = {
    DecisionType.PROMPT_DEFINITION: Phase.STRATEGIZE,
    DecisionType.INVARIANT_ENFORCED: Phase.STRATEGIZE,
    DecisionType.STRATEGY_CHOICE: Phase.STRATEGIZE,
    DecisionType.IMPLEMENTATION_CHOICE: Phase.EXECUTE,
    DecisionType.RESOURCE_SELECTION: Phase.EXECUTE,
    DecisionType.SUBPLAN_SPAWN: Phase.STRATEGIZE,
    DecisionType.SUBPLAN_PARALLEL_SPAWN: Phase.STRATEGIZE,
    DecisionType.TOOL_INVOCATION: Phase.EXECUTE,
    DecisionType.ERROR_RECOVERY: Phase.EXECUTE,
    DecisionType.VALIDATION_RESPONSE: Phase.EXECUTE,
    DecisionType.USER_INTERVENTION: None,
}


class PlanState(StrEnum):
    """Where a plan is in its lifecycle, within its current phase.

    ``created`` means not started; ``completed`` means the last phase's work is done and
    waits for Apply; ``applied`` and ``cancelled`` are terminal.
    """

    CREATED = "created"
    RUNNING = "running"
    PAUSED = "paused"
    AWAITING_APPROVAL = "awaiting_approval"
    COMPLETED = "completed"
    CONSTRAINED = "constrained"
    ERRORED = "errored"
    APPLIED = "applied"
    CANCELLED = "cancelled"

    @property
    def is_terminal(self) -> bool:
        return self in (PlanState.APPLIED, PlanState.CANCELLED)


class SandboxStrategyName(StrEnum):
    """How a resource is isolated during Execute (ADR-035, strategy table)."""

    GIT_WORKTREE = "git_worktree"
    FILESYSTEM_COPY = "filesystem_copy"
    OVERLAY = "overlay"
    TRANSACTION_ROLLBACK = "transaction_rollback"
    NONE = "none"

    @property
    def rollbackable(self) -> bool:
        return self is not SandboxStrategyName.NONE


class CheckpointType(StrEnum):
    DECISION_POINT = "decision_point"
    NON_ROLLBACKABLE = "non_rollbackable"
    PRE_WRITE = "pre_write"


class CheckpointGroupStatus(StrEnum):
    PENDING = "pending"
    COMMITTED = "committed"


class DependencyType(StrEnum):
    DECISION = "decision"
    PLAN = "plan"


class CorrectionMode(StrEnum):
    REVERT = "revert"
    APPEND = "append"


class CorrectionStatus(StrEnum):
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
