"""Pending human decisions: an escalation, an Apply gate, a spawn, a budget pause, ..."""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

from cleveragents_tui.domain.ids import Ulid, new_ulid
from cleveragents_tui.domain.text import RequiredText, Text
from cleveragents_tui.domain.timeutil import UtcDatetime, utc_now


class ApprovalKind(StrEnum):
    ESCALATION = "escalation"  # confidence below the profile's threshold
    PHASE_GATE = "phase_gate"  # a phase transition the profile does not automate
    APPLY_GATE = "apply_gate"
    SPAWN = "spawn"
    BUDGET_PAUSE = "budget_pause"
    GUARD = "guard"  # a tool call an automation guard sent to a human
    RECONCILE = "reconcile"  # sandbox files changed outside the plan: keep or discard them


class ApprovalAnswer(StrEnum):
    APPROVED = "approved"
    DENIED = "denied"


class Approval(BaseModel):
    """``details`` carries what the person needs to decide (factors, threshold, limits...)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    approval_id: Ulid = Field(default_factory=new_ulid)
    plan_id: Ulid
    decision_id: Ulid | None = None
    kind: ApprovalKind
    question: RequiredText
    details: dict[str, Any] = Field(default_factory=dict)
    requested_at: UtcDatetime = Field(default_factory=utc_now)
    answer: ApprovalAnswer | None = None
    answered_by: Text | None = None
    reason: Text | None = None
    answered_at: UtcDatetime | None = None

    @model_validator(mode="after")
    def _check_rules(self) -> Self:
        answered = (
            self.answer is not None,
            self.answered_by is not None,
            self.answered_at is not None,
        )
        if any(answered) and not all(answered):
            raise ValueError("an answered approval has its answer, who answered, and when")
        return self

    @property
    def pending(self) -> bool:
        return self.answer is None

    @property
    def gate(self) -> str:
        """The gate it asks at, its attempt left out (``decision:write`` of
        ``decision:write@2``; :func:`scoped_key`)."""
        return str(self.details.get("key") or "").rsplit("@", 1)[0]


def scoped_key(gate: str, attempt: int) -> str:
    """``gate`` in one attempt of its plan: after a correction every gate is asked again."""
    return f"{gate}@{attempt}"
