"""The Plan: one run of an action through Strategize, Execute and Apply."""

from __future__ import annotations

from typing import Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

from cleveragents_tui.domain.enums import Phase, PlanState
from cleveragents_tui.domain.ids import Ulid, new_ulid
from cleveragents_tui.domain.text import RequiredText, Text
from cleveragents_tui.domain.timeutil import UtcDatetime, utc_now


class Plan(BaseModel):
    """A plan and its lifecycle position.

    ``automation_profile`` is resolved once at plan creation and locked to the plan.
    ``attempt`` increments on every correction; ``version`` is an optimistic-lock counter.
    A child plan names both its parent plan and the decision that spawned it.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    plan_id: Ulid = Field(default_factory=new_ulid)
    action: RequiredText
    title: Text | None = None
    project: Text | None = None
    phase: Phase = Phase.STRATEGIZE
    state: PlanState = PlanState.CREATED
    attempt: int = Field(default=1, ge=1)
    parent_plan_id: Ulid | None = None
    spawning_decision_id: Ulid | None = None
    automation_profile: RequiredText = "manual"
    version: int = Field(default=0, ge=0)
    created_at: UtcDatetime = Field(default_factory=utc_now)
    updated_at: UtcDatetime = Field(default_factory=utc_now)

    @model_validator(mode="after")
    def _check_rules(self) -> Self:
        if (self.parent_plan_id is None) != (self.spawning_decision_id is None):
            raise ValueError(
                "a child plan names both parent_plan_id and spawning_decision_id; "
                "a top-level plan names neither"
            )
        if self.parent_plan_id == self.plan_id:
            raise ValueError("a plan cannot be its own parent")
        if self.state is PlanState.APPLIED and self.phase is not Phase.APPLY:
            raise ValueError("only a plan in the apply phase can be applied")
        if self.updated_at < self.created_at:
            raise ValueError("updated_at must not be before created_at")
        return self

    def waits_for_a_run(self, questions_pending: int) -> bool:
        """Waiting with nothing left to answer — ``questions_pending`` counts its own and
        its child plans' — so only a run takes it on (its questions were answered, or its
        child's run is done); a run takes it on if it has an action to run
        (engine/run/approvals.py, ``goes_on_with_a_run``)."""
        return self.state is PlanState.AWAITING_APPROVAL and not questions_pending
