"""The Decision: one choice point of a plan, a node of its persistent decision tree.

Fields and validation rules follow ``spec/decision-domain-model.md``. Decisions are
immutable: a correction creates a new decision and sets ``superseded_by`` on the old ones.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Self

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

from cleveragents_tui.domain.enums import DecisionType, Phase
from cleveragents_tui.domain.errors import NotFoundError, WrongPlanError
from cleveragents_tui.domain.ids import NamespacedName, Ulid, new_ulid
from cleveragents_tui.domain.text import RequiredText, Text
from cleveragents_tui.domain.timeutil import UtcDatetime, utc_now

_SHA256_HEX = re.compile(r"^[0-9a-f]{64}$")


def _sha256_hex(value: str) -> str:
    if not _SHA256_HEX.match(value):
        raise ValueError("hot_context_hash must be a SHA-256 digest: 64 lower-case hex digits")
    return value


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ResourceRef(_Frozen):
    """A resource the decision looked at, optionally narrowed to one path inside it."""

    resource_id: NamespacedName
    path: Text | None = None


class ArtifactRef(_Frozen):
    """Something the work under a decision produced (a file, a migration, a report)."""

    artifact_path: RequiredText
    artifact_type: RequiredText


class ActorStateRef(_Frozen):
    """Where the actor's LangGraph state was when the decision was made (DESIGN.md section 5).

    Checkpoint ids are unique per thread only, so the thread is always part of the reference.
    """

    thread_id: RequiredText
    checkpoint_ns: Text = ""
    checkpoint_id: RequiredText
    node: Text | None = None
    step: int | None = None


class ContextSnapshot(_Frozen):
    """What the actor knew when it decided: enough to replay from this point."""

    hot_context_hash: Annotated[str, AfterValidator(_sha256_hex)] | None = None
    hot_context_ref: Text | None = None
    relevant_resources: tuple[ResourceRef, ...] = ()
    actor_state_ref: ActorStateRef | None = None


class Decision(_Frozen):
    """One recorded choice point. See the module docstring for the immutability rule."""

    # Identity
    decision_id: Ulid = Field(default_factory=new_ulid)
    plan_id: Ulid
    parent_decision_id: Ulid | None = None
    sequence_number: int = Field(ge=0)
    # Classification
    decision_type: DecisionType
    phase: Phase
    # Content
    question: RequiredText
    chosen_option: RequiredText
    alternatives_considered: tuple[RequiredText, ...] = ()
    confidence_score: float | None = Field(default=None, ge=0.0, le=1.0)
    # Context snapshot
    context_snapshot: ContextSnapshot = ContextSnapshot()
    # Rationale
    rationale: Text | None = None
    actor_reasoning: Text | None = None
    # Downstream impact
    downstream_decision_ids: tuple[Ulid, ...] = ()
    downstream_plan_ids: tuple[Ulid, ...] = ()
    artifacts_produced: tuple[ArtifactRef, ...] = ()
    # Timestamps
    created_at: UtcDatetime = Field(default_factory=utc_now)
    # Correction metadata
    is_correction: bool = False
    corrects_decision_id: Ulid | None = None
    correction_reason: Text | None = None
    superseded_by: Ulid | None = None
    # Which decision point of the action produced it (not in the specification's field list:
    # replays use it to tell a re-made decision from one that is still current).
    step_key: Text | None = None

    @model_validator(mode="before")
    @classmethod
    def _default_phase(cls, data: Any) -> Any:
        """A decision type with a fixed phase supplies it when the caller leaves it out."""
        if isinstance(data, dict) and data.get("phase") is None and "decision_type" in data:
            try:
                fixed = DecisionType(data["decision_type"]).phase
            except ValueError:
                return data
            if fixed is not None:
                data = {**data, "phase": fixed}
        return data

    @model_validator(mode="after")
    def _check_rules(self) -> Self:
        if self.decision_type is DecisionType.PROMPT_DEFINITION:
            if self.parent_decision_id is not None:
                raise ValueError(
                    "a prompt_definition decision is the root: parent_decision_id must be None"
                )
        elif self.parent_decision_id is None:
            raise ValueError(
                f"only a prompt_definition decision can be the root; a {self.decision_type} "
                "decision needs a parent_decision_id"
            )
        fixed = self.decision_type.phase
        if fixed is not None and self.phase is not fixed:
            raise ValueError(
                f"a {self.decision_type} decision is made during {fixed}, not {self.phase}"
            )
        if self.is_correction and self.corrects_decision_id is None:
            raise ValueError("is_correction is True, so corrects_decision_id must be set")
        if self.corrects_decision_id is not None and not self.is_correction:
            raise ValueError("corrects_decision_id is set, so is_correction must be True")
        own = self.decision_id
        for name in ("parent_decision_id", "corrects_decision_id", "superseded_by"):
            if getattr(self, name) == own:
                raise ValueError(f"{name} must not point at the decision itself")
        return self

    @property
    def is_current(self) -> bool:
        """Part of the current tree: not superseded."""
        return self.superseded_by is None

    def check_parent_plan(self, parent_plan: str | None) -> None:
        """Refuse the parent decision when it is not stored (``parent_plan`` None, the plan
        it is recorded in otherwise) or in another plan: a plan's tree stays its own."""
        parent = self.parent_decision_id
        if parent_plan is None:
            raise NotFoundError(
                f"parent decision {parent} does not exist", "record the parent first"
            )
        if parent_plan != self.plan_id:
            raise WrongPlanError(
                f"parent decision {parent} belongs to plan {parent_plan}, not {self.plan_id}",
                "a decision's parent must be in the same plan",
            )
