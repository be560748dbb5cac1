"""Correction attempts: one record per ``plan correct``, with how it ended."""

from __future__ import annotations

from typing import Any, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

from cleveragents_tui.domain.enums import CorrectionMode, CorrectionStatus
from cleveragents_tui.domain.ids import Ulid, new_ulid
from cleveragents_tui.domain.text import Text
from cleveragents_tui.domain.timeutil import UtcDatetime, utc_now


class CorrectionAttempt(BaseModel):
    """Links the corrected decision to the decision that replaced it.

    ``report`` holds the per-resource outcome of the resource rollback (rolled back /
    failed / restored); ``attempt`` is the plan attempt the correction created.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    correction_id: Ulid = Field(default_factory=new_ulid)
    plan_id: Ulid
    target_decision_id: Ulid
    mode: CorrectionMode
    guidance: Text = ""
    status: CorrectionStatus = CorrectionStatus.RUNNING
    attempt: int = Field(ge=1)
    replacement_decision_id: Ulid | None = None
    appended_plan_id: Ulid | None = None
    requested_by: Text | None = None
    report: dict[str, Any] = Field(default_factory=dict)
    created_at: UtcDatetime = Field(default_factory=utc_now)
    finished_at: UtcDatetime | None = None

    @model_validator(mode="after")
    def _check_rules(self) -> Self:
        finished = self.status is not CorrectionStatus.RUNNING
        if finished != (self.finished_at is not None):
            raise ValueError("finished_at is set exactly when the correction has ended")
        return self
